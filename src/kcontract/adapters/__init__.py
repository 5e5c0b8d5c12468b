"""Framework adapters behind one small interface; heavy frameworks load lazily."""
from __future__ import annotations

from ..errors import UsageError, did_you_mean
from .base import Adapter

FRAMEWORKS = ("numpy", "torch")


def get_adapter(name: str) -> Adapter:
    if name == "numpy":
        from .numpy_adapter import NumpyAdapter
        return NumpyAdapter()
    if name == "torch":
        from .torch_adapter import TorchAdapter
        a = TorchAdapter()
        if not a.available():
            raise UsageError("--framework torch needs torch: pip install 'kcontract[torch]'")
        return a
    raise UsageError(f"unknown framework {name!r}{did_you_mean(name, FRAMEWORKS)}; "
                     f"known: {', '.join(FRAMEWORKS)}")


__all__ = ["Adapter", "FRAMEWORKS", "get_adapter"]
