"""The argument parser every ``speculate`` command line is read with: an unknown subcommand is named with a
"did you mean", and a usage error or ``--help`` raises :class:`UsageError` (its exit status) instead of
exiting. Below the command tree (:mod:`speculate.cli`) and the subcommands' own parsers, which import it
from here; :mod:`speculate.cli` re-exports both names.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
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

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse's, but an unknown option is named by the subcommand it was given to, with its usage
        and the nearest option it has (``speculate repl --mdoe``: "did you mean '--mode'?")."""
        words = list(sys.argv[1:] if args is None else args)
        ns, extras = self.parse_known_args(words, namespace)
        if extras:
            parser = self._named(words)
            options = [o for a in parser._actions for o in a.option_strings]
            hints = []
            for x in extras:
                near = (
                    difflib.get_close_matches(x.split("=", 1)[0], options, n=1) if x.startswith("-") else []
                )
                if near:
                    hints.append(f"{x!r}: did you mean {near[0]!r}?")
            parser.error(
                f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")
            )
        return ns

    def _named(self, words: Sequence[str]) -> argparse.ArgumentParser:
        """The deepest subcommand's parser that ``words`` name (this one when they name none)."""
        parser: argparse.ArgumentParser = self
        for w in words:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            if sub is None:
                break
            if w in sub.choices:
                parser = sub.choices[w]
        return parser

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        raise UsageError(status)


class UsageError(SpeculateError):
    """argparse finished (help printed, or a usage error named): the exit status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status
