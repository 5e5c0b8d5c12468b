"""Black-box probes: inner products whose outputs separate candidate designs.

Every probe is a batch of rows (one inner product each) built from powers of two
(exact in every candidate operand format) unless it probes the operands
themselves.  ``B`` is the exponent of the *big* term and ``Q`` the largest gap to
a *small* term that every format involved can hold (operand factors normal in
every candidate operand format, residuals normal in the output format).

=============  ================================================================
``group``      big, small, -big at k = 0, j, j+1 for j = 1..129: the small term
               survives exactly when j and j+1 are summed in one fused group (with
               the accumulator); failures at j = g-1 (mod g) give the group size g,
               survivals only at j = w-1 (mod w) interleaved partial sums
``rounding``   big, then one or two small terms, then -big, each in its own group
               (k = 0, g, 2g, ...): each row shows one rounding of big + small to the
               accumulator (swamping, ties, magnitude-lowering terms, both signs)
``promotion``  big at 0, a small term at every k = 1..W, -big at the end: small
               terms are lost beside big in the narrow accumulator but kept once it
               restarts, so W + 1 - (terms kept) is the promotion interval
``workspace``  big, 2**-20 big, -big at k = 0, j, j+1: exact in a wide accumulator,
               lost where j and j+1 are in two blocks whose partial sums meet in a
               narrow workspace (j = C-1 mod C); then 2**-q big across that boundary
``operands``   single products (one-hot rows) of many-bit operands, products
               beyond fp16's range, and a cancellation of 1 - (1 + 2**-12)**2 that
               separates exact products from rounded ones
``subnormal``  subnormal operands times a large factor (normal products), and
               normal products whose sum is subnormal in the output format
``sweep``      random normal operands at growing reduction lengths
=============  ================================================================
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..formats import get_format, round_to  # noqa: F401  (round_to: used by recover)

#: the operand formats a kernel of each input format might round to
OPERAND_CANDIDATES = {
    "float64": ("float64", "float32"),
    "float32": ("float32", "tfloat32", "bfloat16", "float16"),
    "float16": ("float16",),
    "bfloat16": ("bfloat16",),
    "float8_e4m3fn": ("float8_e4m3fn",),
    "float8_e5m2": ("float8_e5m2",),
}
GROUP_SCAN = 129
PROMOTION_WINDOWS = tuple(range(16, 513, 16))
SWEEP_LENGTHS = (16, 64, 256, 1024)


@dataclass
class Probe:
    name: str
    a: np.ndarray  # (R, K) float64, values of the input format
    b: Optional[np.ndarray]  # (R, K) or None (a sum of terms)
    params: list = field(default_factory=list)  # per row: what it varies (j, q, W, ...)
    purpose: str = ""

    @property
    def rows(self) -> int:
        return self.a.shape[0]


@dataclass
class Scales:
    """Exponent ranges the probes may use for one target and input format."""

    input_format: str
    output_format: str
    operands: int
    lo: int  # smallest exponent of a factor (a term, for a sum)
    hi: int  # largest
    #: the smallest exponent of a nonzero result the op shows as it is (None: any; the
    #: matmul inside linear_gelu: gelu(v) == v only for v >= 16, and gelu(0) == 0)
    floor: Optional[int] = None
    #: False: negative results are not readable (gelu hides them), no probe makes one
    signed: bool = True

    @classmethod
    def of(cls, input_format: str, output_format: str, operands: int, *,
           floor: Optional[int] = None, signed: bool = True, term_operands: bool = False,
           headroom: int = 0) -> "Scales":
        """``term_operands``: a one-operand target whose kernel may round its terms (the
        v of attention's p @ v): probes stay inside the candidates of the input's range;
        ``headroom``: binades the kernel's inputs sit above the terms (v = T * term)."""
        if operands == 2:
            names = OPERAND_CANDIDATES.get(input_format, (input_format,))
        elif term_operands:
            emax = get_format(input_format).emax
            names = tuple(f for f in OPERAND_CANDIDATES.get(input_format, (input_format,))
                          if get_format(f).emax >= emax)
        else:
            names = ()
        fmts = [get_format(f) for f in names or (input_format,)]
        lo = max(f.emin for f in fmts)
        hi = min(f.emax for f in fmts) - headroom
        return cls(input_format, output_format, operands, lo, hi, floor, signed)

    @property
    def big(self) -> int:
        """Exponent of the big term (a product of two factors at most 2**hi)."""
        top = 14 if self.floor is None else max(14, self.floor + 25)
        return min(top, self.operands * self.hi - 1)

    @property
    def small_min(self) -> int:
        """Smallest exponent of a product of normal factors whose residual the output
        shows as a normal number (and the op as it is)."""
        low = max(self.operands * self.lo, get_format(self.output_format).emin)
        return low if self.floor is None else max(low, self.floor)

    @property
    def workspace_big(self) -> int:
        """Exponent of the workspace probes' big term: below fp16's largest value (15
        where the op shows only results of at least 2**floor)."""
        return min(self.big, 14 if self.floor is None else 15)

    @property
    def lift(self) -> float:
        """2**floor, added to a probe's row where the op shows only results of at least
        that (0: the op shows any result)."""
        return 2.0 ** self.floor if self.floor is not None else 0.0

    @property
    def gap(self) -> int:
        """Q: the largest gap between the big term and a small one."""
        return min(40, self.big - self.small_min)

    def split(self, e: int, mant: float = 1.0) -> tuple[float, float]:
        """Factors (a, b) with a * b = mant * 2**e, both normal; (mant * 2**e, 1) for a sum."""
        if self.operands == 1:
            return mant * 2.0 ** e, 1.0
        ea = int(math.ceil(e / 2))
        return mant * 2.0 ** ea, 2.0 ** (e - ea)

    def can_split(self, e: int) -> bool:
        if self.operands == 1:
            return self.lo <= e <= self.hi
        return 2 * self.lo <= e <= 2 * self.hi


def _rows(scales: Scales, K: int, entries: list[list[tuple[int, float]]]):
    """Rows from lists of (position, product value) pairs."""
    R = len(entries)
    a = np.zeros((R, K))
    b = np.zeros((R, K)) if scales.operands == 2 else None
    for r, row in enumerate(entries):
        for k, v in row:
            if v == 0:
                continue
            e = int(math.floor(math.log2(abs(v))))
            x, y = scales.split(e, v / 2.0 ** e)
            a[r, k] = x
            if b is not None:
                b[r, k] = y
    return a, b


def group_probe(scales: Scales) -> Probe:
    B, Q = scales.big, scales.gap
    big, small = 2.0 ** B, 2.0 ** (B - Q)
    js = list(range(1, GROUP_SCAN + 1))
    entries = [[(0, big), (j, small), (j + 1, -big)] for j in js]
    a, b = _rows(scales, GROUP_SCAN + 2, entries)
    return Probe("group", a, b, js, f"2**{B} at k=0, 2**{B - Q} at k=j, -2**{B} at k=j+1")


def rounding_probe(scales: Scales, group: int) -> Probe:
    B, Q = scales.big, scales.gap
    big = 2.0 ** B
    entries, params = [], []
    for q in range(1, Q + 1):
        s = 2.0 ** (B - q)
        pats = {"+": [big, s, -big], "-": [big, -s, -big], "mirror": [-big, s, big],
                "neg-": [-big, -s, big]}
        if not scales.signed:  # results of these two are negative
            del pats["-"], pats["neg-"]
        if q < Q:
            pats["tie"] = [big, s, s / 2, -big]
            pats["3/4"] = [big, 1.5 * s, -big]
        for tag, vals in pats.items():
            entries.append([(i * group, v) for i, v in enumerate(vals)])
            params.append((tag, q))
    a, b = _rows(scales, 4 * group, entries)
    return Probe("rounding", a, b, params,
                 f"2**{B} + small terms 2**-q of it (q = 1..{Q}) - 2**{B}, one per group")


def promotion_probe(scales: Scales, p: int, group: int) -> Optional[Probe]:
    """None when a small term cannot be both lost beside big in a p-bit accumulator and
    kept by a 24-bit wide one: a group of them sums to at most half an ulp of big (a tie
    keeps big, whose last bit is even), and one is an ulp of big in 24 bits."""
    B = scales.big
    lost = p + int(math.ceil(math.log2(max(group, 1))))
    if lost > 23 or B - lost < scales.small_min:
        return None
    small = 2.0 ** (B - lost)
    K = 2 * PROMOTION_WINDOWS[-1] + 2
    entries = [[(0, 2.0 ** B)] + [(k, small) for k in range(1, W + 1)] + [(K - 1, -2.0 ** B)]
               for W in PROMOTION_WINDOWS]
    a, b = _rows(scales, K, entries)
    return Probe("promotion", a, b, list(PROMOTION_WINDOWS),
                 f"2**{B} at k=0, 2**{B - lost} at k=1..W, -2**{B} at k={K - 1}")


def term_probe(scales: Scales, seed: int = 0xF1) -> Probe:
    """The operands of a one-operand target whose kernel may round its terms: one-hot
    rows of many-bit terms, terms beyond fp16's range, and x - x pairs (exactly 0 for
    rounded terms, the rounding residual of x in a narrow accumulator)."""
    f = get_format(scales.input_format)
    rng = np.random.default_rng(seed)
    K, n = 17, 24
    frac = rng.integers(0, 2 ** (f.precision - 1), 3 * n) / 2.0 ** (f.precision - 1)
    x = (1.0 + frac) * np.where(rng.random(3 * n) < 0.5, -1.0, 1.0)
    e = 17 if scales.hi - 1 >= 17 else 0
    a = np.zeros((3 * n, K))
    a[:n, 0] = x[:n]
    a[n:2 * n, 0] = x[n:2 * n] * 2.0 ** e
    a[2 * n:, 0] = x[2 * n:]
    a[2 * n:, 1] = -x[2 * n:]
    params = ["many-bit"] * n + ["beyond fp16 range" if e >= 17 else "many-bit"] * n + \
        ["pair"] * n
    return Probe("operands", round_to(a, f), None, params, "one-hot many-bit terms; x - x")


WORKSPACE_SCAN = 513
WORKSPACE_GAP = 20


def workspace_probe(scales: Scales) -> Optional[Probe]:
    """Big, small, -big at k = 0, j, j+1 (j = 1..513), small = 2**-20 big: exact in a
    wide accumulator whatever the order, lost where j and j+1 fall into different blocks
    whose partial sums are added into a workspace of 20 bits or fewer (every C-th j for
    blocks of C); big below fp16's largest value.  Where the op shows only results of at
    least 2**floor, 2**floor is added at k = j+2."""
    B = scales.workspace_big
    e = B - WORKSPACE_GAP
    lift = scales.lift
    if e < scales.small_min and scales.floor is None:
        return None
    js = list(range(1, WORKSPACE_SCAN + 1))
    K = WORKSPACE_SCAN + 3
    entries = [[(0, 2.0 ** B), (j, 2.0 ** e), (j + 1, -2.0 ** B)] +
               ([(j + 2, lift)] if lift else []) for j in js]
    a, b = _rows(scales, K, entries)
    return Probe("workspace", a, b, js,
                 f"2**{B} at k=0, 2**{e} at k=j, -2**{B} at k=j+1" +
                 (f", 2**{scales.floor} at k=j+2" if lift else ""))


def workspace_bits_probe(scales: Scales, block: int) -> Probe:
    """Big, 2**-q big, -big at k = 0, C-1, C (q = 1..20): the small term crosses into
    the workspace at the block boundary, kept where the workspace has q + 1 bits."""
    B = scales.workspace_big
    lift = scales.lift
    qs = [q for q in range(1, WORKSPACE_GAP + 1) if B - q >= scales.small_min or lift]
    K = block + 2
    entries = [[(0, 2.0 ** B), (block - 1, 2.0 ** (B - q)), (block, -2.0 ** B)] +
               ([(block + 1, lift)] if lift else []) for q in qs]
    a, b = _rows(scales, K, entries)
    return Probe("workspace bits", a, b, qs, f"2**{B}, 2**({B}-q), -2**{B} across k = "
                                            f"{block - 1}, {block}")


def operand_probe(scales: Scales, group: int, seed: int = 0xF1) -> Optional[Probe]:
    if scales.operands < 2:
        return None
    f = get_format(scales.input_format)
    rng = np.random.default_rng(seed)
    K = max(2 * group, 17)
    n = 24
    bits = f.precision
    # results the op shows as they are: positive and at least 2**floor where it must
    lift = 2.0 ** (scales.floor or 0) if scales.floor is not None and scales.floor > 0 else 1.0

    def sig(count, nbits):
        frac = rng.integers(0, 2 ** (nbits - 1), count) / 2.0 ** (nbits - 1)
        if not scales.signed:
            return 1.0 + frac
        return (1.0 + frac) * np.where(rng.random(count) < 0.5, -1.0, 1.0)

    rows_a, rows_b, params = [], [], []

    def add(tag, av, bv, second=None):
        for x, y in zip(av, bv):
            ra = np.zeros(K)
            rb = np.zeros(K)
            ra[0], rb[0] = x, y
            if second is not None:
                ra[group], rb[group] = second
            rows_a.append(ra)
            rows_b.append(rb)
            params.append(tag)

    add("many-bit x 1", sig(n, bits), np.ones(n) * lift)
    add("many-bit x many-bit", sig(n, bits), sig(n, bits) * lift)
    add("11-bit x 11-bit", sig(n, min(bits, 11)), sig(n, min(bits, 11)) * lift)
    add("8-bit x 8-bit", sig(n, min(bits, 8)), sig(n, min(bits, 8)) * lift)
    if f.max > 2.0 ** 17:
        add("beyond fp16 range", sig(8, bits) * 2.0 ** 17, np.full(8, 2.0 ** -10) * lift)
    if bits >= 13:
        # 1 - (1 + 2**-12)**2 with the pair at k = 0 and k = j: exact only where the second
        # product meets the first unrounded (in one partial sum, whatever the order); where
        # only positive results show: (1 + 2**-12)**2 - 1, times 2**(floor + 11)
        c = 1.0 + 2.0 ** -12
        e = 0 if scales.signed else max(scales.floor or 0, 0) + 11
        ea, eb = 2.0 ** (e - e // 2), 2.0 ** (e // 2)
        for j in range(1, K):
            for x in ((1.0, -1.0) if scales.signed else (-1.0,)):
                ra = np.zeros(K)
                rb = np.zeros(K)
                ra[0], rb[0] = x * ea, eb
                ra[j], rb[j] = -x * c * ea, c * eb
                rows_a.append(ra)
                rows_b.append(rb)
                params.append(f"cancel {j}")
    a = round_to(np.array(rows_a), f)
    b = round_to(np.array(rows_b), f)
    return Probe("operands", a, b, params, "one-hot products of many-bit operands")


def subnormal_probe(scales: Scales) -> Probe:
    """Rows tagged 'input' (subnormal operands, normal products or sums) and 'output'
    (normal operands, a subnormal result)."""
    fi = get_format(scales.input_format)
    fo = get_format(scales.output_format)
    params = []
    K = 64
    # subnormal operands: sub * 2**m is normal in the output
    sub = fi.tiny / 4
    ins = [(sub, 2.0 ** min(scales.hi, 12))] if scales.operands == 2 else None
    a_rows, b_rows = [], []
    if ins is not None:
        ra, rb = np.zeros(K), np.zeros(K)
        ra[0], rb[0] = ins[0]
        a_rows.append(ra)
        b_rows.append(rb)
        params.append("input")
        ra, rb = np.zeros(K), np.zeros(K)
        ra[0], rb[0] = -ins[0][0], ins[0][1]
        a_rows.append(ra)
        b_rows.append(rb)
        params.append("input")
    else:
        a_rows.append(np.full(K, sub))
        b_rows.append(np.ones(K))
        params.append("input")
    # a subnormal result from normal products: 1.5 t - t = t / 2 (operands as given)
    t = fo.tiny
    e = int(math.log2(t))
    scales = Scales(scales.input_format, scales.output_format, scales.operands, fi.emin, fi.emax)
    if scales.can_split(e) and scales.can_split(e + 1):
        x1, y1 = scales.split(e, 1.5)
        x2, y2 = scales.split(e, -1.0)
        ra, rb = np.zeros(K), np.zeros(K)
        ra[0], rb[0], ra[1], rb[1] = x1, y1, x2, y2
        a_rows.append(ra)
        b_rows.append(rb)
        params.append("output")
    a = np.array(a_rows)
    b = np.array(b_rows) if scales.operands == 2 else None
    return Probe("subnormal", a, b, params, "subnormal operands; a subnormal result")


def sweep_probe(scales: Scales, K: int, side: int = 16, seed: int = 0xF2) -> Probe:
    """Random normal operands (1 + |normal| where only positive results show: every
    inner product is then at least K)."""
    rng = np.random.default_rng([seed, K])
    f = get_format(scales.input_format)

    def draw(shape):
        x = rng.standard_normal(shape)
        return x if scales.signed else 1.0 + np.abs(x)
    with np.errstate(over="ignore"):
        a = round_to(draw((side if scales.operands == 2 else side * side, K)), f)
        b = round_to(draw((side, K)), f) if scales.operands == 2 else None
    what = "random normal operands" if scales.signed else "random operands 1 + |normal|"
    return Probe(f"sweep K={K}", a, b, [K], what)


__all__ = ["Probe", "Scales", "OPERAND_CANDIDATES", "group_probe", "rounding_probe",
           "promotion_probe", "workspace_probe", "workspace_bits_probe", "operand_probe", "term_probe", "subnormal_probe", "sweep_probe",
           "SWEEP_LENGTHS", "PROMOTION_WINDOWS", "GROUP_SCAN"]
