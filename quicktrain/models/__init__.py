"""Model registry over timm. Importing this package registers every network."""

from quicktrain.models import nets as _nets  # noqa: F401 - registers the models
from quicktrain.models import speedrun as _speedrun  # noqa: F401
from quicktrain.models.entry import ModelEntry, register
from quicktrain.models.registry import check_model, create_model, list_models, load_weights

__all__ = ["ModelEntry", "check_model", "create_model", "list_models", "load_weights", "register"]
