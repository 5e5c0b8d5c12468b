"""A KernelBench problem as an op (:class:`kcontract.ops.Op`).

A problem file defines ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``.  As an op (:class:`ProblemOp`): its inputs are what
``get_inputs()`` returns (``arg0``, ``arg1``, ...; their values drawn from the input
families, their shapes, dtypes and non-float values the problem's own), its symbols the
problem's size literals (``batch_size``, ``input_shape[0]``), its shape class the rescaled
shapes of :func:`shape_variants`, and its oracle the reference ``Model`` run in float64
(:class:`Oracle`, one per shape, with the weights the candidate gets), with the quantities
of the derived tolerance (:class:`Allowance`, the measured sensitivity, the magnitude).
"""
from __future__ import annotations

import copy
import hashlib
import os
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from ...check.sandbox import output_digest
from ...errors import UsageError
from ...formats import get_format, ulp
from ...ops.base import Op
from .scale import (MIN_SIZE, Scaling, exec_source, factor_for, rewritten, scaled_source,
                    size_literals)

DTYPES = ("float32", "float16", "bfloat16")
KAPPA = 4.0
#: the fewest rounding stages assumed: one fused op of the reference (softmax, layer
#: norm, GELU) is several rounded stages in an honest unfused candidate
MIN_STAGES = 4


def _torch():
    import torch
    return torch


# -- problems --------------------------------------------------------------------------
@dataclass
class Problem:
    """A loaded KernelBench problem file (trusted code: it runs in this process)."""

    path: str
    name: str
    module: types.ModuleType
    #: the sizes a shape sweep may rescale, label -> value: the size literals of the
    #: source (``batch_size``, ``input_shape[0]``), or, for a problem whose sizes live in
    #: another file, the module-level integers ``get_inputs``/``get_init_inputs`` read
    constants: dict
    #: sha256 of the file as it was loaded (once per run, before any candidate ran)
    sha256: str = ""
    #: the rewritten source when the sizes were scaled (None: the file as it is)
    source: Optional[str] = None
    #: how the sizes were scaled (``--scale`` / ``--max-elements``)
    scaling: Scaling = field(default_factory=Scaling)
    #: the source the size literals were read from (None: the sizes are module attributes)
    text: Optional[str] = None
    _variants: dict = field(default_factory=dict, repr=False)

    @contextmanager
    def sized(self, overrides: Mapping[str, int]):
        """The problem at other sizes: its source with those size literals replaced and
        executed again (values derived at import follow), or, for sizes that are plain
        module attributes, the attributes temporarily replaced."""
        if overrides and self.text is not None:
            key = tuple(sorted(overrides.items()))
            if key not in self._variants:
                self._variants[key] = exec_source(self.path, rewritten(self.text, dict(overrides)))
            saved_module = self.module
            self.module = self._variants[key]
            try:
                yield self
            finally:
                self.module = saved_module
            return
        saved = {k: getattr(self.module, k) for k in overrides}
        try:
            for k, v in overrides.items():
                setattr(self.module, k, v)
            yield self
        finally:
            for k, v in saved.items():
                setattr(self.module, k, v)

    def init_inputs(self, overrides: Mapping[str, int]) -> list:
        with self.sized(overrides):
            return list(self.module.get_init_inputs())

    def raw_inputs(self, overrides: Mapping[str, int], seed: int) -> list:
        torch = _torch()
        with self.sized(overrides):
            torch.manual_seed(seed)
            return list(self.module.get_inputs())


def _exec_file(path: str) -> types.ModuleType:
    """A problem or candidate file as a module, loaded as the worker loads it."""
    from ...check.worker import KernelSpecError, load_module_file
    if not os.path.exists(path):
        raise UsageError(f"no such file: {os.path.abspath(path)}")
    try:
        return load_module_file(path)
    except KernelSpecError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:
        raise UsageError(f"cannot load {os.path.abspath(path)}: {type(exc).__name__}: {exc}") \
            from exc


def _names(code) -> set:
    """The global names a function reads (not attribute names: ``self.dim`` is no read of
    a module constant ``dim``)."""
    import dis
    out = {ins.argval for ins in dis.get_instructions(code)
           if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


def load_problem(path: str, scale: float = 1.0, max_elements: Optional[int] = None) -> Problem:
    """Load a reference problem file; raises :class:`UsageError` when it is not one.
    Load it once per run, before any candidate runs, and pass the :class:`Problem` on
    (``check_kernelbench(problem=...)``): the parent never executes the file again.
    ``scale`` / ``max_elements``: its sizes shrunk consistently (see
    :mod:`.scale`)."""
    from ...check.worker import source_sha256
    digest = source_sha256(path) if os.path.exists(path) else ""
    if not 0 < float(scale) <= 1.0:
        raise UsageError(f"--scale must be in (0, 1], not {scale}")
    if max_elements is not None and int(max_elements) < 1:
        raise UsageError(f"--max-elements must be positive, not {max_elements}")
    module = _exec_file(path)
    source, scaling = None, Scaling()
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if scale != 1.0 or max_elements is not None:
        try:
            if max_elements is not None:
                scale = min(float(scale), factor_for(path, text, int(max_elements)))
            source, sizes = scaled_source(text, float(scale))
            module = exec_source(path, source)
        except Exception as exc:
            raise UsageError(f"{path} does not load at scale {scale:.3g}: "
                             f"{type(exc).__name__}: {exc}") from exc
        scaling = Scaling(factor=float(scale), max_elements=max_elements, sizes=sizes)
    missing = [a for a in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, a)]
    if missing:
        raise UsageError(f"{path} is not a KernelBench problem: it defines no "
                         f"{', '.join(missing)}")
    read = _names(module.get_inputs.__code__) | _names(module.get_init_inputs.__code__)
    used_by_model = set()
    for attr in vars(module.Model).values():
        code = getattr(attr, "__code__", None)
        if code is not None:
            used_by_model |= _names(code)
    constants = {k: v for k, v in vars(module).items()
                 if type(v) is int and not k.startswith("_") and k in read
                 and k not in used_by_model}
    name = os.path.splitext(os.path.basename(path))[0]
    if name in ("problem", "reference", "ref", "model"):
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) or name
    literals = {lit.label: lit.value for lit in size_literals(source or text)}
    if literals:
        constants = literals
    return Problem(path=os.path.abspath(path), name=name, module=module, constants=constants,
                   sha256=digest, source=source, scaling=scaling,
                   text=(source or text) if literals else None)


def _prev_prime(n: int) -> int:
    n = max(2, n)
    while n > 2 and any(n % p == 0 for p in range(2, int(n ** 0.5) + 1)):
        n -= 1
    return n


def shape_variants(constants: Mapping[str, int]) -> list[tuple[str, dict]]:
    """The benchmarked shape, then rescaled ones: every size constant (>= MIN_SIZE)
    mapped through the same function of its value, so constants that were equal
    stay equal.  ``prime``: a prime near 0.6x (a multiple of no tile); ``plus-one``:
    one past the benchmarked size; ``tiny``: 3 (a single partial tile)."""
    sizes = {k: v for k, v in constants.items() if v >= MIN_SIZE}
    out = [("basic", {})]
    if not sizes:
        return out
    for label, fn in (("prime", lambda v: _prev_prime(max(3, int(round(v * 0.6))))),
                      ("plus-one", lambda v: v + 1), ("tiny", lambda v: 3)):
        over = {k: fn(v) for k, v in sizes.items()}
        if over != sizes:
            out.append((label, over))
    # one size group (the sizes of one value) at a time, the others as benchmarked: a
    # variant the reference accepts even when changing every size at once breaks a
    # divisibility (group counts and channels) or a size frozen elsewhere
    groups: dict = {}
    for k, v in sizes.items():
        groups.setdefault(v, []).append(k)
    if len(groups) > 1:
        for value, names in groups.items():
            for label, fn in (("prime", lambda v: _prev_prime(max(3, int(round(v * 0.6))))),
                              ("plus-one", lambda v: v + 1)):
                out.append((f"{label}:{'+'.join(names)}", {k: fn(value) for k in names}))
    return out


# -- values and conversions ------------------------------------------------------------
def _adapter():
    from ...adapters.torch_adapter import TorchAdapter
    return TorchAdapter()


def _to_plain(value):
    """What may cross to the worker: numpy arrays and plain Python values."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        arr, _ = _adapter().to_numpy(value)
        return arr
    if isinstance(value, (list, tuple)):
        return type(value)(_to_plain(v) for v in value)
    return value


def _is_float_array(a) -> bool:
    return isinstance(a, np.ndarray) and (a.dtype.kind == "f" or a.dtype.name in (
        "bfloat16", "float8_e4m3fn", "float8_e5m2"))


def _to_torch(value, dtype=None):
    """numpy -> tensor; float arrays in ``dtype`` (a torch dtype) when given."""
    torch = _torch()
    if isinstance(value, np.ndarray):
        if _is_float_array(value):
            if dtype is not None and dtype == torch.float64:
                return torch.from_numpy(np.asarray(value, dtype=np.float64).copy())
            return _adapter().to_native(value, "cpu")
        return torch.from_numpy(value.copy())
    return value


def _out_numpy(out) -> tuple[np.ndarray, dict]:
    torch = _torch()
    if isinstance(out, (tuple, list)) and len(out) == 1:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the reference returned a {type(out).__name__}, not a tensor")
    return _adapter().to_numpy(out)


# -- the oracle for one shape -------------------------------------------------------------
@dataclass
class Allowance:
    """The quantities of the derived tolerance, for one shape."""

    n: int
    stages: int
    u: float
    u_acc: float
    kappa: float = KAPPA
    method: str = "jacobian"

    def as_dict(self) -> dict:
        return {"n": self.n, "stages": self.stages, "u": self.u, "u_acc": self.u_acc,
                "kappa": self.kappa, "n_method": self.method}


class Oracle:
    """The reference model at one shape: float64 (the oracle), at the dtype (its own
    rounding error sets a floor), and on absolute values (the magnitude)."""

    def __init__(self, problem: Problem, overrides: Mapping[str, int], dtype: str, seed: int,
                 train: bool = False):
        torch = _torch()
        self.problem, self.overrides, self.dtype = problem, dict(overrides), dtype
        self.train = train
        self.fmt = get_format(dtype)
        self.init = problem.init_inputs(overrides)
        with problem.sized(overrides):
            torch.manual_seed(seed)
            model = problem.module.Model(*self.init)
        self.tdtype = getattr(torch, dtype)
        if isinstance(model, torch.nn.Module):
            # inference semantics (dropout off, batch norm on its running statistics): the
            # candidate's worker puts ModelNew in eval mode too, so no two sides draw masks;
            # training mode (--train) on both sides, every forward pass seeded from its
            # inputs (:func:`call_seed`) on both sides, so their masks agree
            model = model.train(train)
        self.low = model.to(dtype=self.tdtype) if isinstance(model, torch.nn.Module) else model
        self.state = ({k: _to_plain(v) for k, v in self.low.state_dict().items()}
                      if isinstance(self.low, torch.nn.Module) else None)
        self.f64 = copy.deepcopy(self.low)
        if isinstance(self.f64, torch.nn.Module):
            self.f64 = self.f64.to(dtype=torch.float64)
        self.absm = copy.deepcopy(self.f64)
        if isinstance(self.absm, torch.nn.Module):
            with torch.no_grad():
                for p in list(self.absm.parameters()) + list(self.absm.buffers()):
                    if p.is_floating_point():
                        p.abs_()
        self.allowance: Optional[Allowance] = None
        self.out_dtype: Optional[str] = None
        #: the shapes of the inputs it was first run on (what identifies the shape)
        self.input_shapes: Optional[list] = None
        #: the largest measured sensitivity seen, in units of u * magnitude (>> 1: the
        #: inputs are ill-conditioned for this module)
        self.condition = 0.0
        #: the problem's own inputs this oracle was first run on, until the first case that
        #: wants them takes them (:meth:`take_first_inputs`): drawn once, not twice
        self.first_inputs: Optional[list] = None

    def take_first_inputs(self) -> Optional[list]:
        args, self.first_inputs = self.first_inputs, None
        return args

    @contextmanager
    def aligned(self, args: Sequence):
        """In training mode, the RNG seeded as the candidate's worker seeds it for a call on
        ``args`` (the same masks on both sides); nothing in eval mode."""
        if self.train:
            _torch().manual_seed(call_seed(args))
        yield

    def reference(self, args: Sequence) -> np.ndarray:
        torch = _torch()
        with torch.no_grad(), self.problem.sized(self.overrides), self.aligned(args):
            out = self.f64(*[_to_torch(a, torch.float64) for a in args])
        return _out_numpy(out)[0]

    def accepts_layout(self, args: Sequence, layout: str) -> bool:
        """Whether the reference model itself runs on its inputs given as ``layout`` views
        (a model that calls ``.view`` on an input does not, and then neither need the
        candidate)."""
        torch = _torch()
        ad = _adapter()
        views = [ad.relayout(_to_torch(a, torch.float64), layout) for a in args]
        try:
            with torch.no_grad(), self.problem.sized(self.overrides), self.aligned(args):
                self.f64(*views)
        except Exception:
            return False
        return True

    def at_dtype(self, args: Sequence) -> np.ndarray:
        torch = _torch()
        if self.input_shapes is None:
            self.input_shapes = [tuple(np.shape(a)) for a in args]
        with torch.no_grad(), self.problem.sized(self.overrides), self.aligned(args):
            out = self.low(*[_to_torch(a) for a in args])
        arr, meta = _out_numpy(out)
        self.out_dtype = meta["dtype"]
        return arr

    def magnitude(self, args: Sequence) -> Optional[np.ndarray]:
        torch = _torch()
        try:
            with torch.no_grad(), self.problem.sized(self.overrides), self.aligned(args):
                out = self.absm(*[_abs(_to_torch(a, torch.float64)) for a in args])
            mag = np.abs(np.asarray(_out_numpy(out)[0], dtype=np.float64))
            return np.where(np.isfinite(mag), mag, 0.0)
        except Exception:
            return None

    def derive(self, args: Sequence, declared_acc: float) -> Allowance:
        """Reduction length and rounding stages from the reference's autograd graph."""
        if self.allowance is not None:
            return self.allowance
        torch = _torch()
        u = self.fmt.u
        xs = [_abs(_to_torch(a, torch.float64)) for a in args]
        leaves = [x.detach().requires_grad_(True) for x in xs
                  if isinstance(x, torch.Tensor) and x.is_floating_point()]
        it = iter(leaves)
        call_args = [next(it) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                     for x in xs]
        params = ([p for p in self.absm.parameters() if p.is_floating_point()]
                  if isinstance(self.absm, torch.nn.Module) else [])
        try:
            with self.problem.sized(self.overrides), self.aligned(args):
                out = self.absm(*call_args)
            if isinstance(out, (tuple, list)):
                out = out[0]
            flat = out.reshape(-1)
            stages = _graph_size(out.grad_fn)
            wrt = leaves + params
            n = 1
            picks = sorted({0, flat.numel() // 2, flat.numel() - 1})
            for i in picks:
                grads = torch.autograd.grad(flat[i], wrt, retain_graph=True, allow_unused=True)
                for g in grads:
                    if g is not None:
                        n = max(n, int(torch.count_nonzero(g)))
            self.allowance = Allowance(n=n, stages=max(MIN_STAGES, stages), u=u,
                                       u_acc=declared_acc)
        except Exception:
            # not differentiable (integer outputs, argmax...): the longest input row
            n = max([int(np.shape(a)[-1]) for a in args if _is_float_array(a) and np.ndim(a)]
                    or [1])
            self.allowance = Allowance(n=n, stages=MIN_STAGES, u=u, u_acc=declared_acc,
                                       method="last-dimension")
        return self.allowance

    def tolerance(self, args: Sequence, ref: np.ndarray, low: Optional[np.ndarray],
                  declared_acc: float) -> np.ndarray:
        from ...language.vocabulary import pgamma
        a = self.derive(args, declared_acc)
        ref = np.asarray(ref, dtype=np.float64)
        finite = np.isfinite(ref)
        mag = np.abs(np.where(finite, ref, 0.0))
        absmag = self.magnitude(args)
        if absmag is not None and absmag.shape == mag.shape:
            mag = np.maximum(mag, absmag)
        if mag.size:
            mag = np.maximum(mag, float(np.mean(np.abs(ref[finite]))) if finite.any() else 0.0)
        rel = a.kappa * (float(pgamma(a.n, a.u_acc)) + a.stages * a.u)
        out_fmt = get_format(self.out_dtype) if self.out_dtype in DTYPES + ("float64",) else self.fmt
        sens = self.sensitivity(args, ref)
        with np.errstate(all="ignore"):
            tol = rel * mag + ulp(np.where(finite, ref, 0.0), out_fmt)
            if sens is not None:
                # conditioning: what rounding the inputs once more at the dtype moves the
                # exact result by, once per rounding stage, with the same kappa
                tol = tol + a.kappa * a.stages * sens
                base = np.where(mag > 0, a.u * mag, np.inf)
                ratio = np.where(finite, sens / base, 0.0)
                self.condition = max(self.condition, float(np.max(ratio)) if ratio.size else 0.0)
            if low is not None:
                own = np.abs(np.asarray(low, dtype=np.float64) - ref)
                tol = np.maximum(tol, np.where(np.isfinite(own), 2.0 * own, 0.0))
        return tol

    def sensitivity(self, args: Sequence, ref: np.ndarray) -> Optional[np.ndarray]:
        """The measured sensitivity of the float64 reference at these inputs: ``|f(x o (1 +
        u r)) - f(x)|`` for a random sign pattern ``r``, each float input perturbed by one
        unit roundoff of the dtype (the error any implementation makes by rounding its
        inputs, or a first intermediate such as ``x - mean``, once).  The largest of two
        patterns; None when it cannot be measured."""
        torch = _torch()
        rng = np.random.default_rng(zlib_crc(str(np.shape(ref))))
        worst_d = None
        for _ in range(2):
            pert = []
            for a in args:
                if _is_float_array(a):
                    x = np.asarray(a, dtype=np.float64)
                    pert.append(x * (1.0 + self.fmt.u * rng.choice((-1.0, 1.0), size=x.shape)))
                else:
                    pert.append(a)
            try:
                with torch.no_grad(), self.problem.sized(self.overrides), self.aligned(args):
                    out = self.f64(*[_to_torch(p, torch.float64) for p in pert])
                got = np.asarray(_out_numpy(out)[0], dtype=np.float64)
            except Exception:
                return None
            if got.shape != np.shape(ref):
                return None
            with np.errstate(all="ignore"):
                d = np.abs(got - ref)
            d = np.where(np.isfinite(d), d, 0.0)
            worst_d = d if worst_d is None else np.maximum(worst_d, d)
        return worst_d


def _abs(x):
    torch = _torch()
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.abs()
    return x


def _graph_size(fn, limit: int = 10000) -> int:
    seen, stack = set(), [fn]
    while stack and len(seen) < limit:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        stack.extend(g for g, _ in getattr(f, "next_functions", ()))
    return sum(1 for f in seen if type(f).__name__ != "AccumulateGrad")


# -- inputs ------------------------------------------------------------------------------
def make_inputs(problem: Problem, overrides: Mapping[str, int], family: str, dtype: str,
                seed: int) -> list:
    """Inputs for one case: ``get_inputs()`` under a seed gives the shapes, dtypes and
    non-float arguments; ``problem`` keeps its float values, another family replaces
    them (drawn from :mod:`kcontract.ops.families`); floats are rounded to ``dtype``."""
    from ...ops.families import get_family
    fmt = get_format(dtype)
    raw = [_to_plain(x) for x in problem.raw_inputs(overrides, seed)]
    rng = np.random.default_rng([seed, zlib_crc(family)])
    out = []
    for x in raw:
        if _is_float_array(x):
            vals = np.asarray(x, dtype=np.float64) if family == "problem" else \
                get_family(family)(x.shape, rng, fmt)
            with np.errstate(over="ignore", invalid="ignore"):
                out.append(np.asarray(vals, dtype=np.float64).astype(fmt.dtype))
        else:
            out.append(x)
    return out


def zlib_crc(text: str) -> int:
    import zlib
    return zlib.crc32(text.encode())


def inject_exceptional(args: list, kinds: tuple, seed: int) -> list:
    """NaN / +-Inf at a few positions of the first float input."""
    from ...ops.families import inject
    out = list(args)
    for i, a in enumerate(out):
        if _is_float_array(a) and a.size:
            vals, _ = inject(np.asarray(a, dtype=np.float64), np.random.default_rng(seed),
                             kinds=kinds, count=2)
            out[i] = vals.astype(a.dtype)
            break
    return out



def storage_dtype(name: str) -> np.dtype:
    """The numpy dtype of a dtype name (a float format or any numpy name)."""
    try:
        return get_format(name).dtype
    except (UsageError, KeyError, ValueError):
        return np.dtype(name)


class CaseInputs(list):
    """One case's inputs, never changed once drawn: their digest (:func:`inputs_digest`,
    and the training seed drawn from it) is computed once however many steps of the case
    ask for it (the reference, at the dtype, its magnitude, its sensitivity, the call)."""

    digest: Optional[str] = None


def inputs_digest(args) -> str:
    """The identity of a call's inputs: :func:`~kcontract.check.sandbox.output_digest` of
    every array, the ``repr`` of every other value."""
    if isinstance(args, CaseInputs):
        if args.digest is None:
            args.digest = _digest(args)
        return args.digest
    return _digest(args)


def _digest(args) -> str:
    h = hashlib.sha1()
    for a in args:
        h.update((output_digest(a) if isinstance(a, np.ndarray) else repr(a)).encode())
    return h.hexdigest()


def call_seed(args) -> int:
    """The seed of the RNG before a forward pass on ``args`` in training mode, the same on
    both sides (the reference here, ``ModelNew`` in its worker): drawn from the inputs, so
    every call has its own masks and the candidate learns nothing it was not given."""
    return int(inputs_digest(args)[:8], 16) & 0x7FFFFFFF


@dataclass
class ProblemOp(Op):
    """A KernelBench problem as an op: inputs ``arg0``, ``arg1``, ... (what ``get_inputs()``
    returns, in order), symbols its size literals, ``basic_shape`` the sizes it is
    benchmarked at, ``shape_class`` the rescaled shapes (:func:`shape_variants`), and the
    float64 oracle the reference ``Model`` at each shape (:meth:`oracle_at`)."""

    problem: Optional[Problem] = None
    dtype_name: str = "float32"
    #: the seed the models are built under (the reference's weights are what the
    #: candidate gets)
    build_seed: int = 0
    #: training mode on both sides, every forward pass seeded from its inputs
    train: bool = False
    #: the seed of the problem's own inputs an oracle is first run on (its output dtype)
    input_seed: int = 0
    #: shape label -> :class:`Oracle`
    oracles: dict = field(default_factory=dict)

    @classmethod
    def of(cls, problem: Problem, dtype: str, build_seed: int, train: bool = False,
           input_seed: int = 0) -> "ProblemOp":
        sizes = dict(problem.constants)
        count = len(problem.raw_inputs({}, 0))
        return cls(name=f"kernelbench:{problem.name}",
                   inputs=tuple(f"arg{i}" for i in range(count)), symbols=tuple(sizes),
                   basic_shape=sizes,
                   shape_class=tuple({**sizes, **over} for _, over in shape_variants(sizes)),
                   summary=f"KernelBench problem {problem.name} (Model in float64 as the oracle)",
                   origin=problem.path, problem=problem, dtype_name=dtype,
                   build_seed=build_seed, train=train, input_seed=input_seed)

    # -- shapes and inputs ----------------------------------------------------------
    def overrides(self, s: Mapping[str, int]) -> dict:
        """The sizes of shape ``s`` that differ from the benchmarked ones."""
        return {k: int(v) for k, v in s.items() if self.basic_shape.get(k) != v}

    def variants(self) -> list[tuple[str, dict]]:
        """(label, overrides): the benchmarked shape, then the rescaled ones."""
        return shape_variants(self.problem.constants)

    def args(self, over: Mapping[str, int], family: str, seed: int) -> list:
        """One case's inputs in ``get_inputs()`` order (:func:`make_inputs`)."""
        return make_inputs(self.problem, over, family, self.dtype_name, seed)

    def generate(self, s, dtype, family, rng) -> dict:
        seed = int(rng.integers(0, 2 ** 31 - 1))
        return dict(zip(self.inputs, self.args(self.overrides(s), family, seed)))

    def input_shapes(self, s) -> dict:
        return {k: tuple(np.shape(a)) for k, a in
                zip(self.inputs, self.args(self.overrides(s), "problem", 0))}

    def output_shape(self, s) -> tuple:
        over = self.overrides(s)
        orc = self.oracle_at(_label(over), over)
        return tuple(np.shape(orc.reference(self.args(over, "problem", 0))))

    # -- the oracle -----------------------------------------------------------------
    def oracle_at(self, label: str, over: Mapping[str, int]) -> Oracle:
        """The reference at one shape, built once (its dtype-rounded output on the
        problem's own inputs fixes the output dtype)."""
        if label not in self.oracles:
            orc = Oracle(self.problem, over, self.dtype_name, self.build_seed, self.train)
            orc.first_inputs = self.args(over, "problem", self.input_seed)
            orc.at_dtype(orc.first_inputs)
            self.oracles[label] = orc
        return self.oracles[label]

    def forget(self, label: str) -> None:
        """Drop a shape's oracle (the reference rejects the shape)."""
        self.oracles.pop(label, None)

    def oracle(self, x, **kw) -> np.ndarray:
        args = [x[k] for k in self.inputs]
        shapes = [tuple(np.shape(a)) for a in args]
        for orc in self.oracles.values():
            if orc.input_shapes == shapes:
                return np.asarray(orc.reference(args), dtype=np.float64)
        raise KeyError(f"no oracle built for input shapes {shapes}")


def _label(over: Mapping[str, int]) -> str:
    return "basic" if not over else "+".join(f"{k}={v}" for k, v in sorted(over.items()))
