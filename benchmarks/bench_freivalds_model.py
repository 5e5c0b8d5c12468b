"""kcontract.freivalds.guard() around the forward pass of a small transformer.

The model is built here (torch, random weights from a fixed seed): token
embedding, ``--layers`` pre-norm blocks of multi-head self-attention (a fused
q/k/v ``nn.Linear``, ``q @ k^T`` and ``softmax(.) @ v`` as batched matmuls over
the heads, an output projection) and a GELU feed-forward block (two
``nn.Linear``), then a final norm and the vocabulary projection.  ``--style gpt2``
writes the layers as GPT-2's implementation does (``Conv1D``: ``torch.addmm``) and the
two attention products as ``torch.einsum``s.  Every matmul of
the forward pass goes through the guard: the linear layers with their cached
weight projections, the two attention products as batched products whose right
operand is an activation (no cache).

Each repetition times one plain forward pass and one guarded forward pass, in
alternating order; the figures are medians (and minima), with the load average
before and after.  ``--inject`` then corrupts one element of one product per
forward pass (a TorchFunctionMode beneath the guard, so the guard sees the
corrupted output, as it would a faulty kernel's) and counts the detections.

    python benchmarks/bench_freivalds_model.py
    python benchmarks/bench_freivalds_model.py --device cuda
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from kcontract.freivalds import ProductCheckError, guard

F = nn.functional


class Conv1D(nn.Module):
    """A linear layer as GPT-2's implementation writes it: a (in, out) weight and
    ``torch.addmm(bias, x, weight)`` over the rows of x."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_in, d_out) * 0.02)
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(self, x):
        y = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return y.view(*x.shape[:-1], -1)


class Block(nn.Module):
    """A pre-norm block; ``style`` "linear": nn.Linear layers and attention's products as
    matmuls; "gpt2": GPT-2's Conv1D layers (addmm) and the products as einsums."""

    def __init__(self, d: int, heads: int, ffn: int, style: str = "linear"):
        super().__init__()
        self.heads, self.style = heads, style
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        lin = Conv1D if style == "gpt2" else nn.Linear
        self.qkv = lin(d, 3 * d)
        self.proj = lin(d, d)
        self.up, self.down = lin(d, ffn), lin(ffn, d)

    def forward(self, x):
        B, T, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(B, T, h, d // h).transpose(1, 2) for t in (q, k, v))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        gpt2 = self.style == "gpt2"
        att = torch.einsum("bhqd,bhkd->bhqk", q, k) if gpt2 else \
            torch.matmul(q, k.transpose(-2, -1))
        att = (att * (d // h) ** -0.5).masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = torch.einsum("bhqk,bhkd->bqhd", att, v) if gpt2 else \
            torch.matmul(att, v).transpose(1, 2)
        y = y.reshape(B, T, d)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, ffn: int, seq: int,
                 style: str = "linear"):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads, ffn, style) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos[: tokens.shape[1]]
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


class Corrupt(TorchFunctionMode):
    """Adds ``rel * max|C|`` to one random element of the ``which``-th product
    of each forward pass (linear or matmul)."""

    PRODUCTS = {F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__,
                torch.addmm, torch.einsum}

    def __init__(self, which: int, rel: float, gen: torch.Generator):
        super().__init__()
        self.which, self.rel, self.gen, self.count, self.where = which, rel, gen, 0, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.PRODUCTS and not _from_checker():
            if self.count == self.which:
                out = out.contiguous()  # (an einsum may return a permuted view)
                flat = out.view(-1)
                i = int(torch.randint(flat.numel(), (1,), generator=self.gen))
                flat[i] += self.rel * float(out.abs().max())
                self.where = i
            self.count += 1
        return out


def _from_checker(depth: int = 8) -> bool:
    """Whether the call comes from the check itself (its own products pass
    through this mode too, beneath the guard), not from the guarded code (which
    the guard's mode forwards)."""
    f = sys._getframe(2)
    for _ in range(depth):
        if f is None:
            return False
        name = f.f_globals.get("__name__", "")
        if name.startswith("kcontract.freivalds.") and name != "kcontract.freivalds._guard":
            return True
        f = f.f_back
    return False


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--inject", type=int, default=20,
                    help="forward passes with one corrupted product (0: none)")
    ap.add_argument("--inject-rel", type=float, default=1e-3,
                    help="size of the corruption relative to max|C| of the product")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--style", choices=("linear", "gpt2"), default="linear",
                    help="linear: nn.Linear layers, attention's products as matmuls; gpt2: "
                         "GPT-2's Conv1D layers (torch.addmm) and the products as einsums")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = TinyLM(args.vocab, args.d_model, args.layers, args.heads, 4 * args.d_model,
                   args.seq, args.style).to(dev).eval()
    tokens = torch.randint(args.vocab, (args.batch, args.seq),
                           generator=torch.Generator().manual_seed(1)).to(dev)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    n_par = sum(p.numel() for p in model.parameters())
    print(f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, device {dev}; "
          f"torch {torch.__version__} (threads: {torch.get_num_threads()})")
    print(f"model: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, "
          f"ffn {4 * args.d_model}, vocab {args.vocab}, {n_par / 1e6:.1f} M parameters, "
          f"random weights (seed 0); batch {args.batch} x {args.seq} tokens, float32; "
          f"style {args.style}")
    print(f"load average: {load_average()}")
    g = guard(on_fail="raise", seed=2)
    plain, guarded = [], []
    with torch.no_grad():
        model(tokens)
        with g:
            model(tokens)  # fills the weight cache
            model(tokens)  # and the linear checks' column norms (made at their first use)
        g.stats.calls = g.stats.checked = 0
        g.stats.seconds = 0.0
        g.stats.by_op.clear()
        for rep in range(args.reps):
            for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                if which == 0:
                    model(tokens)
                else:
                    with g:
                        model(tokens)
                sync()
                (plain if which == 0 else guarded).append(time.perf_counter() - t0)
    st = g.stats
    per_fwd = st.checked / args.reps
    med = statistics.median
    tp, tg = med(plain), med(guarded)
    check_s = st.seconds / args.reps
    print(f"forward pass: plain {tp * 1e3:.1f} ms (min {min(plain) * 1e3:.1f}), guarded "
          f"{tg * 1e3:.1f} ms (min {min(guarded) * 1e3:.1f}); overhead {tg / tp - 1:+.1%} "
          f"(of minima {min(guarded) / min(plain) - 1:+.1%})")
    print(f"products verified per forward pass: {per_fwd:g} (calls {st.calls / args.reps:g}); "
          f"failed {st.failed}, skipped {st.skipped}, errors {st.errors}, "
          f"weight-cache hits {st.cache_hits}; time inside the checks {check_s * 1e3:.1f} ms "
          f"per forward pass ({check_s / tp:.1%} of it)")
    for op, (n, sec, ns, nsec) in sorted(st.by_op.items()):
        clear = (sec - nsec) / max(n - ns, 1) * 1e3
        print(f"  {op:>7}: {n / args.reps:g} products per forward pass, "
              f"{sec / args.reps * 1e3:.2f} ms ({sec / max(n, 1) * 1e3:.3f} ms each); "
              f"{ns / max(n, 1):.0%} with a screened row ({nsec / max(ns, 1) * 1e3:.3f} ms "
              f"each), the others {clear:.3f} ms each")
    out = {"load_average": load_average(), "plain_s": tp, "guarded_s": tg,
           "overhead": tg / tp - 1, "products_per_forward": per_fwd, "failed": st.failed,
           "check_s_per_forward": check_s,
           "by_op": {k: {"per_forward": v[0] / args.reps, "s_per_forward": v[1] / args.reps,
                         "screened_share": v[2] / max(v[0], 1)}
                     for k, v in st.by_op.items()}}
    if args.inject:
        gen = torch.Generator().manual_seed(3)
        caught = 0
        with torch.no_grad():
            for t in range(args.inject):
                which = t % max(int(per_fwd), 1)
                gi = guard(on_fail="raise", seed=100 + t)
                try:
                    with Corrupt(which, args.inject_rel, gen), gi:
                        model(tokens)
                except ProductCheckError:
                    caught += 1
        print(f"one element of one product corrupted by {args.inject_rel:g} max|C| "
              f"(every product position in turn): caught in {caught} of {args.inject} "
              "forward passes")
        out.update(inject=args.inject, caught=caught, inject_rel=args.inject_rel)
    print(f"load average: {load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
