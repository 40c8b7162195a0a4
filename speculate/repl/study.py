"""The REPL's side of a study (``speculate repl --study DIR``): the consent before anything starts, and a
front end wrapped so that the recorder (:mod:`speculate.study.recorder`) sees the ghost text shown (and hides
it in the ``plain`` arm), every change of the input line, and each line sent.

What could tell the arm before the person decides is kept equal across arms: the toolbar says ``study`` instead
of the speculation's state, Ctrl-C at the prompt clears the line in every arm (it would stop only a running
fork), and ``/diff`` shows only the last accepted change, not the running speculation's.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from speculate.backends import is_simulator
from speculate.study.recorder import Source, StudyRecorder

T = TypeVar("T")
P = ParamSpec("P")
ACCEPT_COMMANDS = ("/accept",)  # sends the ghost text as it is (line mode's Tab line reads as /accept too)


def add_options(p: argparse.ArgumentParser) -> None:
    from speculate.study.arms import ARM_HELP, DEFAULT_ARMS

    g = p.add_argument_group("study (docs/study.md)")
    g.add_argument(
        "--study",
        type=Path,
        default=None,
        metavar="DIR",
        help="an in-situ randomized study: each turn's arm is drawn at random and every turn is "
        "recorded in DIR (only there); asks for consent the first time",
    )
    g.add_argument(
        "--study-seed",
        type=int,
        default=None,
        metavar="N",
        help="the seed of the arm assignment (default: a fresh random one, recorded)",
    )
    g.add_argument(
        "--study-arms",
        default=",".join(DEFAULT_ARMS),
        metavar="A,B[,C]",
        help="the arms to draw from, with equal probability: "
        + "; ".join(f"{a}: {h}" for a, h in ARM_HELP.items())
        + f" (default {','.join(DEFAULT_ARMS)})",
    )
    g.add_argument(
        "--study-reveal",
        action="store_true",
        help="at the exit, list each recorded turn's arm (otherwise only /study shows them, on request)",
    )
    g.add_argument(
        "--study-user",
        default=None,
        metavar="ID",
        help="the participant id stored with the consent (default: a random one); the report clusters by it",
    )


def prepare(args: argparse.Namespace) -> bool:
    """Before anything starts: check the study options, show the consent line and, the first time for the
    directory, get an explicit yes. Sets ``args.study_consent`` and ``args.study_arms_parsed``; False (after
    saying why) when the run must not go on. ValueError names a bad option."""
    from speculate.study.arms import parse_arms
    from speculate.study.consent import NoConsent, obtain

    if args.study is None:
        for opt in ("study_seed", "study_user", "study_reveal"):
            if getattr(args, opt) not in (None, False):
                raise ValueError(f"--{opt.replace('_', '-')} needs --study DIR")
        return True
    if args.no_spec:
        raise ValueError("--study draws each turn's arm itself; --no-spec cannot be combined with it")
    args.study = args.study.expanduser().resolve()
    if args.study.exists() and not args.study.is_dir():
        raise ValueError(f"--study {str(args.study)!r} is a file, not a directory")
    args.study_arms_parsed = parse_arms(args.study_arms)
    if args.study_seed is None:
        args.study_seed = secrets.randbits(32)

    def ask(question: str) -> str:
        print(question, end="", flush=True)
        return sys.stdin.readline()

    try:
        args.study_consent = obtain(
            args.study,
            args.study_arms_parsed,
            user=args.study_user,
            ask=ask,
            say=lambda text: print(text, flush=True),
        )
    except NoConsent:
        print(
            "no consent given: nothing was recorded, and the REPL does not start in study mode",
            file=sys.stderr,
        )
        return False
    return True


def recorder(args: argparse.Namespace, *, plain: bool) -> StudyRecorder:
    return StudyRecorder(
        study_dir=args.study,
        user=args.study_consent.user,
        seed=args.study_seed,
        arms=args.study_arms_parsed,
        model=args.model,
        frontend="plain" if plain else "prompt",
        time_scale=args.time_scale if is_simulator(args.model) else 1.0,
    )


def timed(rec: StudyRecorder, fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """``fn`` (the REPL's permission or approval question), with the time the person took told to ``rec``."""

    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        t0 = time.monotonic()
        try:
            return await fn(*args, **kwargs)
        finally:
            rec.asked(time.monotonic() - t0)

    return wrapper


class StudyFrontend:
    """A front end that reports to ``rec``: what :class:`speculate.repl.controller.Frontend` asks for, passed on,
    and everything else (the turn's key watcher, type-ahead) forwarded as it is."""

    def __init__(self, fe: Any, rec: StudyRecorder, *, model_suggestion: Any) -> None:
        self.fe = fe
        self.rec = rec
        self.color = fe.color
        self._model_suggestion = model_suggestion  # () -> the engine's current suggestion, or None
        self._prev = ""
        session = getattr(fe, "session", None)  # prompt_toolkit's PromptSession (not in line mode)
        if session is not None:
            session.default_buffer.on_text_changed += self._changed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fe, name)

    def push(self, prediction: str | None) -> None:
        source: Source = (
            "model" if prediction is not None and prediction == self._model_suggestion() else "script"
        )
        self.fe.push(self.rec.offer(prediction, source))

    def invalidate(self) -> None:
        self.fe.invalidate()

    def abort(self) -> None:
        self.fe.abort()

    async def ask(self, question: str, choices: Sequence[str]) -> str:
        return str(await self.fe.ask(question, choices))

    async def read(self) -> str:
        self.rec.reading()
        if getattr(self.fe, "typeahead", ""):
            self.rec.typed_ahead()
        self._prev = ""
        line = str(await self.fe.read())
        word = line.strip().split(" ", 1)[0]
        if word in ACCEPT_COMMANDS:
            self.rec.accept_command()
        elif word.startswith(("/", "!", "#")):  # a command, a shell command or a memory line: not a prompt
            self.rec.command()
        return line

    def _changed(self, buf: Any) -> None:
        """In the prompt's thread: a change of the input line. Taking the ghost text (Tab, Right, End) inserts
        all of its rest at once; typing its last character does not count as taking it."""
        text, prev = buf.text, self._prev
        self._prev = text
        if text == prev:
            return
        prediction = self.fe.prediction()
        took = (
            prediction is not None
            and text == prediction
            and prediction.startswith(prev)
            and len(text) - len(prev) > 1
        )
        self.rec.key(took_ghost=took)
