"""Speed techniques, each one module behind one protocol, resolved once into an object that may do nothing.

:mod:`~quicktrain.techniques.registry` lists them (torch-free); :mod:`~quicktrain.techniques.base`
is the protocol; :func:`resolve_techniques` resolves every registered one for a run. CPU-only
techniques live in :mod:`~quicktrain.techniques.cpu`, CUDA-only ones in :mod:`~quicktrain.techniques.cuda`.
This package imports torch only when one of the names below is used, so the registry can be
read without it.
"""

from __future__ import annotations

from quicktrain.lazy import lazy_attributes

_LAZY = {
    "Accumulation": "quicktrain.techniques.accumulation",
    "micro_weights": "quicktrain.techniques.accumulation",
    "plan_epoch": "quicktrain.techniques.accumulation",
    "split_batch": "quicktrain.techniques.accumulation",
    "split_sizes": "quicktrain.techniques.accumulation",
    "Technique": "quicktrain.techniques.base",
    "Distributed": "quicktrain.techniques.distributed",
    "resolve_distributed": "quicktrain.techniques.distributed",
    "maybe_compile": "quicktrain.techniques.layout",
    "memory_format": "quicktrain.techniques.layout",
    "unwrap": "quicktrain.techniques.layout",
    "Pinning": "quicktrain.techniques.pinning",
    "resolve_pinning": "quicktrain.techniques.pinning",
    "Precision": "quicktrain.techniques.precision",
    "cpu_supports_bf16": "quicktrain.techniques.precision",
    "resolve_precision": "quicktrain.techniques.precision",
    "Techniques": "quicktrain.techniques.resolve",
    "resolve_techniques": "quicktrain.techniques.resolve",
    "Spec": "quicktrain.techniques.registry",
    "register": "quicktrain.techniques.registry",
    "specs": "quicktrain.techniques.registry",
}


__getattr__ = lazy_attributes("quicktrain.techniques", _LAZY)


__all__ = sorted(_LAZY)
