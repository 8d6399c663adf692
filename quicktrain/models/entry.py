"""The model registry's table: names -> factories, filled by ``@register`` (our nets) and read by
:mod:`quicktrain.models.registry`. A leaf, so the nets and the external resolvers import it without
a circle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

# factory(num_classes, image_size, hub_weights, **model_keywords) -> nn.Module
Factory = Callable[..., nn.Module]


@dataclass(frozen=True)
class ModelEntry:
    name: str
    factory: Factory
    description: str
    test: bool = False  # a tiny variant for tests
    note: Callable[[int], str] | None = None  # image_size -> how the net is adapted to it, for the banner


_REGISTRY: dict[str, ModelEntry] = {}


def register(name: str, description: str, test: bool = False) -> Callable[[Factory], Factory]:
    def add(factory: Factory) -> Factory:
        _REGISTRY[name] = ModelEntry(name, factory, description, test)
        return factory

    return add
