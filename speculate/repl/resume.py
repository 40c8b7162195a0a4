"""The REPL's saved sessions, for ``speculate --continue`` and ``--resume [ID]``: each session of a project is a
JSONL transcript (:class:`speculate.transcript.Transcript`: the conversation's messages as each turn ends)
in the state directory, ``sessions/<project key>/<ID>.jsonl``, plus the REPL's own lines: the permission
mode as it changes, the last accepted change (``/diff last``) and the time saved so far.

Restoring gives back the conversation, the mode and those figures. A speculation is never restored: one
that was not accepted lives only in its overlay, which ends with the process that ran it, and an accepted
one is already in the project. A study session saves nothing here (its records stay in the study's
directory)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overlayfs.state import state_root
from speculate.errors import SpeculateError
from speculate.term import visible
from speculate.transcript import read_transcript
from speculate.types import is_prompt


class NoSession(SpeculateError, ValueError):
    """No saved session to continue, or none with the ID given; the message says which exist."""


def sessions_dir(project: Path) -> Path:
    key = hashlib.sha256(os.fsencode(os.path.realpath(project))).hexdigest()[:16]
    return state_root() / "sessions" / key


def new_path(project: Path) -> Path:
    """Where this run's session is saved: a sortable, unique ID (start time, then a random part)."""
    return sessions_dir(project) / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.jsonl"


@dataclass
class Saved:
    id: str
    path: Path
    messages: list[Any] = field(default_factory=list)
    mode: str | None = None
    last_diff: str = ""
    saved_s: float = 0.0

    @property
    def prompts(self) -> list[str]:
        # the prompt is the message's last text (attachments and ! commands come before it)
        return [
            texts[-1]
            for m in self.messages
            if m.get("role") == "user" and is_prompt(m)
            for texts in [[b.get("text", "") for b in m["content"] if b.get("type") == "text"]]
            if texts
        ]


def load(path: Path) -> Saved:
    s = Saved(path.stem, path)
    try:
        events = read_transcript(path)
    except (OSError, json.JSONDecodeError) as e:
        raise NoSession(f"saved session {path.stem!r} cannot be read: {e}") from None
    for ev in events:
        kind = ev.get("event")
        if kind == "message":
            s.messages.append(ev["message"])
        elif kind == "repl" and "mode" in ev:
            s.mode = ev["mode"]
        elif kind == "repl" and "last_diff" in ev:
            s.last_diff = ev["last_diff"]
        elif kind == "repl" and "saved_s" in ev:
            s.saved_s = float(ev["saved_s"])
    return s


def saved_sessions(project: Path) -> list[Saved]:
    """This project's saved sessions that hold a conversation, newest first."""
    d = sessions_dir(project)
    files = sorted(d.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True) if d.is_dir() else []
    out = []
    for f in files:
        try:
            s = load(f)
        except NoSession:
            continue
        if s.messages:
            out.append(s)
    return out


def find(project: Path, session_id: str | None) -> Saved:
    """The session to restore: ``session_id``'s, or the newest (``--continue``, ``--resume`` without ID)."""
    found = saved_sessions(project)
    if not found:
        raise NoSession(f"no saved session of {project} to continue (a REPL session is saved as it goes)")
    if session_id is None:
        return found[0]
    for s in found:
        if s.id == session_id or s.id.endswith(session_id):
            return s
    raise NoSession(
        f"no saved session {session_id!r} of {project}; saved: " + ", ".join(s.id for s in found[:10])
    )


def listing(project: Path) -> str:
    found = saved_sessions(project)
    if not found:
        return "no saved sessions of this project yet"
    lines = ["saved sessions of this project, newest first (speculate --resume ID):"]
    for s in found[:20]:
        first = s.prompts[0] if s.prompts else ""
        first = first if len(first) <= 60 else first[:59] + "…"
        lines.append(f"  {s.id}  {len(s.prompts)} prompt{'s' * (len(s.prompts) != 1)}  {first}")
    return "\n".join(lines)


def requested(args: argparse.Namespace, project: Path) -> Saved | None:
    """The session ``--continue`` / ``--resume [ID]`` restores (NoSession, a ValueError, names what exists)."""
    if not args.continue_ and args.resume is None:
        return None
    if args.study is not None:
        raise ValueError(
            "--continue and --resume cannot be combined with --study (each study session is new)"
        )
    return find(project, args.resume or None)


def restore(repl: Any, session: Any, saved: Saved, demo: Any, *, keep_mode: bool) -> None:
    """Give the new session the saved conversation, mode and last accepted change; show what it was."""
    from speculate.types import text_of

    session.messages.extend(saved.messages)
    if saved.mode is not None and not keep_mode:
        session.set_mode(saved.mode)
    repl.last_diff = saved.last_diff
    for prompt in saved.prompts:
        if demo is not None:
            demo.submitted(prompt)
    print(visible(f"continuing session {saved.id}: {len(saved.prompts)} prompts; mode {session.cfg.mode}"))
    shown = [m for m in saved.messages if m.get("role") == "assistant" and text_of(m).strip()]
    for prompt in saved.prompts[-3:]:
        print(visible(f"› {prompt}"))
    if shown:
        last = text_of(shown[-1]).strip().splitlines()
        print(visible("  " + "\n  ".join(last[:4]) + (" …" if len(last) > 4 else "")))
