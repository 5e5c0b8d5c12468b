"""The diagnosis corpus: real library kernels (``corpus_kernels.py``), each with the cause of its
failures as established without kcontract.

``causes`` are the contract classes of the root causes (empty: the kernel conforms);
``how`` says how each was established: the library's documented semantics, a direct
experiment in the library itself (``evidence`` runs it), or the kernel's construction.

Where the cause depends on the machine (a vectorised exponential or bfloat16 path that one CPU
build takes and another does not), ``evidence`` names an experiment below, run in the library
itself without kcontract, whose answer gives the causes on this machine
(:meth:`CorpusCase.established`); ``causes`` is then what the experiment found where the corpus
was written.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "corpus_kernels.py")


@dataclass(frozen=True)
class CorpusCase:
    name: str
    kernel: str  # function in corpus_kernels.py
    op: str
    dtype: str
    causes: tuple  # classes of the root causes; () = conforms
    how: str
    framework: str = "numpy"
    declare: dict = field(default_factory=dict)
    needs: str = ""  # a module the case needs (skipped where it is missing)
    error: bool = False  # the root cause is a kernel error (wrong dtype, raised)
    evidence: str = ""  # an experiment below whose answer gives the causes on this machine

    @property
    def spec(self) -> str:
        return f"{KERNELS}:{self.kernel}"

    def established(self) -> tuple:
        """The classes of the root causes on this machine: the experiment's answer where the
        case names one, else ``causes``."""
        if not self.evidence:
            return tuple(self.causes)
        if self.evidence not in _ESTABLISHED:
            _ESTABLISHED[self.evidence] = run_experiment(self.evidence)
        return _ESTABLISHED[self.evidence]


# -- experiments, in the libraries themselves (no kcontract) ----------------------------------

_ESTABLISHED: dict = {}


def run_experiment(name: str) -> tuple:
    """The experiment ``name`` (:data:`EVIDENCE`) in a fresh interpreter: the libraries' flush
    modes and thread pools stay out of this process (and JAX's threads out of the forks the
    checker makes)."""
    import json
    import subprocess
    import sys
    code = (f"import json, sys; sys.path.insert(0, {HERE!r}); import corpus; "
            f"print(json.dumps(list(corpus.EVIDENCE[{name!r}]())))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def _torch_sdpa_flushes_probabilities() -> tuple:
    """torch's CPU scaled_dot_product_attention, one query against 64 keys (the size where
    its vectorised kernel runs): 63 keys 90 below the maximum (probability e^-90 ~ 8e-40,
    below float32's smallest normal) with v = 1e37, the maximum's key with v = 0.  The exact
    result is 0.52; an exponential that flushes its subnormal results gives 0."""
    import math
    import torch
    q = torch.zeros(1, 1, 1, 16)
    q[..., 0] = 4.0
    k = torch.zeros(1, 1, 64, 16)
    k[..., 1:, 0] = -90.0
    v = torch.zeros(1, 1, 64, 16)
    v[..., 1:, :] = 1e37
    out = float(torch.nn.functional.scaled_dot_product_attention(q, k, v)[0, 0, 0, 0])
    exact = 63 * math.exp(-90) * 1e37
    return ("C-PRC-03",) if abs(out - exact) > 0.5 * exact else ()


def _torch_bf16_gelu_flushes() -> tuple:
    """torch's CPU GELU on 1024 bfloat16 subnormals (1e-39): the exact result is 5e-40, a
    bfloat16 subnormal; the vectorised bfloat16 path of some CPU builds returns 0."""
    import torch
    x = torch.full((1024,), 1e-39, dtype=torch.bfloat16)
    y = torch.nn.functional.gelu(x).float()
    return ("C-PRC-03",) if bool((y == 0).any()) else ()


def _jax_cpu_flushes() -> tuple:
    """XLA's CPU backend: 1e-40 times 1, both given at run time (a constant 1 would be folded
    away), in float32."""
    import jax
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp
    y = float(jax.jit(lambda a, b: a * b)(jnp.float32(1e-40), jnp.float32(1.0)))
    return ("C-PRC-03",) if y == 0.0 else ()


def _torch_medium_rounds_operands() -> tuple:
    """torch's float32 matmul under set_float32_matmul_precision('medium') against 'highest'
    and against the float64 product of the operands rounded to bfloat16: on a CPU with
    bfloat16 matrix units (AMX, AVX512-BF16) oneDNN rounds the operands to bfloat16; without
    them 'medium' gives the same bits as 'highest'."""
    import torch
    torch.manual_seed(0)
    a, b = torch.randn(64, 256), torch.randn(256, 64)
    torch.set_float32_matmul_precision("highest")
    hi = a @ b
    torch.set_float32_matmul_precision("medium")
    med = a @ b
    torch.set_float32_matmul_precision("highest")
    if torch.equal(hi, med):
        return ()
    exact = a.double() @ b.double()
    rounded = a.bfloat16().double() @ b.bfloat16().double()
    closer = (med.double() - rounded).abs().max() < 0.1 * (med.double() - exact).abs().max()
    return ("C-PRC-04",) if bool(closer) else ()


def _jax_16bit(fn: str, dtype: str) -> tuple:
    """JAX's ``fn`` (gelu, softmax, standardize) at a 16-bit ``dtype``, in JAX and numpy only:
    C-PRC-01 when its jaxpr evaluates the formula's arithmetic in the 16-bit format and its
    outputs err by more than the one rounding of a float32 evaluation (the same function on
    the same values in float32, rounded once to ``dtype``, within 1 ulp of float64); plus
    C-PRC-03 when a subnormal of ``dtype`` times 1 gives 0 at run time (bfloat16's
    subnormals are float32's, which XLA's CPU backend flushes)."""
    import math
    import jax
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp
    import ml_dtypes  # noqa: F401  (bfloat16 for numpy)
    import numpy as np
    f = {"gelu": lambda v: jax.nn.gelu(v, approximate=False),
         "softmax": lambda v: jax.nn.softmax(v, axis=-1),
         "standardize": lambda v: jax.nn.standardize(v, axis=-1)}[fn]
    dt = jnp.dtype(dtype)
    x = np.random.default_rng(0).standard_normal((16, 256)).astype(dt)
    out = np.asarray(f(jnp.asarray(x))).astype(np.float64)
    once = np.asarray(f(jnp.asarray(x.astype(np.float32)))).astype(dt).astype(np.float64)
    ulp = np.spacing(np.abs(once).astype(np.float32)).astype(np.float64) * \
        2.0 ** (24 - jnp.finfo(dt).nmant - 1)
    jaxpr = jax.make_jaxpr(f)(jnp.asarray(x[:1, :2]))
    arith = {"exp", "erfc", "erf", "mul", "div", "sub", "rsqrt", "integer_pow", "square"}

    def eqns(j):  # every equation, inside nested jit calls too
        for e in j.eqns:
            yield e
            for p in e.params.values():
                inner = getattr(p, "jaxpr", None)
                if inner is not None:
                    yield from eqns(getattr(inner, "jaxpr", inner))
    in_16 = any(e.primitive.name in arith and any(str(v.aval.dtype) == dtype for v in e.outvars)
                for e in eqns(jaxpr.jaxpr))
    causes = []
    if in_16 and float(np.max(np.abs(out - once) / ulp)) > 1.0:
        causes.append("C-PRC-01")
    tiny = float(jnp.finfo(dt).smallest_subnormal)
    y = float(jax.jit(lambda a, b: a * b)(jnp.asarray(tiny, dt), jnp.asarray(1.0, dt)))
    if y == 0.0 and math.isfinite(tiny):
        causes.append("C-PRC-03")
    return tuple(causes)


def _jax_cumsum_accumulates_in_float16() -> tuple:
    """examples/jax_cpu/evidence_cumsum.py: jnp.cumsum of float16 N(0, 1) rows against the
    exact prefix sums, normwise, beside float32 running sums rounded once to float16
    (within one float16 unit roundoff): an error several times theirs means the running
    sums are kept in float16."""
    import importlib.util
    import jax
    jax.config.update("jax_platforms", "cpu")
    path = os.path.join(HERE, "..", "..", "examples", "jax_cpu", "evidence_cumsum.py")
    spec = importlib.util.spec_from_file_location("evidence_cumsum", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    jax_err, once_err = mod.normwise_errors()
    return ("C-PRC-01",) if jax_err > 3.0 * once_err else ()


EVIDENCE = {"torch_sdpa_flushes_probabilities": _torch_sdpa_flushes_probabilities,
            "torch_bf16_gelu_flushes": _torch_bf16_gelu_flushes,
            "jax_cpu_flushes": _jax_cpu_flushes,
            "jax_cumsum_accumulates_in_float16": _jax_cumsum_accumulates_in_float16,
            "torch_medium_rounds_operands": _torch_medium_rounds_operands,
            "jax_gelu_float16": lambda: _jax_16bit("gelu", "float16"),
            "jax_gelu_bfloat16": lambda: _jax_16bit("gelu", "bfloat16"),
            "jax_softmax_float16": lambda: _jax_16bit("softmax", "float16"),
            "jax_softmax_bfloat16": lambda: _jax_16bit("softmax", "bfloat16"),
            # the one-pass variance is documented (standardize's default algorithm="fast")
            "jax_standardize_float16": lambda: _jax_16bit("standardize", "float16") + ("C-PRC-02",),
            "jax_standardize_bfloat16": lambda: _jax_16bit("standardize", "bfloat16") + ("C-PRC-02",)}


CASES = (
    # -- numpy / ml_dtypes --
    CorpusCase("np-matmul-fp32", "np_matmul", "matmul", "float32", (),
               "numpy's float32 matmul (BLAS sgemm) accumulates in float32"),
    CorpusCase("np-matmul-fp16-operands", "np_matmul_fp16_operands", "matmul", "float32",
               ("C-PRC-04",), "construction: operands rounded to float16 before an fp32 product "
               "(and float16 overflows at 65504 and has no float32 subnormals)"),
    CorpusCase("np-softmax-naive", "np_softmax_naive", "softmax", "float32", ("C-PRC-02",),
               "construction: exp(x) without the row maximum overflows for logits above 88.7"),
    CorpusCase("np-softmax", "np_softmax", "softmax", "float32", (),
               "the max-subtracted formulation in float32 (float64 intermediates nowhere)"),
    CorpusCase("np-layernorm-one-pass", "np_layernorm_one_pass", "layernorm", "float32",
               ("C-PRC-02",), "construction: variance as E[x^2] - E[x]^2 cancels for inputs "
               "with a large mean"),
    CorpusCase("np-layernorm", "np_layernorm", "layernorm", "float32", (),
               "the two-pass formulation (mean first, then the centred second moment)"),
    CorpusCase("np-layernorm-bf16-via-fp32", "np_via_fp32_layernorm", "layernorm",
               "bfloat16", (), "bfloat16 in and out through ml_dtypes (exact widening, "
               "round-to-nearest-even narrowing that keeps bfloat16 subnormals), the two-pass "
               "formulation in float32 between", needs="ml_dtypes"),
    CorpusCase("np-attention-bf16-via-fp32", "np_via_fp32_attention", "attention", "bfloat16",
               (), "bfloat16 in and out through ml_dtypes, float32 numpy attention between",
               needs="ml_dtypes"),
    CorpusCase("np-attention", "np_attention", "attention", "float32", (),
               "float32 numpy: max-subtracted softmax, BLAS products; numpy sets no flush mode "
               "(subnormal probabilities and results kept)"),
    CorpusCase("np-embedding-index", "np_embedding_index", "embedding", "float32",
               ("C-EXC-02",), "numpy indexing semantics: a negative index counts from the end "
               "(no error), past the end raises IndexError; the declared policy is raise"),
    CorpusCase("np-embedding-take-clip", "np_embedding_take_clip", "embedding", "float32",
               ("C-EXC-02",), "numpy.take(mode='clip') documents clipping to the valid range"),
    CorpusCase("np-embedding-take-wrap-declared", "np_embedding_take_wrap", "embedding",
               "float32", (), "numpy.take(mode='wrap') documents wrapping, declared oob=wrap",
               declare={"oob": "wrap"}),
    CorpusCase("np-gelu-tanh", "np_gelu_tanh", "gelu", "float32", ("C-CMP-01",),
               "construction: the tanh approximation where the erf form is due"),
    CorpusCase("np-gelu-tanh-declared", "np_gelu_tanh", "gelu", "float32", (),
               "the tanh approximation, declared approximation=tanh",
               declare={"approximation": "tanh"}),
    CorpusCase("np-cast-bf16", "np_cast", "cast", "bfloat16", (),
               "ml_dtypes converts float32 to bfloat16 with round-to-nearest-even",
               needs="ml_dtypes"),
    CorpusCase("np-cast-bf16-truncate", "np_cast_bf16_truncate", "cast", "bfloat16",
               ("C-PRC-04",), "construction: the low 16 bits dropped (round toward zero)",
               needs="ml_dtypes"),
    CorpusCase("np-sum-bf16-sequential", "np_sum_bf16_sequential", "sum", "bfloat16",
               ("C-PRC-01",), "construction: ml_dtypes' bfloat16 add, one element at a time, "
               "so the accumulator is bfloat16", needs="ml_dtypes"),
    CorpusCase("np-gelu-vectorized", "np_gelu_vectorized", "gelu", "float32", (),
               "numpy.vectorize over math.erf returns float64 arrays: a wrong output dtype",
               error=True),
    # -- shape faults (the generated kernels of examples/reward_hacked) --
    CorpusCase("hacked-benchmark-shape-only", "np_matmul_benchmark_shape_only", "matmul",
               "float32", ("C-CMP-03",), "construction: right only at the benchmarked shape"),
    CorpusCase("hacked-reuses-result", "np_matmul_reuses_result", "matmul", "float32",
               ("C-CMP-03",), "construction: returns the first call's result again"),
    # -- torch (CPU) --
    CorpusCase("torch-matmul-medium", "torch_matmul_medium", "matmul", "float32", (),
               "experiment: on a CPU without bf16 matrix units, 'medium' gives the same bits as "
               "'highest'; with them (AMX, AVX512-BF16) the operands are rounded to bfloat16",
               framework="torch", needs="torch", evidence="torch_medium_rounds_operands"),
    CorpusCase("torch-matmul-autocast-bf16", "torch_matmul_autocast_bf16", "matmul",
               "float32", ("C-PRC-04",), "torch.autocast('cpu') documents matmul running in "
               "bfloat16 (operands rounded, result in bfloat16)", framework="torch",
               needs="torch"),
    CorpusCase("torch-gelu-ftz", "torch_gelu_ftz", "gelu", "float32", ("C-PRC-03",),
               "torch.set_flush_denormal(True) sets FTZ and DAZ on x86 (documented)",
               framework="torch", needs="torch"),
    CorpusCase("torch-matmul-ftz", "torch_matmul_ftz", "matmul", "float32", ("C-PRC-03",),
               "torch.set_flush_denormal(True) sets FTZ and DAZ on x86 (documented)",
               framework="torch", needs="torch"),
    CorpusCase("torch-sum-ftz", "torch_sum_ftz", "sum", "float32", ("C-PRC-03",),
               "torch.set_flush_denormal(True) sets FTZ and DAZ on x86 (documented)",
               framework="torch", needs="torch"),
    CorpusCase("torch-softmax-ftz", "torch_softmax_ftz", "softmax", "float32", ("C-PRC-03",),
               "torch.set_flush_denormal(True): probabilities below the smallest normal "
               "become 0", framework="torch", needs="torch"),
    CorpusCase("torch-softmax-ftz-declared", "torch_softmax_ftz", "softmax", "float32", (),
               "the same, declared subnormals=flush", framework="torch", needs="torch",
               declare={"subnormals": "flush"}),
    CorpusCase("torch-gelu-bf16", "torch_gelu", "gelu", "bfloat16", ("C-PRC-03",),
               "experiment: F.gelu on 1024 bfloat16 subnormals (1e-39) returns 0 on CPUs whose "
               "build takes the vectorised bfloat16 path (AVX512-BF16 here), the nearest "
               "subnormal on others", framework="torch", needs="torch",
               evidence="torch_bf16_gelu_flushes"),
    CorpusCase("torch-gelu-tanh", "torch_gelu_tanh", "gelu", "float32", ("C-CMP-01",),
               "F.gelu(approximate='tanh') is documented as the tanh approximation",
               framework="torch", needs="torch"),
    CorpusCase("torch-softmax-fp32", "torch_softmax", "softmax", "float32", (),
               "torch's CPU softmax subtracts the maximum, float32 throughout",
               framework="torch", needs="torch"),
    CorpusCase("torch-layernorm-fp32", "torch_layernorm", "layernorm", "float32", (),
               "torch's CPU layer_norm (Welford) in float32", framework="torch", needs="torch"),
    CorpusCase("torch-layernorm-ftz", "torch_layernorm_ftz", "layernorm", "float32",
               ("C-PRC-03",), "torch.set_flush_denormal(True) sets FTZ and DAZ on x86 "
               "(documented)", framework="torch", needs="torch"),
    CorpusCase("torch-attention-ftz", "torch_attention_ftz", "attention", "float32",
               ("C-PRC-03",), "torch.set_flush_denormal(True) sets FTZ and DAZ on x86 "
               "(documented)", framework="torch", needs="torch"),
    CorpusCase("torch-linear-gelu-ftz", "torch_linear_gelu_ftz", "linear_gelu", "float32",
               ("C-PRC-03",), "torch.set_flush_denormal(True) sets FTZ and DAZ on x86 "
               "(documented)", framework="torch", needs="torch"),
    CorpusCase("torch-attention-fp32", "torch_attention", "attention", "float32",
               ("C-PRC-03",), "experiment: F.scaled_dot_product_attention over 64 keys returns "
               "0 where the result is made of probabilities below the smallest normal (its "
               "vectorised exponential flushes them; 2 to 8 keys take a path that keeps them)",
               framework="torch", needs="torch", evidence="torch_sdpa_flushes_probabilities"),
    CorpusCase("torch-attention-fp32-flush-declared", "torch_attention", "attention",
               "float32", (), "the same, declared subnormals=flush", framework="torch",
               needs="torch", declare={"subnormals": "flush"}),
    CorpusCase("torch-linear-gelu-fp32", "torch_linear_gelu", "linear_gelu", "float32", (),
               "torch's CPU float32 addmm and GELU (float32 accumulation, no flush mode set)",
               framework="torch", needs="torch"),
    CorpusCase("torch-linear-gelu-bf16", "torch_linear_gelu", "linear_gelu", "bfloat16",
               ("C-PRC-03",), "experiment: the GELU of bfloat16 subnormals returns 0 on CPUs "
               "whose build takes the vectorised bfloat16 path (the torch-gelu-bf16 "
               "experiment)", framework="torch", needs="torch",
               evidence="torch_bf16_gelu_flushes"),
    # -- JAX (CPU) --
    CorpusCase("jax-gelu", "jax_gelu", "gelu", "float32", ("C-CMP-01", "C-PRC-03"),
               "jax.nn.gelu defaults to approximate=True (documented); XLA's CPU backend "
               "flushes denormals (experiment: 1e-40 * 1 gives 0)", needs="jax"),
    CorpusCase("jax-gelu-erf", "jax_gelu_erf", "gelu", "float32", ("C-PRC-03",),
               "XLA's CPU backend flushes denormals (experiment: 1e-40 * 1 gives 0)",
               needs="jax"),
    CorpusCase("jax-gelu-erf-flush-declared", "jax_gelu_erf", "gelu", "float32", (),
               "the same, declared subnormals=flush", needs="jax",
               declare={"subnormals": "flush"}),
    CorpusCase("jax-matmul-flush-declared", "jax_matmul", "matmul", "float32", (),
               "XLA:CPU float32 dot accumulates in float32; flushing declared", needs="jax",
               declare={"subnormals": "flush"}),
    CorpusCase("jax-softmax-flush-declared", "jax_softmax", "softmax", "float32", (),
               "jax.nn.softmax subtracts the maximum; flushing declared", needs="jax",
               declare={"subnormals": "flush"}),
    CorpusCase("jax-layernorm-stable", "jax_layernorm_stable", "layernorm", "float32",
               ("C-PRC-03",), "jax.nn.standardize(algorithm='stable') documents the two-pass "
               "variance; XLA's CPU backend flushes denormals (experiment: 1e-40 * 1 gives 0)",
               needs="jax", evidence="jax_cpu_flushes"),
    CorpusCase("jax-layernorm-stable-flush-declared", "jax_layernorm_stable", "layernorm",
               "float32", (), "the same, declared subnormals=flush", needs="jax",
               declare={"subnormals": "flush"}),
    CorpusCase("jax-layernorm-fast-flush-declared", "jax_layernorm_fast", "layernorm",
               "float32", ("C-PRC-02",), "jax.nn.standardize's default algorithm ('fast') "
               "documents var = E[x^2] - E[x]^2; flushing declared", needs="jax",
               declare={"subnormals": "flush"}),
    CorpusCase("jax-attention-flush-declared", "jax_attention", "attention", "float32", (),
               "jax.nn.dot_product_attention (XLA: float32 dots, max-subtracted softmax); "
               "flushing declared", needs="jax", declare={"subnormals": "flush"}),
    CorpusCase("jax-linear-gelu-erf", "jax_linear_gelu", "linear_gelu", "float32",
               ("C-PRC-03",), "XLA's CPU backend flushes denormals (experiment: 1e-40 * 1 "
               "gives 0)", needs="jax", evidence="jax_cpu_flushes"),
    CorpusCase("jax-embedding-take", "jax_embedding_take", "embedding", "float32",
               ("C-EXC-02",), "jnp.take documents mode='fill' (NaN) for out-of-range indices",
               needs="jax"),
    CorpusCase("jax-embedding-index", "jax_embedding_index", "embedding", "float32",
               ("C-EXC-02",), "JAX's indexing documents clamping out-of-range indices",
               needs="jax"),
    # -- JAX (CPU) at 16 bits: every op of the formula rounded to the input format --
    CorpusCase("jax-gelu-erf-fp16", "jax_gelu_erf", "gelu", "float16", ("C-PRC-01",),
               "experiment: the jaxpr evaluates erfc and the products in float16 and the "
               "outputs err by more than float32's one rounding; float16 subnormals are "
               "float32 normals (no flush)", needs="jax", evidence="jax_gelu_float16"),
    CorpusCase("jax-gelu-erf-bf16", "jax_gelu_erf", "gelu", "bfloat16",
               ("C-PRC-01", "C-PRC-03"), "experiment: bfloat16 ops in the jaxpr, errors past "
               "one rounding; a bfloat16 subnormal times 1 gives 0", needs="jax",
               evidence="jax_gelu_bfloat16"),
    CorpusCase("jax-gelu-erf-bf16-declared", "jax_gelu_erf", "gelu", "bfloat16", (),
               "the same, declared accumulate=bfloat16 and subnormals=flush", needs="jax",
               declare={"accumulate": "bfloat16", "subnormals": "flush"}),
    CorpusCase("jax-softmax-fp16", "jax_softmax", "softmax", "float16", ("C-PRC-01",),
               "experiment: exp and the division in float16 in the jaxpr, errors past one "
               "rounding; max subtracted (its source)", needs="jax",
               evidence="jax_softmax_float16"),
    CorpusCase("jax-softmax-bf16", "jax_softmax", "softmax", "bfloat16",
               ("C-PRC-01", "C-PRC-03"), "experiment: bfloat16 ops, errors past one rounding, "
               "subnormals flushed", needs="jax", evidence="jax_softmax_bfloat16"),
    CorpusCase("jax-softmax-fp16-declared", "jax_softmax", "softmax", "float16", (),
               "the same as jax-softmax-fp16, declared accumulate=float16", needs="jax",
               declare={"accumulate": "float16"}),
    CorpusCase("jax-layernorm-fast-fp16", "jax_layernorm_fast", "layernorm", "float16",
               ("C-PRC-01", "C-PRC-02"), "experiment: float16 ops in the jaxpr, errors past "
               "one rounding; the one-pass variance is standardize's documented default "
               "(x² of large inputs overflows float16)", needs="jax",
               evidence="jax_standardize_float16"),
    CorpusCase("jax-cumsum-fp16", "jax_cumsum", "cumsum", "float16", ("C-PRC-01",),
               "experiment: against the exact prefix sums of float16 N(0, 1) rows, a normwise "
               "error six times that of float32 running sums rounded once", needs="jax", evidence="jax_cumsum_accumulates_in_float16"),
    CorpusCase("jax-cumsum-fp16-declared", "jax_cumsum", "cumsum", "float16", (),
               "the same, declared accumulate=float16", needs="jax",
               declare={"accumulate": "float16"}),
    CorpusCase("torch-silu-mul-fp16", "torch_silu_mul", "silu_mul", "float16", ("C-PRC-01",),
               "construction: F.silu(gate) * up rounds silu's result to float16 before the "
               "product (two float16 roundings; the contract allows float32 intermediates)",
               framework="torch", needs="torch"),
    CorpusCase("torch-rmsnorm-fp32", "torch_rmsnorm", "rmsnorm", "float32", (),
               "F.rms_norm in float32 (float32 throughout on the CPU)", framework="torch",
               needs="torch"),
    CorpusCase("jax-layernorm-fast-bf16", "jax_layernorm_fast", "layernorm", "bfloat16",
               ("C-PRC-01", "C-PRC-02", "C-PRC-03"), "experiment: bfloat16 ops, errors past "
               "one rounding, subnormals flushed; the documented one-pass variance",
               needs="jax", evidence="jax_standardize_bfloat16"),
)


def available(case: CorpusCase) -> bool:
    if not case.needs:
        return True
    import importlib.util
    return importlib.util.find_spec(case.needs) is not None


@dataclass(frozen=True)
class Score:
    """One case's diagnosis against its established cause."""

    case: CorpusCase
    verdict: str
    primary: tuple  # classes of the primary causes ("kernel" for a kernel error)
    violated: tuple  # contract ids that violated or errored
    unrelated: tuple  # of those: neither a right primary cause nor explained by one
    causes: tuple = ()  # the established causes on this machine (CorpusCase.established)

    @property
    def finding(self) -> bool:
        return bool(self.causes) or self.case.error

    @property
    def right(self) -> bool:
        # one primary cause per established cause: the same class twice is one too many
        want = ["kernel"] if self.case.error else list(self.causes)
        return sorted(self.primary) == sorted(want)

    @property
    def false_alarm(self) -> bool:
        return not self.finding and self.verdict != "conformant"


def score(case: CorpusCase, run) -> Score:
    """Score a run (RunResult or its JSON) of ``case``."""
    data = run if isinstance(run, dict) else run.to_json()
    diag = data.get("diagnosis") or {}
    primary = diag.get("primary") or []
    explained = diag.get("explained") or {}
    causes = case.established()
    want = {"kernel"} if case.error else set(causes)
    right_ids = {cid for c in primary if c.get("class") in want for cid in c.get("contracts", [])}
    violated = tuple(r["id"] for r in data.get("results", [])
                     if r.get("verdict") in ("violation", "error"))
    unrelated = tuple(cid for cid in violated if cid not in right_ids and not (
        cid in explained and explained[cid].get("by") in right_ids))
    return Score(case, str(data.get("verdict")), tuple(c.get("class") for c in primary),
                 violated, unrelated, causes)
