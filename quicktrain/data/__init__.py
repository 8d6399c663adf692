"""Datasets decoded once into uint8 arrays, epoch-seeded loaders, device-side preparation."""

from quicktrain.data.arrays import Arrays, Split, balanced_subset
from quicktrain.data.loader import make_loader, set_epoch
from quicktrain.data.prepare import InputPipeline
from quicktrain.data.sources import DATASETS, load_arrays

__all__ = ["DATASETS", "Arrays", "InputPipeline", "Split", "balanced_subset", "load_arrays", "make_loader", "set_epoch"]
