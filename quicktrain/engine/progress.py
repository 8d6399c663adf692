"""A progress bar that does not slow training: it reads the loss (a device sync) only
every ``refresh`` updates, not on every iteration."""

from __future__ import annotations

from collections.abc import Callable

from ignite.engine import Engine, Events
from tqdm import tqdm


def attach_progress(trainer: Engine, total_epochs: int, refresh: int = 10, enabled: bool = True) -> Callable[[], None]:
    """Attach per-epoch bars; returns a function that closes an open bar.

    The caller closes it on errors: a handler on Ignite's EXCEPTION_RAISED would make
    Ignite swallow the exception instead of re-raising it."""
    bar: dict[str, tqdm] = {}

    def close() -> None:
        if "epoch" in bar:
            bar.pop("epoch").close()

    if not enabled:
        return close

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

    trainer.add_event_handler(Events.EPOCH_COMPLETED | Events.TERMINATE, lambda _: close())
    return close
