"""Which kcontract op each recorded aten op is, and how its arguments become that op's
inputs: one table (:data:`TABLE`).

Each row maps an aten op packet (``aten.addmm``; every overload) to a kcontract op and
an *extractor*: given the call's arguments as numpy arrays and plain values, it returns
a :class:`OpCall` in the kcontract op's calling convention (inputs, keyword arguments,
the output reshaped to the op's output shape, and, where the aten op computes a little
more than the kcontract op -- addmm's bias, mean's division -- the float64 reference
and the magnitude for that extra), or ``None`` when this call's arguments are outside
the op's convention (an attention mask, a softmax over a middle axis of an op that has
none, ...).  Ops that only move data (views, transposes, copies) compute nothing and are
counted apart.  Targets that :mod:`kcontract.ops` does not define (yet) are listed as
covered but "not yet checkable".
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np


@dataclass
class OpCall:
    """One recorded call in a kcontract op's calling convention."""

    op: str
    inputs: dict  # name -> numpy array
    out: Optional[np.ndarray]  # the side's output, in the op's output shape (None: raised)
    kwargs: dict = field(default_factory=dict)
    dtype: str = ""  # the kcontract dtype the call is judged at
    #: the float64 reference of the aten op on (possibly rounded) inputs, when it computes
    #: more than the kcontract op (addmm's bias, mean's division); None: the op's oracle
    oracle: Optional[Callable[[dict], np.ndarray]] = None
    extra: dict = field(default_factory=dict)  # tolerance quantities overriding the op's
    declare: dict = field(default_factory=dict)  # claims the call itself implies
    note: str = ""
    #: results computed once per call and shared by the contracts that judge it
    memo: dict = field(default_factory=dict, repr=False)


Extractor = Callable[[list, dict, list], Optional[OpCall]]


@dataclass(frozen=True)
class Target:
    op: str  # the kcontract op
    extract: Optional[Extractor] = None  # None: mapped, no extractor (not yet checkable)


def _f(x) -> Optional[float]:
    if isinstance(x, dict) and "float" in x:
        return float(x["float"])
    return None if x is None else float(x)


def _arg(args, kwargs, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _fdtype(arr) -> str:
    return np.asarray(arr).dtype.name


def _first(outs):
    return outs[0] if outs else None


def _mm(args, kwargs, outs):
    a, b = args[0], args[1]
    return OpCall("matmul", {"a": a, "b": b}, _first(outs), dtype=_fdtype(a))


def _addmm(args, kwargs, outs):
    c, a, b = args[0], args[1], args[2]
    beta = _f(kwargs.get("beta", 1)) or 0.0
    alpha = _f(kwargs.get("alpha", 1))
    a64, b64, c64 = (np.asarray(v, dtype=np.float64) for v in (a, b, c))

    def oracle(x):
        with np.errstate(all="ignore"):
            return alpha * np.matmul(np.asarray(x["a"], np.float64),
                                     np.asarray(x["b"], np.float64)) + (beta * c64 if beta else 0.0)
    with np.errstate(all="ignore"):
        mag = abs(alpha) * np.matmul(np.abs(a64), np.abs(b64)) + (abs(beta) * np.abs(c64)
                                                                  if beta else 0.0)
    return OpCall("matmul", {"a": a, "b": b}, _first(outs), dtype=_fdtype(a),
                  oracle=oracle, extra={"mag": mag}, note="with its bias: beta*c + alpha*(a @ b)")


def _rows(x, dim=-1):
    x = np.moveaxis(np.asarray(x), dim, -1)
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def _layer_norm(args, kwargs, outs):
    x, shape = args[0], list(args[1])
    w = _arg(args, kwargs, 2, "weight")
    b = _arg(args, kwargs, 3, "bias")
    eps = _f(_arg(args, kwargs, 4, "eps", 1e-5))
    n = int(np.prod(shape))
    rows = np.asarray(x).reshape(-1, n)
    w = np.ones(n, rows.dtype) if w is None else np.asarray(w).reshape(n)
    b = np.zeros(n, rows.dtype) if b is None else np.asarray(b).reshape(n)
    out = _first(outs)
    return OpCall("layernorm", {"x": rows, "weight": w, "bias": b},
                  None if out is None else np.asarray(out).reshape(-1, n), {"eps": eps},
                  dtype=_fdtype(rows))


def _softmax(args, kwargs, outs):
    x, dim = args[0], int(_arg(args, kwargs, 1, "dim", -1))
    out = _first(outs)
    return OpCall("softmax", {"x": _rows(x, dim)}, None if out is None else _rows(out, dim),
                  dtype=_fdtype(x))


def _gelu(args, kwargs, outs):
    x = args[0]
    approx = _arg(args, kwargs, 1, "approximate", "none")
    out = _first(outs)
    return OpCall("gelu", {"x": _rows(x)}, None if out is None else _rows(out), dtype=_fdtype(x),
                  declare={"approximation": "tanh"} if approx == "tanh" else {})


def _embedding(args, kwargs, outs):
    table, idx = np.asarray(args[0]), np.asarray(args[1])
    out = _first(outs)
    return OpCall("embedding", {"table": table, "indices": idx.reshape(-1).astype(np.int64)},
                  None if out is None else np.asarray(out).reshape(-1, table.shape[-1]),
                  dtype=_fdtype(table))


def _attention_at(mask: Optional[int], dropout: int, causal: int) -> Extractor:
    """An extractor for an SDPA variant whose (mask or bias, dropout_p, is_causal) are the
    positional arguments at these indices (the variants order them differently)."""
    def extract(args, kwargs, outs):
        q, k, v = args[0], args[1], args[2]
        p = _f(_arg(args, kwargs, dropout, "dropout_p", 0.0)) or 0.0
        is_causal = bool(_arg(args, kwargs, causal, "is_causal", False))
        bias = (kwargs.get("attn_mask") if mask is None else
                _arg(args, kwargs, mask, "attn_bias", kwargs.get("attn_mask")))
        scale = _f(kwargs.get("scale"))
        if p or bias is not None or np.ndim(q) != 4:
            return None
        if scale is not None and not math.isclose(scale, 1.0 / math.sqrt(np.shape(q)[-1])):
            return None
        return OpCall("attention", {"q": q, "k": k, "v": v}, _first(outs), {"causal": is_causal},
                      dtype=_fdtype(q))
    return extract


_attention = _attention_at(None, 3, 4)  # flash (CPU, CUDA): q, k, v, dropout_p, is_causal
_attention_biased = _attention_at(3, 5, 6)  # efficient, cudnn: q, k, v, bias, lse, dropout, causal


def _reduce(mean: bool):
    def extract(args, kwargs, outs):
        x = np.asarray(args[0])
        dims = _arg(args, kwargs, 1, "dim", None)
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        if dims and sorted(d % x.ndim for d in dims) != [x.ndim - 1]:
            return None  # the kcontract op reduces the last axis only
        rows = x.reshape(1, -1) if not dims else x.reshape(-1, x.shape[-1])
        out = _first(outs)
        out = None if out is None else np.asarray(out).reshape(-1)
        if not mean:
            return OpCall("sum", {"x": rows}, out, dtype=_fdtype(x))
        n = rows.shape[-1]
        r64 = rows.astype(np.float64)
        return OpCall("sum", {"x": rows}, out, dtype=_fdtype(x),
                      oracle=lambda x: np.asarray(x["x"], np.float64).sum(-1) / n,
                      extra={"mag": np.abs(r64).sum(-1) / n}, note="mean: the sum divided by N")
    return extract


def _cast(args, kwargs, outs):
    x = np.asarray(args[0])
    out = _first(outs)
    if out is None or x.dtype != np.float32 or np.asarray(out).dtype.name not in (
            "float16", "bfloat16"):
        return None
    return OpCall("cast", {"x": _rows(x)}, _rows(out), dtype=np.asarray(out).dtype.name)


MATMUL = Target("matmul", _mm)
#: aten op packet -> kcontract op (and how its arguments map)
TABLE: dict[str, Target] = {
    "aten.mm": MATMUL, "aten.bmm": MATMUL, "aten.matmul": MATMUL,
    "aten.addmm": Target("matmul", _addmm), "aten.baddbmm": Target("matmul", _addmm),
    "aten.linear": Target("matmul"),
    "aten._softmax": Target("softmax", _softmax), "aten.softmax": Target("softmax", _softmax),
    "aten.native_layer_norm": Target("layernorm", _layer_norm),
    "aten.layer_norm": Target("layernorm", _layer_norm),
    "aten.rms_norm": Target("rmsnorm"), "aten._fused_rms_norm": Target("rmsnorm"),
    "aten.gelu": Target("gelu", _gelu), "aten.silu": Target("silu"),
    "aten.embedding": Target("embedding", _embedding),
    "aten._scaled_dot_product_flash_attention_for_cpu": Target("attention", _attention),
    "aten._scaled_dot_product_flash_attention": Target("attention", _attention),
    "aten._scaled_dot_product_efficient_attention": Target("attention", _attention_biased),
    "aten._scaled_dot_product_cudnn_attention": Target("attention", _attention_biased),
    "aten.scaled_dot_product_attention": Target("attention", _attention_at(3, 4, 5)),
    "aten.sum": Target("sum", _reduce(False)), "aten.mean": Target("sum", _reduce(True)),
    "aten.cumsum": Target("cumsum"), "aten.topk": Target("topk"),
    "aten.convolution": Target("conv2d"), "aten.mkldnn_convolution": Target("conv2d"),
    "aten.cudnn_convolution": Target("conv2d"),
    "aten.cross_entropy_loss": Target("cross_entropy"),
    "aten.nll_loss_forward": Target("cross_entropy"),
    "aten._to_copy": Target("cast", _cast), "aten.to": Target("cast", _cast),
}

#: ops that only move or re-describe data (no arithmetic): nothing to check
DATA_MOVEMENT = frozenset({
    "aten.view", "aten._unsafe_view", "aten.reshape", "aten.t", "aten.transpose",
    "aten.permute", "aten.expand", "aten.split", "aten.split_with_sizes", "aten.slice",
    "aten.select", "aten.unsqueeze", "aten.squeeze", "aten.clone", "aten.contiguous",
    "aten.detach", "aten.alias", "aten.cat", "aten.stack", "aten.unbind", "aten.chunk",
    "aten.copy_", "aten.empty", "aten.zeros", "aten.ones", "aten.full", "aten.arange",
    "aten.lift_fresh", "aten.index_select", "aten.masked_fill", "aten.where", "aten.flatten",
    "aten.as_strided", "aten.new_empty", "aten.new_zeros", "aten.fill_", "aten.zero_",
    "aten.empty_like", "aten.zeros_like", "aten.ones_like", "aten.scalar_tensor",
})


def packet(op: str) -> str:
    """``aten.addmm.default`` -> ``aten.addmm``."""
    parts = op.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else op


def target(op: str) -> Optional[Target]:
    return TABLE.get(packet(op))


def checkable(name: str) -> bool:
    """Whether kcontract defines the op (the suite can check it)."""
    from ..ops import OPS
    return name in OPS


@dataclass
class Coverage:
    calls: int
    covered: int  # calls mapped to a kcontract op
    checkable: int  # ... that kcontract.ops defines
    data_movement: int
    rows: list  # one per aten op packet: packet, calls, target, state

    @property
    def computing(self) -> int:
        return self.calls - self.data_movement

    def share(self) -> float:
        """Covered calls as a share of the calls that compute (not data movement)."""
        return self.covered / self.computing if self.computing else 1.0

    def as_dict(self) -> dict:
        return {"calls": self.calls, "covered": self.covered, "checkable": self.checkable,
                "data_movement": self.data_movement, "computing": self.computing,
                "share_covered": self.share(),
                "share_checkable": self.checkable / self.computing if self.computing else 1.0,
                "ops": self.rows}


def coverage(ops: list) -> Coverage:
    """How many recorded calls map to a kcontract op, per aten op packet."""
    counts = Counter(packet(r["op"]) for r in ops)
    rows = []
    covered = check = moving = 0
    for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        t = TABLE.get(name)
        if t is not None:
            ok = checkable(t.op) and t.extract is not None
            state = "checkable" if ok else "not yet checkable"
            covered += n
            check += n if ok else 0
        elif name in DATA_MOVEMENT:
            state = "data movement"
            moving += n
        else:
            state = "not covered"
        rows.append({"aten": name, "calls": n, "kcontract_op": t.op if t else None,
                     "state": state})
    return Coverage(len(ops), covered, check, moving, rows)


def resolve(value: Any, tensors: dict):
    """A recorded argument with its tensor references replaced by the arrays (None when a
    tensor was not kept)."""
    if isinstance(value, dict):
        if "tensor" in value:
            return tensors.get(value["tensor"].get("sha256"))
        if "float" in value and len(value) == 1:
            return float(value["float"])
        return {k: resolve(v, tensors) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, tensors) for v in value]
    return value


def op_call(rec: dict, tensors: dict) -> Optional[OpCall]:
    """A recorded call in its kcontract op's convention; None when it is not checkable
    (not covered, arguments outside the convention, or a tensor not kept)."""
    t = target(rec["op"])
    if t is None or t.extract is None or not checkable(t.op):
        return None
    args = resolve(rec.get("args") or [], tensors)
    kwargs = resolve(rec.get("kwargs") or {}, tensors)
    outs = resolve(rec.get("outputs") or [], tensors) if rec.get("status") == "ok" else []
    if any(a is None for a in _tensor_args(rec.get("args") or [], args)):
        return None
    if rec.get("status") == "ok" and (not outs or outs[0] is None):
        return None
    try:
        return t.extract(args, kwargs, outs)
    except (ValueError, TypeError, IndexError):
        return None


def _tensor_args(raw: list, resolved: list) -> list:
    return [v for r, v in zip(raw, resolved) if isinstance(r, dict) and "tensor" in r]
