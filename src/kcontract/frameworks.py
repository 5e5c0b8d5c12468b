"""The frameworks kcontract knows: one line each (the adapters' registry).

Kept apart from :mod:`kcontract.adapters` so that the contract language can name the
frameworks (``scope.frameworks``) without importing any adapter.
"""
from __future__ import annotations

#: framework name -> "module:Class": a module of :mod:`kcontract.adapters`, or a dotted
#: module path (imported only when the framework is used)
REGISTRY: dict[str, str] = {
    "numpy": "numpy_adapter:NumpyAdapter",
    "torch": "torch_adapter:TorchAdapter",
    "jax": "jax_adapter:JaxAdapter",
}
#: the registered names, a live view of REGISTRY
FRAMEWORKS = REGISTRY.keys()
