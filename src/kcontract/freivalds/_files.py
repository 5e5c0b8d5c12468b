"""``kcontract verify-matmul A B C``: load operands from files, verify, render.

Exit codes: 0 verified, 1 failed (suspect elements listed), 2 bad input.
"""
from __future__ import annotations

import json
import os
from typing import Optional

import ml_dtypes
import numpy as np

from ..errors import UsageError
from ._backend import is_torch_tensor
from ._core import DEFAULT_FALSE_ALARM, FreivaldsResult, verify

#: Suspect elements shown in the human-readable rendering.
SHOW_SUSPECTS = 20


def load_operand(path: str):
    """Load a ``.npy`` array or (torch installed) a ``.pt`` / ``.pth`` tensor.
    Anything unreadable raises :class:`UsageError`."""
    ext = os.path.splitext(path)[1].lower()
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if ext == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except Exception as exc:  # corrupt header, pickled object arrays, ...
            raise UsageError(f"{path}: not a readable .npy array ({exc})") from None
        if arr.dtype.kind == "V":
            raise UsageError(f"{path}: dtype {arr.dtype.str} is raw bytes (numpy cannot store "
                             "bfloat16 / float8 in .npy); save the array as .pt, or as float32 "
                             "and declare the output format")
        return arr
    if ext in (".pt", ".pth"):
        try:
            import torch
        except ImportError:
            raise UsageError(f"{path}: reading .pt files needs torch, which is not installed") \
                from None
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise UsageError(f"{path}: not a readable torch file ({exc})") from None
        if not isinstance(obj, torch.Tensor):
            raise UsageError(f"{path}: holds a {type(obj).__name__}, not a single tensor")
        return obj
    raise UsageError(f"{path}: unknown file type {ext or '(none)'}; use .npy or .pt")


def _to_numpy(t):
    """A CPU torch tensor as a numpy array (bfloat16 / float8 via ml_dtypes views)."""
    import torch

    t = t.detach().cpu().contiguous()
    views = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16)}
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            views[getattr(torch, name)] = (torch.uint8, getattr(ml_dtypes, name))
    if t.dtype in views:
        raw, dt = views[t.dtype]
        return t.view(raw).numpy().view(dt)
    return t.numpy()


def verify_matmul_files(a_path: str, b_path: str, c_path: str, *, rounds: int = 1,
                        seed: Optional[int] = None, accumulate: Optional[str] = None,
                        as_json: bool = False, output_format: Optional[str] = None,
                        false_alarm: float = DEFAULT_FALSE_ALARM, console=None) -> int:
    """Verify that C = A @ B for three files; print the verdict; return the exit code."""
    from rich.console import Console

    out = console or Console(highlight=False, soft_wrap=True)
    err = console or Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        arrays = [load_operand(p) for p in (a_path, b_path, c_path)]
        if any(is_torch_tensor(x) for x in arrays) and not all(is_torch_tensor(x) for x in arrays):
            arrays = [_to_numpy(x) if is_torch_tensor(x) else x for x in arrays]
        result = verify(*arrays, rounds=rounds, seed=seed, accumulate=accumulate,
                        output_format=output_format, false_alarm=false_alarm)
    except UsageError as exc:
        if as_json:
            out.print_json(json.dumps({"passed": None, "error": str(exc), "exit_code": 2}))
        else:
            err.print(f"[bold red]error:[/] {exc}", markup=True)
        return 2
    if as_json:
        d = result.to_dict()
        d["exit_code"] = 0 if result.passed else 1
        d["files"] = {"a": a_path, "b": b_path, "c": c_path}
        out.print_json(json.dumps(d))
    else:
        render_result(result, console=out, names=(a_path, b_path, c_path))
    return 0 if result.passed else 1


def render_result(result: FreivaldsResult, *, console=None, names=None) -> None:
    """Human-readable verdict with rich: a summary and the suspect elements."""
    from rich.console import Console
    from rich.table import Table

    con = console or Console(highlight=False)
    batch, M, K, N = result.shape if result.shape else ((), 0, 0, 0)
    title = f"{names[2]} = {names[0]} @ {names[1]}" if names else "C = A @ B"
    verdict = "[bold green]VERIFIED[/]" if result.passed else "[bold red]FAILED[/]"
    con.print(f"{verdict}  {title}", markup=True)
    bshape = "x".join(str(v) for v in batch) + " x " if batch else ""
    thr = np.asarray(result.threshold, dtype=np.float64)
    info = Table.grid(padding=(0, 2))
    info.add_column(style="dim")
    info.add_column()
    info.add_row("shape", f"{bshape}({M} x {K}) @ ({K} x {N})")
    info.add_row("formats", f"operands {result.operand_format}, accumulate {result.accumulate}, "
                 f"output {result.output_format}; check in {result.check_precision}")
    info.add_row("rounds / seed", f"{result.rounds} / {result.seed}")
    info.add_row("false-alarm target", f"{result.false_alarm:.1e} per product")
    if thr.size:
        info.add_row("screen threshold", f"{thr.min():.3e}" if thr.min() == thr.max()
                     else f"{thr.min():.3e} .. {thr.max():.3e}")
    info.add_row("screen ratio", f"{result.screen_ratio:.3g} (max |A(Br) - Cr| / threshold)")
    info.add_row("decision ratio", f"{result.ratio:.3g} (passes when <= 1)")
    if result.screened_rows:
        info.add_row("screened rows", f"{len(result.screened_rows)} (recomputed in float64: "
                     f"{len(result.screened_rows) - result.unexamined_rows})")
    info.add_row("time", f"{result.seconds * 1e3:.2f} ms")
    if result.message:
        info.add_row("note", result.message)
    con.print(info)
    if result.suspects:
        tab = Table(title=f"suspect elements ({len(result.suspects)})", title_justify="left")
        for col in ("index", "value", "expected", "error", "bound"):
            tab.add_column(col, justify="right")
        for s in result.suspects[:SHOW_SUSPECTS]:
            tab.add_row(",".join(str(v) for v in s.index), f"{s.value:.9g}", f"{s.expected:.9g}",
                        f"{s.error:.3e}", f"{s.bound:.3e}")
        con.print(tab)
        if len(result.suspects) > SHOW_SUSPECTS:
            con.print(f"... and {len(result.suspects) - SHOW_SUSPECTS} more (use --json)")
    if result.row_failures:
        con.print("rows whose errors are collectively too large: "
                  + ", ".join(",".join(str(v) for v in r) for r in result.row_failures[:10]))
    if result.suspect_columns:
        con.print("suspect columns (left projection): "
                  + ", ".join(",".join(str(v) for v in c) for c in result.suspect_columns[:10]))
