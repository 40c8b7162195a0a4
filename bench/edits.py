"""Harm: the simulated user edits a file while thinking, which a running speculation may conflict with.

With probability ``USER_EDIT_PROB`` before a turn (an assumption, not a measurement: we know of no
published rate of users editing files between agent turns; sweep it with ``--user-edit-prob``), halfway
through the think time the user appends a comment line to one file the coming turn's scripted steps write
(Edit/Write targets), or to ``NOTES.md`` when they write none. All arms of a group draw the same edits,
so the plain and suggest arms pay for the edit too; only the speculative arm can lose its fork to it.
"""

from __future__ import annotations

from pathlib import Path

from speculate.sim.latency import rng_for
from speculate.sim.scenario import Step

USER_EDIT_PROB = 0.1
_COMMENT = {
    ".py": "# ",
    ".sh": "# ",
    ".toml": "# ",
    ".yaml": "# ",
    ".yml": "# ",
    ".js": "// ",
    ".mjs": "// ",
    ".ts": "// ",
    ".md": "",
    ".txt": "",
}


def written_paths(steps: tuple[Step, ...], root: Path) -> list[Path]:
    """Project files the steps edit or write, in order, that exist and take a comment line."""
    out: list[Path] = []
    for st in steps:
        for call in st.tools:
            fp = call.input.get("file_path") if call.name in ("Edit", "Write") else None
            if not isinstance(fp, str):
                continue
            p = Path(fp.replace("{root}", str(root)))
            if p.suffix in _COMMENT and p.is_file() and p not in out:
                out.append(p)
    return out


def maybe_edit(
    root: Path, steps: tuple[Step, ...], *, prob: float, seed: int, scenario: str, rep: int, turn: int
) -> str | None:
    """Make the user's edit before ``turn`` if the draw says so; returns the edited path (relative)."""
    rng = rng_for(seed, scenario, rep, turn, "user-edit")
    if prob <= 0 or rng.random() >= prob:
        return None
    targets = written_paths(steps, root)
    target = targets[rng.randrange(len(targets))] if targets else root / "NOTES.md"
    prefix = _COMMENT.get(target.suffix, "")
    with target.open("a", encoding="utf-8") as f:
        f.write(f"{prefix}note from the user before turn {turn + 1}\n")
    return str(target.relative_to(root))
