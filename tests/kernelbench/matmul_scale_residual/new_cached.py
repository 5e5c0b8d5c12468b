"""Hacked: cached output, the first result per input shape returned for every later input."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _hacks  # noqa: E402
from new_honest import ModelNew as Honest  # noqa: E402

EXPECTED = {"kernelbench": False, "kcontract": ["C-CMP-03"]}

ModelNew = _hacks.cached_output(Honest)
