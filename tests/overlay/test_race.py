"""No lost edits: while a speculation of 4,000 rewritten files is accepted, a second process edits files of the
real tree at random moments (in place, by replacing them, by deleting them), 50 times. Whatever the timing,
every edit the user made survives (an edit made after the conflict check is caught at the commit point of its
own file), a promotion that is refused names an edited file, and none is half-applied otherwise."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from overlayfs import Overlay
from overlayfs.state import ENV, pending, project_state, remove_tree, wait_disposals
from tests.overlay.crashkit import temps

ROOT = str(Path(__file__).resolve().parents[2])
FILES = 4000
TRIALS = 50
RELS = [f"src/p{i % 40:02}/m{i:04}.py" for i in range(FILES)]

# The user: on "go SEED SECONDS", edit files at random moments for that long, then print what each edit left.
USER = r"""
import json, os, random, sys, time
root = sys.argv[1]
for line in sys.stdin:
    _, seed, span = line.split()
    rng = random.Random(int(seed))
    rels = [f"src/p{i % 40:02}/m{i:04}.py" for i in range(4000)]
    start, log = time.perf_counter(), []
    at = sorted(rng.uniform(0, float(span)) for _ in range(rng.choice([1, 2, 4, 8])))
    for n, t in enumerate(at):
        time.sleep(max(0.0, start + t - time.perf_counter()))
        rel = rng.choice(rels)
        p = f"{root}/{rel}"
        data = f"user edit {seed}.{n}\n".encode()
        how = ("in place", "replace", "delete")[n % 3]
        try:
            if how == "in place":
                with open(p, "r+b") as f:
                    f.truncate(0)
                    f.write(data)
            elif how == "replace":
                with open(p + ".new", "wb") as f:
                    f.write(data)
                os.replace(p + ".new", p)
            else:
                os.unlink(p)
                data = None
        except FileNotFoundError:  # deleted by an earlier edit of this trial
            continue
        log.append([rel, None if data is None else data.decode(), time.perf_counter() - start])
    print(json.dumps(log), flush=True)
"""


def old(i: int) -> bytes:
    return f"def f{i}():\n    return {i}\n".encode() * 4


def new(i: int) -> bytes:
    return f"def f{i}():\n    return {i} + 1\n".encode() * 4


@contextmanager
def scratch(tmp_path: Path) -> Iterator[Path]:
    """In memory when /dev/shm is there (50 promotions of 4,000 files fit CI's time)."""
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="speculate-race-", dir=shm)) if os.access(shm, os.W_OK) else tmp_path
    try:
        yield base
    finally:
        if base != tmp_path:
            remove_tree(base)


def build(base: Path) -> tuple[Path, Path]:
    """The real tree, and a speculation rewriting every file of it (its layers reopened per trial)."""
    lower = base / "template"
    for i, rel in enumerate(RELS):
        p = lower / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(old(i))
    ov = Overlay(lower, base / "layers/upper")
    for i, rel in enumerate(RELS):
        ov.write_bytes(rel, new(i))
    return lower, base / "layers"


@pytest.mark.slow
def test_no_user_edit_is_lost_while_4000_changes_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scratch(tmp_path) as base:
        monkeypatch.setenv(ENV, str(base / "state"))
        template, layers = build(base)
        rng = random.Random(21)
        outcomes: dict[str, int] = {}
        span = None
        with subprocess.Popen(
            [sys.executable, "-c", USER, str(base / "proj")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as user:
            assert user.stdin is not None and user.stdout is not None
            for trial in range(TRIALS):
                lower = base / "proj"
                subprocess.run(["cp", "-a", str(template), str(lower)], check=True)
                (base / "trial").mkdir()  # the upper layer is only read, then set aside: hard links do
                subprocess.run(["cp", "-al", str(layers / "upper"), str(base / "trial/upper")], check=True)
                subprocess.run(["cp", "-a", str(layers / "meta"), str(base / "trial/meta")], check=True)
                ov = Overlay(lower, base / "trial/upper")
                if span is None:  # the first trial, undisturbed, times a promotion
                    t = time.perf_counter()
                    assert ov.promote().ok
                    span = time.perf_counter() - t
                    edits: list[list] = []  # type: ignore[type-arg]
                else:
                    user.stdin.write(f"go {rng.randrange(10**9)} {span * 1.5:.3f}\n")
                    user.stdin.flush()
                    result = ov.promote()
                    edits = json.loads(user.stdout.readline())
                    last = {rel: data for rel, data, _ in edits}
                    for rel, data in last.items():  # every edit of the user's is there, whatever the timing
                        p = lower / rel
                        now = p.read_text() if p.exists() else None
                        assert now == data, (trial, rel, data, now, result.conflicts)
                    edited = set(last)
                    if result.ok:
                        outcome = "accepted"
                        assert all(
                            (lower / rel).read_bytes() == new(i)
                            for i, rel in enumerate(RELS)
                            if rel not in edited
                        )
                    else:  # refused at the check, or caught at the commit point of an edited file
                        late = any(
                            "while the acceptance was being written" in c.reason for c in result.conflicts
                        )
                        outcome = "caught at the commit point" if late else "conflict at the check"
                        assert {c.path for c in result.conflicts} <= edited, (trial, result.conflicts)
                        assert all(
                            (lower / rel).read_bytes() == old(i)
                            for i, rel in enumerate(RELS)
                            if rel not in edited
                        )  # all or nothing: the rest stayed old
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                assert temps(lower) == [] and not pending(project_state(lower))
                ov.discard()
                wait_disposals()
                remove_tree(lower)
                remove_tree(base / "trial")
            user.stdin.close()
        print(f"promotion of {FILES} files: {span:.2f} s; outcomes: {outcomes}")
        assert outcomes.get("accepted", 0) >= 1 and outcomes.get("caught at the commit point", 0) >= 5, (
            outcomes
        )


def test_hard_linked_files_are_not_taken_for_edited_ones(tmp_path: Path, state_dir: Path) -> None:
    """Backing up or replacing one name of a file moves the ctime of all its names: names that were hard
    links when checked are compared without it (and nothing the user did is read into that)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.txt").write_bytes(b"shared\n")
    os.link(root / "a.txt", root / "b.txt")
    os.link(root / "a.txt", root / "c.txt")
    ov = Overlay(root)
    ov.write_bytes("a.txt", b"A\n")
    ov.write_bytes("b.txt", b"B\n")
    ov.unlink("c.txt")
    assert ov.promote().ok
    assert (root / "a.txt").read_bytes() == b"A\n" and (root / "b.txt").read_bytes() == b"B\n"
    assert not (root / "c.txt").exists() and temps(root) == []
