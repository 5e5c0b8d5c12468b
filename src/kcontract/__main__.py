"""``python -m kcontract``: the ``kcontract`` command."""
import sys

from .cli import main

sys.exit(main())
