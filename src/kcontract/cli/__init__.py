"""The command line, thin over the API.

Exit codes (a stable interface): 0 success / conformant, 1 a violation, 2 usage or
contract-file error, 3 a bug in the checker, 4 a kernel error (``kcontract check``: the kernel
raised, crashed, hung or returned the wrong shape or dtype on some contract).  Each subcommand lives in its own module
and registers itself on :data:`main`.
"""
from __future__ import annotations

import importlib
import sys

import click

from .. import __version__
from ..errors import CheckerError, ContractError, UsageError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_KERNEL_ERROR = 0, 1, 2, 4


class Group(click.Group):
    """Turns kcontract's own exceptions into messages and exit codes."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ContractError as exc:
            click.echo(f"error: {exc.render()}", err=True)
            sys.exit(EXIT_USAGE)
        except UsageError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        except CheckerError as exc:
            click.echo(f"{exc}", err=True)
            sys.exit(3)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kcontract")
def main():
    """kcontract: numerical contracts for ML kernels.

    Say what a kernel promises, check it in isolation against the normative
    suite, and learn which contract broke and how.
    """


_COMMAND_MODULES = ("suite_cmds", "check_cmd", "verify_cmd", "report_cmds", "kernelbench_cmd",
                    "fingerprint_cmd", "survey_cmd", "trace_cmd")
for _name in _COMMAND_MODULES:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"{__name__}.{_name}":
            raise

__all__ = ["main", "EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_KERNEL_ERROR"]
