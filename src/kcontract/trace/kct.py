"""The ``.kct`` file: one traced run of a model, readable anywhere.

A zip archive (deflate) holding ``manifest.json`` and the raw bytes of each kept tensor
(``tensors/<sha256>.bin``) and of each trial's model inputs and output
(``trials/<n>/input<i>.bin``, ``trials/<n>/output.bin``).  The manifest (schema
``kcontract.trace/1``) names the model file and its sha256, the framework, device,
prelude (path, sha256 and source), seed, the environment, the coverage table, one entry
per trial (status, first and end op) and one per recorded aten op call (op, module path,
arguments with tensor references, outputs, status), and an index of the tensors (dtype,
shape).  The tensors' bytes are little-endian, C order.
"""
from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..check.verdict import jsonable
from ..errors import UsageError

KCT_SCHEMA = "kcontract.trace/1"


@dataclass
class Trial:
    index: int
    seed: int
    status: str  # ok | raised
    first_op: int
    end_op: int
    inputs: list  # numpy arrays or plain values
    output: Optional[np.ndarray] = None
    error_type: str = ""
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        return "ok" if self.ok else f"raised {self.error_type}: {self.error}"


@dataclass
class Trace:
    manifest: dict
    ops: list  # one dict per aten op call (see the recorder)
    trials: list  # Trial
    tensors: dict = field(default_factory=dict)  # sha256 -> ndarray
    path: str = ""

    @property
    def label(self) -> str:
        return self.manifest.get("label") or (os.path.basename(self.path) if self.path else "?")

    def tensor(self, ref: Optional[dict]) -> Optional[np.ndarray]:
        """The array of a tensor reference (None when it was not kept)."""
        if not ref:
            return None
        return self.tensors.get(ref.get("sha256"))

    def save(self, path: str) -> str:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        index = {}
        trials = []
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for digest, arr in self.tensors.items():
                arr = np.ascontiguousarray(arr)
                zf.writestr(f"tensors/{digest}.bin", arr.tobytes())
                index[digest] = {"dtype": arr.dtype.name, "shape": list(arr.shape)}
            for tr in self.trials:
                row = {"trial": tr.index, "seed": tr.seed, "status": tr.status,
                       "first_op": tr.first_op, "end_op": tr.end_op, "error_type": tr.error_type,
                       "error": tr.error, "seconds": tr.seconds, "inputs": []}
                for i, x in enumerate(tr.inputs):
                    row["inputs"].append(_put(zf, f"trials/{tr.index}/input{i}.bin", x))
                if tr.output is not None:
                    row["output"] = _put(zf, f"trials/{tr.index}/output.bin", tr.output)
                trials.append(row)
            manifest = dict(self.manifest, schema=KCT_SCHEMA, tensors=index, trials=trials,
                            ops=self.ops)
            zf.writestr("manifest.json", json.dumps(jsonable(manifest), indent=None))
        os.replace(tmp, path)
        self.path = path
        return path

    @classmethod
    def load(cls, path: str) -> "Trace":
        import ml_dtypes  # noqa: F401  (registers bfloat16 and the fp8 dtypes with numpy)
        try:
            zf = zipfile.ZipFile(path)
        except FileNotFoundError:
            raise UsageError(f"no such trace: {path}") from None
        except (zipfile.BadZipFile, IsADirectoryError):
            raise UsageError(f"{path} is not a kcontract trace (not a zip archive)") from None
        with zf:
            try:
                manifest = json.loads(zf.read("manifest.json"))
            except KeyError:
                raise UsageError(f"{path} is not a kcontract trace (no manifest.json)") from None
            if manifest.get("schema") != KCT_SCHEMA:
                raise UsageError(f"{path}: unknown trace schema {manifest.get('schema')!r} "
                                 f"(expected {KCT_SCHEMA})")
            tensors = {d: _get(zf, f"tensors/{d}.bin", e)
                       for d, e in (manifest.pop("tensors", None) or {}).items()}
            trials = []
            for row in manifest.pop("trials", None) or []:
                inputs = [_get(zf, x["file"], x) if isinstance(x, dict) and "file" in x
                          else (x.get("value") if isinstance(x, dict) else x)
                          for x in row.get("inputs") or []]
                out = row.get("output")
                trials.append(Trial(index=int(row["trial"]), seed=int(row.get("seed", 0)),
                                    status=row.get("status", "ok"),
                                    first_op=int(row.get("first_op", 0)),
                                    end_op=int(row.get("end_op", 0)), inputs=inputs,
                                    output=_get(zf, out["file"], out) if out else None,
                                    error_type=row.get("error_type", ""),
                                    error=row.get("error", ""),
                                    seconds=float(row.get("seconds") or 0.0)))
            ops = manifest.pop("ops", None) or []
        return cls(manifest, ops, trials, tensors, path)


def _put(zf, name: str, value: Any) -> dict:
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        zf.writestr(name, arr.tobytes())
        return {"file": name, "dtype": arr.dtype.name, "shape": list(arr.shape)}
    return {"value": jsonable(value)}


def _get(zf, name: str, entry: dict) -> np.ndarray:
    data = zf.read(name)
    return np.frombuffer(data, dtype=np.dtype(entry["dtype"])).reshape(entry["shape"]).copy()
