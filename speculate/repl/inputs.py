"""Claude Code's input conventions, as plain functions the front end and the controller share: large pastes
kept as ``[Pasted text #1 +300 lines]`` placeholders until the line is sent, ``@path`` mentions attached as
Claude Code attaches them (a Read call and its result, as two reminders before the prompt), the bash
mode's messages (``!cmd``), and where a ``#`` memory line goes.

The formats are Claude Code 2.1.332's, read off the requests it sends to the embedded simulator
(``tests/repl/test_inputs.py`` names the probe)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

# Claude Code collapses a paste longer than this (characters) or of more lines than PASTE_LINES.
PASTE_CHARS = 800
PASTE_LINES = 2
_PLACEHOLDER = re.compile(r"\[Pasted text #(\d+)(?: \+\d+ lines)?\]")
# An @mention: at the start or after a space, up to the next space (Claude Code's form; quotes allowed).
_MENTION = re.compile(r'(?:^|(?<=\s))@("([^"]+)"|[^\s"]+)')
MAX_ATTACH_BYTES = 256 * 1024  # larger files are named, not attached (the model can Read them)


@dataclass
class Pastes:
    """The pastes of one prompt line: each collapsed one by its number, expanded when the line is sent."""

    texts: dict[int, str] = field(default_factory=dict)
    count: int = 0

    def add(self, text: str) -> str:
        """What to insert for a paste of ``text``: the text itself when small, else a placeholder."""
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        extra = text.count("\n")
        if len(text) <= PASTE_CHARS and extra <= PASTE_LINES:
            return text
        self.count += 1
        self.texts[self.count] = text
        return f"[Pasted text #{self.count} +{extra} lines]" if extra else f"[Pasted text #{self.count}]"

    def expand(self, line: str) -> str:
        """``line`` with each placeholder of a paste of this line replaced by the paste; others stay."""
        if not self.texts:
            return line
        out = _PLACEHOLDER.sub(lambda m: self.texts.get(int(m.group(1)), m.group(0)), line)
        self.texts.clear()  # numbers keep counting up through the session, as Claude Code's do
        return out


def mentions(prompt: str) -> list[str]:
    """The ``@path`` mentions of a prompt, in order, each once (trailing punctuation left out)."""
    seen: list[str] = []
    for m in _MENTION.finditer(prompt):
        path = m.group(2) or m.group(1).rstrip(".,;:!?)")
        if path and path not in seen:
            seen.append(path)
    return seen


def numbered(text: str) -> str:
    """A file as Claude Code's attachment shows it: ``N<tab>line`` per line, the last (empty) one too."""
    return "\n".join(f"{i}\t{line}" for i, line in enumerate(text.split("\n"), start=1))


def attachment_blocks(path: Path, text: str) -> list[str]:
    """The two reminders Claude Code puts before a prompt that mentions ``path`` (absolute)."""
    called = json.dumps({"file_path": str(path)}, separators=(",", ":"), ensure_ascii=False)
    return [
        f"<system-reminder>\nCalled the Read tool with the following input: {called}\n</system-reminder>",
        f"<system-reminder>\nResult of calling the Read tool:\n{numbered(text)}\n</system-reminder>",
    ]


def resolve_mention(project: Path, mention: str) -> Path:
    p = Path(mention).expanduser()
    return p if p.is_absolute() else project / p


def bash_messages(command: str, stdout: str, stderr: str) -> list[str]:
    """The bash mode's (``!cmd``) two user messages, as Claude Code records them."""
    return [
        f"<bash-input>{command}</bash-input>",
        f"<bash-stdout>{stdout}</bash-stdout><bash-stderr>{stderr}</bash-stderr>",
    ]


# Where a ``#`` line goes (Claude Code before 2.1 asked the same three ways; 2.1.332 has no ``#`` shortcut).
MEMORY_FILES = {
    "project": "CLAUDE.md",  # checked in, shared with the team
    "local": "CLAUDE.local.md",  # this checkout only
    "user": "~/.claude/CLAUDE.md",  # every project of this user
}


def memory_path(project: Path, where: str) -> Path:
    rel = MEMORY_FILES[where]
    return Path(rel).expanduser() if rel.startswith("~") else project / rel


def add_memory(path: Path, text: str) -> None:
    """Append ``- text`` to the instructions file ``path`` (made, with its directory, when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    sep = "" if not old or old.endswith("\n") else "\n"
    with path.open("a", encoding="utf-8") as f:
        f.write(f"{sep}- {text.strip()}\n")


ANSWER_WORDS = frozenset({"y", "n", "yes", "no", "always", "a"})


def stray_answer(line: str) -> bool:
    """A bare answer word: typed for a question that was already answered, it is not a prompt."""
    return line.strip().lower() in ANSWER_WORDS
