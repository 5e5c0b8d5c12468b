"""``python -m kcontract``: the command line (:mod:`kcontract.cli`)."""
from .cli import main

if __name__ == "__main__":
    main()
