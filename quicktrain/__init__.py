"""quicktrain: fast, measured image-classification training.

Example:
    >>> import quicktrain
    >>> cfg = quicktrain.Config.from_overrides({"model.name": "test_vit", "run.epochs": 1})
    >>> cfg.accumulation()
    (128, 1)
"""

__version__ = "0.1.0"

from quicktrain.config import Config
from quicktrain.engine import RunResult, train
from quicktrain.models import create_model, list_models

__all__ = ["Config", "RunResult", "__version__", "create_model", "list_models", "train"]
