"""cross_entropy: log-softmax + negative log-likelihood, the mean over rows.

``cross_entropy(logits, target, ignore_index=-100)``: logits (R, C), target int64 (R,);
the result is a 0-d array in the logits' dtype,

    loss_r = logsumexp(logits[r]) - logits[r, target[r]]
    out    = mean of loss_r over the rows whose target != ignore_index

(torch's ``reduction='mean'``; NaN when every row is ignored).  A target outside
[0, C) that is not ``ignore_index`` gets the declared ``oob`` policy (default
``raise``); :func:`policy_losses` says what each policy prescribes.

Inputs: the ``rand`` family is the naive benchmark's (every target valid); every other
family also marks about one row in eight with ``ignore_index``, so a kernel that
divides by R instead of the number of counted rows, or that gathers at the ignore
index, is seen.
"""
from __future__ import annotations

import numpy as np

from .base import Op
from .families import get_family

IGNORE_INDEX = -100


def logsumexp(x: np.ndarray) -> np.ndarray:
    """Row-wise log(sum(exp(x))), shifted by the row maximum (float64)."""
    with np.errstate(all="ignore"):
        m = np.max(x, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        return (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[..., 0]


def policy_losses(logits: np.ndarray, target: np.ndarray, policy: str = "raise",
                  ignore_index: int = IGNORE_INDEX) -> tuple[np.ndarray, np.ndarray]:
    """Per-row losses and the mask of counted rows under the ``oob`` policy: clamp
    (target clipped into [0, C)), wrap (target mod C), zero (the gathered logit is 0,
    as a zero-filling gather gives); raise and undefined give NaN losses there."""
    C = logits.shape[-1]
    t = np.asarray(target).astype(np.int64)
    counted = t != ignore_index
    inb = (t >= 0) & (t < C)
    src = {"clamp": np.clip(t, 0, C - 1), "wrap": np.mod(t, C)}.get(policy, np.where(inb, t, 0))
    picked = np.take_along_axis(logits, src[:, None], axis=-1)[:, 0]
    if policy == "zero":
        picked = np.where(inb, picked, 0.0)
    elif policy not in ("clamp", "wrap"):
        picked = np.where(inb, picked, np.nan)
    with np.errstate(all="ignore"):
        loss = logsumexp(logits) - picked
    return loss, counted


class TargetPolicy:
    """The out-of-range semantics of cross_entropy's targets, for the ``oob`` protocol
    (C-EXC-02): targets must lie in [0, C) unless they equal ``ignore_index``."""

    def __init__(self, ignore_index: int = IGNORE_INDEX):
        self.ignore_index = ignore_index

    def bound(self, inputs) -> int:
        return int(np.shape(inputs["logits"])[-1])

    def with_index(self, inputs, value: int, positions: int, rng) -> dict:
        t = np.array(inputs["target"], copy=True)
        counted = np.flatnonzero(t != self.ignore_index)
        pos = rng.choice(counted, size=min(positions, counted.size), replace=False)
        t[pos] = value
        return {"logits": inputs["logits"], "target": t}

    def expected(self, inputs, policy: str) -> np.ndarray:
        logits = np.asarray(inputs["logits"], dtype=np.float64)
        loss, counted = policy_losses(logits, inputs["target"], policy, self.ignore_index)
        with np.errstate(all="ignore"):
            return np.asarray(np.sum(np.where(counted, loss, 0.0)) / np.count_nonzero(counted))


class CrossEntropy(Op):
    #: the loss depends on every row (its mean), each row on its whole row of logits
    #: what out-of-range targets get under each ``oob`` policy (C-EXC-02)
    index_policy = TargetPolicy()

    def input_shapes(self, s):
        return {"logits": (s["R"], s["C"]), "target": (s["R"],)}

    def output_shape(self, s):
        return ()

    def input_format(self, name, dtype):
        return np.int64 if name == "target" else dtype.dtype

    def generate(self, s, dtype, family, rng):
        R, C = s["R"], s["C"]
        logits = self._store(get_family(family)((R, C), rng, dtype), dtype.dtype)
        target = rng.integers(0, C, R).astype(np.int64)
        if family != "rand" and R >= 4:
            ignored = rng.choice(R, size=max(1, R // 8), replace=False)
            target[ignored] = IGNORE_INDEX
        return {"logits": logits, "target": target}

    def _rows(self, x, ignore_index):
        loss, counted = policy_losses(x["logits"], x["target"], "raise", ignore_index)
        return loss, counted

    def oracle(self, x, ignore_index=IGNORE_INDEX, **kw):
        loss, counted = self._rows(x, ignore_index)
        with np.errstate(all="ignore"):
            return np.asarray(np.sum(np.where(counted, loss, 0.0)) / np.count_nonzero(counted))

    def quantities(self, x, ref, ignore_index=IGNORE_INDEX, **kw):
        logits, target = x["logits"], np.asarray(x["target"])
        counted = target != ignore_index
        inb = (target >= 0) & (target < logits.shape[-1])
        lse = logsumexp(logits)
        t = np.where(inb, target, 0).astype(np.int64)
        with np.errstate(all="ignore"):
            # an out-of-range target's logit is bounded by the row's largest |logit| (what
            # clamp and wrap pick; zero picks 0), so the magnitudes hold under any policy
            picked = np.where(inb, np.take_along_axis(logits, t[:, None], axis=-1)[:, 0],
                              np.max(np.abs(logits), axis=-1))
            loss = np.abs(lse) + np.abs(picked)
            loss = np.where(inb, np.abs(lse - picked), loss)
            k = max(1, int(np.count_nonzero(counted)))
            # mag: what the final additions round against (|lse| and the gathered logit);
            # lossmag: the mean |loss_r| the mean over rows rounds against
            mag = np.sum(np.where(counted, np.abs(lse) + np.abs(picked), 0.0)) / k
            lossmag = np.sum(np.where(counted, np.abs(loss), 0.0)) / k
        return {"mag": np.asarray(mag), "lossmag": np.asarray(lossmag)}

    def call_kwargs(self, dtype):
        return {"ignore_index": IGNORE_INDEX}

    def num_rows(self, s):
        return s["R"]


OPS = [
    CrossEntropy(
        name="cross_entropy", inputs=("logits", "target"), symbols=("R", "C"),
        reduction=("C",), kwargs={"ignore_index": IGNORE_INDEX},
        basic_shape={"R": 32, "C": 512},
        shape_class=({"R": 1, "C": 1}, {"R": 7, "C": 13}, {"R": 3, "C": 127},
                     {"R": 16, "C": 256}, {"R": 5, "C": 1000}, {"R": 2, "C": 4099},
                     {"R": 64, "C": 33}),
        quantity_names=("mag", "lossmag"), row_inputs=("logits", "target"),
        summary="cross_entropy(logits, target, ignore_index=-100): logits (R, C), target int64 "
                "(R,) -> 0-d mean of logsumexp - logit[target] over rows not ignored"),
]
