"""Seeds derived one-way from a run's seed, one per purpose.

A run has one seed (public, or secret until the run is over).  What is built
(weights, a model's initial state), what is fed (the inputs) and how calls are
ordered (decoy calls, the order of cases) each get a seed of their own, derived
with SHA-256: a kernel that reads back the seed its process was given (for
instance ``torch.initial_seed()`` after being built) learns nothing about the seeds
of the inputs or of the call order.
"""
from __future__ import annotations

import hashlib

PURPOSES = ("build", "inputs", "order")


def derive_seed(seed: int, purpose: str) -> int:
    """A 31-bit seed for ``purpose`` from the run's ``seed`` (deterministic, one-way)."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown seed purpose {purpose!r} (one of {', '.join(PURPOSES)})")
    digest = hashlib.sha256(f"kcontract-seed/{purpose}/{int(seed)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
