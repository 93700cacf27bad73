"""`capplan` entry point: argparse front end over the planner's Python API.

Exit status (README.md, docs/plan.md): 0 an answer; 3 no plan (an INFEASIBLE or NO_SOLUTION plan,
whose report is printed all the same, or `--emit`/`report` of one: `Infeasible`); 2 bad input,
one line on stderr naming the field and the reason, no traceback; 1 an internal error (any other
exception: its traceback on stderr).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from planner.commands import COMMAND_MODULES
from planner.commands.common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_NO_PLAN
from planner.errors import CapplanError, Infeasible, InvalidInput


class _Parser(argparse.ArgumentParser):
    """One line on stderr and exit 2 for usage errors too (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        # argparse echoes the offending arguments, which may hold newlines
        self.exit(2, _one_line(f"{self.prog}: error: {message}") + "\n")


def _one_line(message: str) -> str:
    """Errors are one line whatever their text holds (a file's content, a library's message)."""
    return " ".join(message.split())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="capplan",
        description="Capacity planning for self-hosted LLM serving (vLLM).",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"planner.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.handler(args)
    except InvalidInput as exc:
        print(_one_line(f"capplan: error: {exc.field}: {exc.reason}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except Infeasible as exc:
        print(_one_line(f"capplan: error: {exc}"), file=sys.stderr)
        return EXIT_NO_PLAN
    except CapplanError as exc:
        print(_one_line(f"capplan: error: {exc}"), file=sys.stderr)
        return EXIT_INTERNAL
    except BrokenPipeError:
        return 0
    return int(rc or 0)


def run() -> NoReturn:
    """The `capplan` program (its console script, `python -m planner.cli`): `main`, then exit.
    Before the interpreter tears itself down, every object the command made is frozen out of
    the garbage collector (`gc.freeze`): its last collections over them cost about 0.08 s of CPU,
    a tenth of a small plan, and find nothing to do that exit does not do anyway (the command's
    files are written and closed; stdout and atexit handlers still run). Not in `main`, which
    tests and programs call in their own long-lived processes."""
    rc = main()
    gc.freeze()
    sys.exit(rc)


if __name__ == "__main__":
    run()
