"""Model registry over timm. Importing this package registers every network."""

from quicktrain.models import nets as _nets  # noqa: F401 - registers the models
from quicktrain.models import speedrun as _speedrun  # noqa: F401
from quicktrain.models.registry import ModelEntry, check_model, create_model, list_models, load_weights, register

__all__ = ["ModelEntry", "check_model", "create_model", "list_models", "load_weights", "register"]
