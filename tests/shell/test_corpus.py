"""The labelled corpus: no risky command may be classified safe; read-only ones must be read-only."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from speculate.shell import classify

CORPUS_FILE = Path(__file__).with_name("corpus.yaml")
LABELS = ("read_only", "sandboxable", "risky")
ROOT_MARK = "{root}"


def load_corpus() -> list[tuple[str, str]]:
    """(label, command) pairs; names the file and section on a malformed entry."""
    data = yaml.safe_load(CORPUS_FILE.read_text())
    if set(data) != set(LABELS):
        raise ValueError(f"{CORPUS_FILE}: expected sections {LABELS}, got {sorted(data)}")
    pairs = []
    for label in LABELS:
        for entry in data[label]:
            if not isinstance(entry, str):
                raise ValueError(f"{CORPUS_FILE}: {label} entry {entry!r} is not a string")
            pairs.append((label, entry))
    return pairs


def build_project(root: Path) -> Path:
    """The tree the corpus refers to: scripts to inspect, an escaping symlink, a venv activate script."""
    (root / "src").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / ".venv" / "bin").mkdir(parents=True)
    files = {
        "run_tests.sh": '#!/bin/sh\nset -e\npytest -q "$@"\n',
        "reader.sh": "ls -la\ncat README.md | head\n",
        "evil.sh": "#!/bin/bash\nrm -rf ~/x\n",
        "tool.py": "#!/usr/bin/env python3\nprint('hi')\n",
        "bin/thing": "\x7fELF not really\n",
        ".venv/bin/activate": 'export PATH="$VIRTUAL_ENV/bin:$PATH"\n',
        ".venv/bin/pytest": "#!/usr/bin/env python3\n",
        "src/app.py": "print(1)\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
        (root / name).chmod(0o755)
    os.symlink("/etc", root / "escape")
    return root


CASES = load_corpus()


@pytest.fixture(scope="module")
def project() -> Iterator[Path]:
    # Not under /tmp: writes to /tmp are allowed, so `../x` from a project there would stay inside.
    base = Path(tempfile.mkdtemp(prefix="speculate-shell-", dir="/var/tmp"))
    try:
        yield build_project(base / "proj")
    finally:
        shutil.rmtree(base)


def test_corpus_is_large_and_covers_every_label() -> None:
    counts = Counter(label for label, _ in CASES)
    assert len(CASES) >= 200, f"{CORPUS_FILE} has only {len(CASES)} commands"
    assert all(counts[label] >= 50 for label in LABELS), counts
    duplicates = [cmd for cmd, n in Counter(cmd for _, cmd in CASES).items() if n > 1]
    assert not duplicates, f"duplicate corpus entries: {duplicates}"


@pytest.mark.parametrize(("label", "command"), CASES, ids=[f"{lb}:{cmd[:60]}" for lb, cmd in CASES])
def test_corpus_entry(label: str, command: str, project: Path) -> None:
    got = classify(command.replace(ROOT_MARK, str(project)), project_root=str(project))
    assert got.read_only <= got.sandboxable  # read_only implies sandboxable
    assert got.reason
    if label == "risky":
        assert not got.sandboxable, f"risky command classified safe: {command!r} -> {got.reason}"
    elif label == "read_only":
        assert got.read_only, f"read-only command not read-only: {command!r} -> {got.reason}"
    else:
        assert got.sandboxable and not got.read_only, f"{command!r} -> {got.reason}"


def test_zero_risky_classified_safe(project: Path) -> None:
    """The headline figure as one assertion over the whole corpus."""
    leaks = [
        cmd
        for label, cmd in CASES
        if label == "risky"
        and classify(cmd.replace(ROOT_MARK, str(project)), project_root=str(project)).sandboxable
    ]
    assert leaks == []


def test_without_the_sandbox_nothing_that_runs_code_is_sandboxable(project: Path) -> None:
    """Interpreters, build tools and project scripts are sandboxable only because the full sandbox
    contains them; judged without it, every one of them is risky, and plain file writes stay as they were."""
    runs_code = []
    for label, cmd in CASES:
        if label != "sandboxable":
            continue
        cmd = cmd.replace(ROOT_MARK, str(project))
        full = classify(cmd, project_root=str(project))
        bare = classify(cmd, project_root=str(project), full_sandbox=False)
        if bare != full:  # only code that nothing would contain changes verdict
            runs_code.append(cmd)
            assert not bare.sandboxable and "no sandbox contains it" in bare.reason, (cmd, bare.reason)
    assert len(runs_code) >= 20  # the corpus really exercises interpreters and build tools
    for cmd in ("python3 -c 'import os'", "pytest -q", "make test", "node x.js", "perl -e 1"):
        assert not classify(cmd, project_root=str(project), full_sandbox=False).sandboxable, cmd
