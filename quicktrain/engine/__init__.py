"""State, the optimizer step, the Ignite epoch loop and checkpoints."""

from quicktrain.engine.state import Counters, StepMetrics, TrainState
from quicktrain.engine.step import train_step
from quicktrain.engine.trainer import RunResult, train

__all__ = ["Counters", "RunResult", "StepMetrics", "TrainState", "train", "train_step"]
