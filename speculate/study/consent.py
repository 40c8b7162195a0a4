"""The consent line a study shows at every start, and the explicit yes it needs the first time for a
directory (stored there, with the participant id the report clusters by)."""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from speculate.errors import SpeculateError
from speculate.study.arms import ARM_HELP, Arm

CONSENT_FILE = "consent.json"


class Consent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str  # the participant id: random, unless given with --study-user
    agreed_at: float  # Unix time of the yes
    text: str  # what was agreed to, word for word


class NoConsent(SpeculateError):
    """The person did not say yes: nothing is recorded."""


def consent_text(study_dir: Path, arms: tuple[Arm, ...]) -> str:
    arms_text = "; ".join(f"{a}: {ARM_HELP[a]}" for a in arms)
    return (
        f"Study: each turn is assigned at random to one arm ({arms_text}). "
        f"Recorded per turn, in {study_dir} only: the suggestion shown and the prompt you sent, whether you "
        "took, edited or ignored it, think and typing times, latencies, tokens and cost, and what the "
        "speculation did. Not recorded: the model's answers, file contents, your project's path. Nothing "
        "leaves this machine. /study lists the arms of past turns; delete the directory to withdraw."
    )


def load(study_dir: Path) -> Consent | None:
    """The stored consent, or None; ValueError naming the file when it is not one."""
    path = study_dir / CONSENT_FILE
    if not path.exists():
        return None
    try:
        return Consent.model_validate_json(path.read_bytes())
    except ValidationError as e:
        raise ValueError(
            f"{path}: not a consent record ({e.error_count()} problem(s)); remove it to be asked again"
        ) from None


def obtain(
    study_dir: Path,
    arms: tuple[Arm, ...],
    *,
    user: str | None,
    ask: Callable[[str], str],
    say: Callable[[str], None],
) -> Consent:
    """Show the consent line; the first time for ``study_dir``, ``ask`` for an explicit yes (``y``/``yes``) and
    store it. NoConsent on anything else; ValueError when ``user`` differs from the one stored."""
    text = consent_text(study_dir, arms)
    say(text)
    stored = load(study_dir)
    if stored is not None:
        if user is not None and user != stored.user:
            raise ValueError(f"--study-user {user!r}: {study_dir} belongs to participant {stored.user!r}")
        return stored
    answer = ask("Take part, recording to this directory? Type yes to agree: ").strip().casefold()
    if answer not in ("y", "yes"):
        raise NoConsent
    consent = Consent(user=user or secrets.token_hex(6), agreed_at=time.time(), text=text)
    study_dir.mkdir(parents=True, exist_ok=True)
    tmp = study_dir / f".{CONSENT_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(consent.model_dump(), indent=1) + "\n", encoding="utf-8")
    tmp.replace(study_dir / CONSENT_FILE)  # whole or not at all
    return consent
