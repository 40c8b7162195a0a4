"""The argument parser every ``speculate`` command line is read with: an unknown subcommand is named with a
"did you mean", and a usage error or ``--help`` raises :class:`UsageError` (its exit status) instead of
exiting. Below the command tree (:mod:`speculate.cli`) and the subcommands' own parsers, which import it
from here; :mod:`speculate.cli` re-exports both names.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any, NoReturn

from speculate.errors import SpeculateError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose unknown subcommand reads ``unknown subcommand 'chek' (did you mean
    'check'?)``, and which raises :class:`UsageError` instead of exiting (``main`` returns its status)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            names = list(action.choices)
            near = difflib.get_close_matches(str(value), names, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise argparse.ArgumentError(
                None, f"unknown subcommand {value!r}{hint}; choose from " + ", ".join(names)
            )
        super()._check_value(action, value)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        raise UsageError(status)


class UsageError(SpeculateError):
    """argparse finished (help printed, or a usage error named): the exit status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status
