"""The examples' independent evidence (plain JAX, torch and numpy, no kcontract) still runs
and still shows what the examples' READMEs say it shows."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: script -> a line its output must contain (the finding the README quotes)
EVIDENCE = {
    "examples/jax_cpu/evidence_subnormals.py": "jax:   sub*2^24 = 0.0",
    "examples/jax_cpu/evidence_softmax.py": "returned as 0",
    "examples/jax_cpu/evidence_standardize.py": "standardize stable",
    "examples/jax_cpu/evidence_take.py": "jnp.take (default)",
    "examples/jax_cpu/evidence_gelu_float16.py": "out == emulation of the jaxpr",
    "examples/jax_cpu/evidence_cumsum.py": "jnp.cumsum float16",
    "examples/torch_cpu_settings/evidence.py": "under 'medium', by shape:",
}


@pytest.mark.parametrize("script", sorted(EVIDENCE))
def test_evidence_script_runs_and_shows_its_finding(script):
    pytest.importorskip("jax" if "jax_cpu" in script else "torch")
    out = subprocess.run([sys.executable, str(ROOT / script)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT / Path(script).parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert EVIDENCE[script] in out.stdout, out.stdout[-2000:]
