"""Detection power of kcontract.freivalds.verify for single-element corruptions.

One honest product per precision recipe (n x n, normal inputs, default n =
4096); each trial adds e to one random element C_ij (random sign, then rounded
to C's format).  The check is linear in C, so a trial does not need a fresh
pass over the matrices: the stage-1 residual of C + E is d - e r_j in row i,
the screen's calibration is recomputed with that row changed, and the stage-2
element test needs only the float64 value of C*_ij.  A sample of trials is
replayed through the real ``verify`` on a corrupted copy to confirm that the
shortcut makes the same decisions.

Prints the detection rate at e = 1e-4 max|C| (float32, >= 1000 trials) and
saves the detection-versus-magnitude curve for float32 and bfloat16 as a PNG.

    python benchmarks/bench_freivalds_detection.py [--out out/freivalds_detection.png]
    python benchmarks/bench_freivalds_detection.py --quick      # n = 1024, fewer trials
"""
from __future__ import annotations

import argparse
import os
import time

import ml_dtypes
import numpy as np

from kcontract.formats import round_to
from kcontract.freivalds import verify
from kcontract.freivalds import _model as model
from kcontract.freivalds._core import (_problem, _row_scales, _stage1, _units, group_of,
                                       rademacher)

BF16 = ml_dtypes.bfloat16
RECIPES = {  # label: (operand dtype, output dtype, groups)
    "float32": (np.float32, np.float32, 1),
    "bfloat16 operands, fp32 output": (BF16, np.float32, 1),
    "bfloat16 operands, bf16 output": (BF16, BF16, 1),
    "bfloat16 operands, bf16 output, groups=64": (BF16, BF16, 64),
}
PFA = 1e-9


class Setup:
    """One honest product and its stage-1 vectors for several random vectors."""

    def __init__(self, n, opdt, outdt, groups, seeds, rng, product=None):
        if product is None:
            A = rng.standard_normal((n, n), np.float32).astype(opdt)
            B = rng.standard_normal((n, n), np.float32).astype(opdt)
            C = (A.astype(np.float32) @ B.astype(np.float32)).astype(outdt)
        else:
            A, B, C = product
        self.A, self.B, self.C = A, B, C
        self.G = groups
        self.C64 = self.C.astype(np.float64)
        self.maxC = float(np.abs(self.C64).max())
        self.p = _problem(A, B, self.C, None, None)
        self.p.groups = groups
        self.gidx = group_of(n, groups)
        self.units = _units(self.p)
        self.n = n
        self.L_e = model.element_log_term(n * n, PFA / 2)
        self.seeds = list(seeds)
        self.vec = {}
        for s in self.seeds:
            z, w = _stage1(self.p, 1, s, self.p.cdtype)  # (1, M, G)
            cn, sn = _row_scales(self.p, s, 1)
            g = 1.0 / np.sqrt(groups)
            self.vec[s] = (z[0] - w[0], (cn * g, sn * g), rademacher(s, 0, n))
        self.outfmt = self.p.out

    def trial(self, seed, i, j, e):
        """(detected, screened) for C_ij += e (rounded to C's format)."""
        d, (cn, sn), r = self.vec[seed]
        new = float(round_to(np.float64(self.C64[i, j] + e), self.outfmt))
        e_eff = new - self.C64[i, j]
        if e_eff == 0.0:
            return False, False  # the corruption rounds away: C is unchanged
        dd = d.copy()
        dd[i, self.gidx[j]] -= e_eff * r[j]
        absd = np.abs(dd)
        scale, _, _ = model.screen_scale(absd.reshape(1, -1), cn, sn, self.n,
                                         -(-self.n // self.G), self.units)
        tau = model.LAMBDA_SCREEN * scale[0]
        if not absd[i].max() > tau:
            return False, False
        a = self.A[i].astype(np.float64)
        b = self.B[:, j].astype(np.float64)
        cstar, abss = a @ b, np.abs(a) @ np.abs(b)
        bound = model.element_bounds(np.array([cstar]), np.array([abss]), self.n, self.units,
                                     self.L_e)[0]
        return abs(new - cstar) > bound, True

    def replay(self, seed, i, j, e):
        """The same trial through the real verify on a corrupted copy."""
        C2 = self.C.copy()
        C2[i, j] = (self.C64[i, j] + e)
        res = verify(self.A, self.B, C2, seed=seed, groups=self.G)
        return (not res.passed) and (i, j) in res.suspect_elements


def run_trials(st, mag, trials, rng):
    det = scr = 0
    for t in range(trials):
        seed = st.seeds[t % len(st.seeds)]
        i, j = (int(v) for v in rng.integers(0, st.n, 2))
        e = mag * st.maxC * (1 if rng.random() < 0.5 else -1)
        dd, ss = st.trial(seed, i, j, e)
        det += dd
        scr += ss
    return det / trials, scr / trials


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--trials", type=int, default=2000, help="trials at 1e-4 max|C| (float32)")
    ap.add_argument("--curve-trials", type=int, default=300, help="trials per curve point")
    ap.add_argument("--replay", type=int, default=40, help="trials replayed through verify")
    ap.add_argument("--out", default=os.path.join("out", "freivalds_detection.png"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.trials, args.curve_trials, args.replay = 1024, 1000, 100, 10
    rng = np.random.default_rng(args.seed)
    seeds = [int(s) for s in rng.integers(0, 2 ** 62, 20)]
    t0 = time.perf_counter()
    setups = {}
    for label, (opdt, outdt, groups) in RECIPES.items():
        same = next((s for s in setups.values() if s.C.dtype == np.dtype(outdt)
                     and s.A.dtype == np.dtype(opdt)), None)
        setups[label] = Setup(args.n, opdt, outdt, groups, seeds, rng,
                              product=(same.A, same.B, same.C) if same else None)
        print(f"{label}: n={args.n}, max|C| = {setups[label].maxC:.4g}", flush=True)

    st = setups["float32"]
    rate, screened = run_trials(st, 1e-4, args.trials, rng)
    print(f"HEADLINE float32 n={args.n}: single-element corruption of 1e-4 max|C|: detected "
          f"{rate:.2%} of {args.trials} trials ({len(seeds)} random vectors; screened "
          f"{screened:.2%})  target >= 99.9%: {'ok' if rate >= 0.999 else 'MISS'}", flush=True)

    mags = np.logspace(-6, 0, 49)
    curves = {}
    for label, s in setups.items():
        curves[label] = [run_trials(s, m, args.curve_trials, rng) for m in mags]
        half = next((m for m, (d, _) in zip(mags, curves[label]) if d >= 0.5), None)
        full = next((m for m, (d, _) in zip(mags, curves[label]) if d >= 0.999), None)
        print(f"{label}: 50% detection at {half:.2g} max|C|, >= 99.9% at "
              f"{full:.2g} max|C|" if half and full else f"{label}: (not reached)")
        print("  magnitude/max|C|: " + " ".join(f"{m:.1e}:{d:.3f}" for m, (d, _)
                                                in zip(mags, curves[label])), flush=True)

    # replay a sample through the real verify (magnitudes around the threshold)
    agree = 0
    for t in range(args.replay):
        label = list(setups)[t % len(setups)]
        s = setups[label]
        m = 10 ** rng.uniform(-5, -1)
        seed = s.seeds[t % len(s.seeds)]
        i, j = (int(v) for v in rng.integers(0, s.n, 2))
        e = m * s.maxC
        a, _ = s.trial(seed, i, j, e)
        b = s.replay(seed, i, j, e)
        agree += a == b
    print(f"replayed {args.replay} trials through verify(): {agree} identical decisions")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return 0
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, pts in curves.items():
        ax.semilogx(mags, [d for d, _ in pts], marker="o", ms=3, label=label)
    ax.axvline(1e-4, color="gray", ls="--", lw=1)
    ax.text(1.1e-4, 0.05, "1e-4 max|C|", color="gray", fontsize=8)
    ax.set_xlabel("corruption magnitude / max|C|  (one element)")
    ax.set_ylabel("detection rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"kcontract.freivalds.verify, n={args.n}, 1 round, false alarm 1e-9")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(args.out, dpi=130)
    print(f"plot saved to {args.out} ({time.perf_counter() - t0:.0f} s)")
    return 0 if rate >= 0.999 else 1


if __name__ == "__main__":
    raise SystemExit(main())
