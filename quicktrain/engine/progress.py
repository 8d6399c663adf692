"""A progress bar that does not slow training: it reads the loss (a device sync) only
every ``refresh`` updates, not on every iteration."""

from __future__ import annotations

from ignite.engine import Engine, Events
from tqdm import tqdm


def attach_progress(trainer: Engine, total_epochs: int, refresh: int = 10, enabled: bool = True) -> None:
    if not enabled:
        return
    bar: dict[str, tqdm] = {}

    @trainer.on(Events.EPOCH_STARTED)
    def _open(engine: Engine) -> None:
        bar["epoch"] = tqdm(
            total=engine.state.epoch_length,
            desc=f"epoch {engine.state.epoch}/{total_epochs}",
            unit="upd",
            leave=False,
            dynamic_ncols=True,
        )

    @trainer.on(Events.ITERATION_COMPLETED)
    def _advance(engine: Engine) -> None:
        b = bar["epoch"]
        b.update(1)
        if b.n % refresh == 0 or b.n == b.total:
            b.set_postfix(loss=f"{engine.state.output.loss.item():.3f}", refresh=False)

    @trainer.on(Events.EPOCH_COMPLETED | Events.TERMINATE | Events.EXCEPTION_RAISED)
    def _close(engine: Engine, *_: object) -> None:
        if "epoch" in bar:
            bar.pop("epoch").close()
