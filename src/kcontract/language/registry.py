"""Names the contract language can refer to that Python provides.

Measurement protocols, signature detectors and oracles are implemented in
:mod:`kcontract.classes` (the vocabulary of the suite) and register themselves
here with a declaration the loader validates contract files against: a
protocol's parameters and the extra names it provides to expressions.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Mapping


@dataclass(frozen=True)
class ProtocolSpec:
    name: str
    run: Callable  # run(ctx) -> ContractResult  (see kcontract.check.engine)
    #: parameter name -> (python type or tuple of types, default)
    params: Mapping[str, tuple] = field(default_factory=dict)
    #: extra array names this protocol binds in expressions (besides out, ref, ...)
    provides: tuple[str, ...] = ()
    description: str = ""
    #: the oracles (names of :data:`ORACLES`) this protocol measures against; a contract
    #: naming another one is malformed
    oracles: tuple[str, ...] = ()


@dataclass(frozen=True)
class DetectorSpec:
    name: str
    run: Callable  # run(ctx, evidence) -> kcontract.check.verdict.Diagnosis
    description: str = ""


PROTOCOLS: dict[str, ProtocolSpec] = {}
DETECTORS: dict[str, DetectorSpec] = {}
#: oracle name -> description.  The reference each computes is in
#: :mod:`kcontract.classes.oracles` (resolved by the runner and handed to the engine).
ORACLES: dict[str, str] = {
    "fp64": "the op's float64 reference on the kernel's (rounded) inputs",
    "unfused": "the float64 composition of the fused op's reference stages (or the declared "
               "approximation of one of them, e.g. approximation=tanh)",
    "policy": "the declared policy applied to the float64 reference (exceptional values, indices)",
    "self": "the kernel's own outputs under other conditions (reruns, batches, configurations); "
            "the float64 reference gives the tolerance quantities",
}


def protocol(name: str, *, params: Mapping[str, tuple] | None = None,
             provides: tuple[str, ...] = (), description: str = "",
             oracles: tuple[str, ...] = tuple(ORACLES)):
    def deco(fn):
        PROTOCOLS[name] = ProtocolSpec(name, fn, dict(params or {}), tuple(provides), description,
                                       tuple(oracles))
        return fn
    return deco


def detector(name: str, description: str = ""):
    def deco(fn):
        DETECTORS[name] = DetectorSpec(name, fn, description)
        return fn
    return deco


_LOADED = False


def load_all() -> None:
    """Import the modules that register protocols and detectors."""
    global _LOADED
    if not _LOADED:
        importlib.import_module("kcontract.classes")
        _LOADED = True


def protocols() -> Mapping[str, ProtocolSpec]:
    load_all()
    return PROTOCOLS


def detectors() -> Mapping[str, DetectorSpec]:
    load_all()
    return DETECTORS
