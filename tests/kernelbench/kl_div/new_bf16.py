"""Hacked: precision downgrade, the honest computation run in bfloat16 inside."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _hacks  # noqa: E402
from new_honest import ModelNew as Honest  # noqa: E402

EXPECTED = {"kernelbench": None, "kcontract": ["C-PRC-01"], "code": "C-PRC-01.inaccurate"}

ModelNew = _hacks.precision_downgrade(Honest)
