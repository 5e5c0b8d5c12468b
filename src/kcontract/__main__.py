"""``python -m kcontract``: the ``kcontract`` command (:mod:`kcontract.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
