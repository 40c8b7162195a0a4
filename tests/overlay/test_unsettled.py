"""Promotions that can be neither finished nor undone at once never wedge a project: a project filesystem
turned read-only at every step of a promotion, the project removed at every step, a journal that cannot be
written. Each failure is one clear message naming the user's file (never our temp name) and what to do;
recovery of that project reports one line instead of raising, so other projects and ``speculate bench``
(``recover_all``) carry on; ``speculate recover`` settles it once the cause is gone, and ``speculate recover
--abandon`` keeps the tree as it is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from overlayfs import (
    Overlay,
    PromoteError,
    Unsettled,
    abandon_project,
    recover_all,
    recover_project,
)
from overlayfs.journal import read
from overlayfs.state import ENV, pending, project_state, remove_tree
from tests.overlay.conftest import make_tree
from tests.overlay.crashkit import crash_at, diff, interrupt_promotion, snapshot, temps
from tests.overlay.fskit import remount, tmpfs

ROOT = str(Path(__file__).resolve().parents[2])
LOWER = {"a.txt": b"A\n", "gone.txt": b"gone\n", "d/x.txt": b"x\n", "keep.txt": b"keep\n"}


def speculate(root: Path) -> Overlay:
    """Every kind of change: a rewrite, a new directory with a file, a deletion, a link, a file over a dir."""
    shutil.rmtree(root, ignore_errors=True)
    make_tree(root, LOWER)
    ov = Overlay(root)
    ov.write_bytes("a.txt", b"A2\n")
    ov.mkdir("n")
    ov.write_bytes("n/b.txt", b"b\n")
    ov.unlink("gone.txt")
    ov.symlink("keep.txt", "ln")
    ov.rmtree("d")
    ov.write_bytes("d", b"a file now\n")
    return ov


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "speculate.cli", "recover", *args],
        cwd=ROOT,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
    )


def old_and_new(base: Path) -> tuple[dict[str, str], dict[str, str]]:
    ov = speculate(base / "calibrate")
    old = snapshot(base / "calibrate")
    assert ov.promote().ok
    return old, snapshot(base / "calibrate")


def without_temps(tree: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in tree.items() if not k.endswith(".ovl-tmp")}


@pytest.mark.slow
@pytest.mark.privileged
def test_a_project_turning_read_only_at_any_step_never_wedges(tmp_path: Path, state_dir: Path) -> None:
    old, new = old_and_new(tmp_path)
    other = tmp_path / "other"  # a second project with an interrupted acceptance: recover_all must settle it
    seen: dict[str, int] = {}
    fired: list[bool] = []  # whether the remount at call k worked
    with tmpfs(tmp_path / "mnt", "size=8m") as mnt:
        root = mnt / "proj"
        for k in range(200):
            assert remount(mnt, "rw")
            ov = speculate(root)
            fired.clear()
            try:
                with crash_at(k, then=lambda: fired.append(remount(mnt, "ro"))) as calls:
                    result = ov.promote()
                outcome = "ok"
                assert result.ok and without_temps(snapshot(root)) == new
            except PromoteError as e:
                outcome = "rolled back"
                assert snapshot(root) == old and temps(root) == [], (k, e)
                assert e.filename.startswith(f"{root}/") and ".ovl-tmp" not in str(e), e
            except Unsettled as e:
                outcome = "unsettled"
                assert pending(project_state(root)), k
                assert f"speculate recover {root}" in str(e) and f"--abandon {root}" in str(e), e
            if not fired:
                assert outcome == "ok" and calls[0] <= k
                break
            if not fired[0]:
                continue  # EBUSY (a file open for writing at that moment): nothing was remounted
            seen[outcome] = seen.get(outcome, 0) + 1
            # While read-only: one line for this project; every other project is recovered as usual.
            rec = recover_project(root)
            assert rec is None or (not rec.ok and rec.line().startswith("not recovered: ")), rec
            again = Overlay(root).recovery  # opening an overlay reports it too, and does not raise
            assert (again is None) == (rec is None) and (again is None or not again.ok), again
            if outcome == "unsettled" and not seen.get("cli"):  # the command, once
                out = cli(str(root))
                assert out.returncode == 1 and "Traceback" not in out.stderr
                assert out.stderr.count("\n") == 1 and "speculate recover" in out.stderr, out.stderr
                again = Overlay(root)
                again.write_bytes("keep.txt", b"other\n")
                with pytest.raises(Unsettled, match=str(root)):  # accepting anything meanwhile is refused
                    again.promote()
                again.discard()
                seen["cli"] = 1
            if k % 5 == 0:  # another project's interrupted acceptance is recovered all the same
                if not other.exists():
                    make_tree(other, {"f.txt": b"f\n"})
                interrupt_promotion(other, "f.txt", b"F\n", "commit")
            recs = {r.project: r for r in recover_all()}
            assert (rec is None) == (root not in recs) and (rec is None or not recs[root].ok)
            if k % 5 == 0:
                assert recs[other].ok and recs[other].action == "rolled forward"
                assert not pending(project_state(other)) and (other / "f.txt").read_bytes() == b"F\n"
                (other / "f.txt").write_bytes(b"f\n")
            # Writable again: `speculate recover` settles it (or, every other time, --abandon keeps it); the
            # command itself every fourth time, else the function it calls.
            assert remount(mnt, "rw")
            if k % 2 == 0 or rec is None:
                if k % 4 == 0:
                    out = cli(str(root))
                    assert out.returncode == 0, (k, outcome, out.stderr)
                else:
                    after = recover_project(root)
                    assert after is None or after.ok, after
                assert snapshot(root) in (old, new), (k, diff(snapshot(root), old), diff(snapshot(root), new))
            else:
                state = read(project_state(root).journal)["state"]  # type: ignore[index]
                kept = without_temps(snapshot(root))
                if k % 4 == 1:
                    out = cli("--abandon", str(root))
                    assert out.returncode == 0 and "kept as it is" in out.stdout, out
                    line = out.stdout
                else:
                    line = abandon_project(root).line()
                    assert "kept as it is" in line
                # Nothing had landed before the commit point: that much is rolled back (new empty dirs).
                assert without_temps(snapshot(root)) == (old if state == "prepare" else kept), (
                    state,
                    diff(snapshot(root), kept),
                )
                for t in temps(root):  # only old versions are kept (backups, removed entries), and listed
                    m = re.search(r"\.([0-9a-f]{12})\.[br]\d+\.ovl-tmp$", t)
                    assert m is not None and "Kept " in line, (t, line)
                    listed = (state_dir / "abandoned" / f"{m.group(1)}.txt").read_text()
                    assert f"kept {os.path.relpath(t, root)} (" in listed, (t, listed)
                    if os.path.isdir(t) and not os.path.islink(t):  # as the user would, once not needed
                        remove_tree(Path(t))
                    elif os.path.lexists(t):
                        os.unlink(t)
            assert temps(root) == [] and not pending(project_state(root)), k
            ov.discard()
    assert seen.get("rolled back", 0) >= 3 and seen.get("unsettled", 0) >= 3, seen


@pytest.mark.privileged
def test_the_project_removed_at_any_step_of_a_promotion(tmp_path: Path, state_dir: Path) -> None:
    root = tmp_path / "proj"
    outcomes = set()
    fired: list[bool] = []
    for k in range(200):
        ov = speculate(root)
        fired.clear()
        try:
            with crash_at(k, then=lambda: fired.append(shutil.rmtree(root) is None)):
                ov.promote()
            outcomes.add("ok")
        except PromoteError as e:
            outcomes.add(e.phase)
            assert e.filename.startswith(str(root)) and ".ovl-tmp" not in str(e), e
        if not fired:
            break
        assert not root.exists()
        assert recover_all() == [] or all(r.ok for r in recover_all())  # never raises, nothing to report
        with pytest.raises(FileNotFoundError, match=str(root)):
            recover_project(root)
        if k == 10:
            assert cli(str(root)).returncode == 2  # no such project: exit 2, as for any missing PROJECT
        root.mkdir()  # a fresh project at the same path: whatever is left pending is discarded
        rec = recover_project(root)
        assert rec is None or rec.ok, rec
        assert not pending(project_state(root)) and list(root.iterdir()) == []
        ov.discard()
        shutil.rmtree(root)
    assert {"prepare", "commit"} <= outcomes, outcomes


@contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """Make one file read-only as a read-only filesystem would (a read-only bind mount of a copy over it)."""
    side = path.with_name(path.name + ".ro")
    shutil.copyfile(path, side)
    subprocess.run(["mount", "--bind", str(side), str(path)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)
        side.unlink()


@pytest.mark.privileged
def test_a_journal_that_cannot_be_written_at_any_step(tmp_path: Path, state_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    old, new = old_and_new(tmp_path)
    root = tmp_path / "proj"
    journal = project_state(root).journal
    outcomes = set()
    with ExitStack() as frozen:  # unmounted whatever happens
        fired: list[bool] = []

        def freeze() -> None:
            frozen.enter_context(read_only_file(journal))
            fired.append(True)

        for k in range(200):
            ov = speculate(root)
            if not journal.exists():
                journal.touch()
            fired.clear()
            try:
                with crash_at(k, then=freeze):
                    result = ov.promote()
                outcome = "pending" if pending(project_state(root)) else "ok"
                assert result.ok and snapshot(root) == new
                assert bool(result.notes) == (outcome == "pending"), result.notes
            except PromoteError as e:
                outcome = "rolled back"
                assert snapshot(root) == old and temps(root) == []
                assert e.filename == str(journal) and "journal could not be written" in str(e), e
            if not fired:
                break
            outcomes.add(outcome)
            rec = recover_project(root)  # the journal still cannot be cleared: one line, no exception
            assert rec is None or (not rec.ok and str(journal) in rec.line()), rec
            frozen.close()  # writable again
            rec = recover_project(root)
            assert rec is None or rec.ok, rec
            assert snapshot(root) in (old, new) and temps(root) == [] and not pending(project_state(root))
            ov.discard()
    assert {"rolled back", "pending"} <= outcomes, outcomes


@pytest.mark.privileged
def test_a_read_only_state_dir_is_one_line_for_its_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tmpfs(tmp_path / "state", "size=8m") as state:
        monkeypatch.setenv(ENV, str(state))
        root = tmp_path / "proj"
        make_tree(root, {"f.txt": b"f\n"})
        interrupt_promotion(root, "f.txt", b"F\n", "prepare")
        before = snapshot(root)
        assert remount(state, "ro")
        rec = recover_project(root)
        assert rec is not None and not rec.ok and "Read-only file system" in rec.line(), rec
        assert [r.ok for r in recover_all()] == [False]
        out = cli(str(root))
        assert out.returncode == 1 and "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out
        assert snapshot(root) == before
        assert remount(state, "rw")
        rec = recover_project(root)
        assert rec is not None and rec.ok and rec.action == "rolled back"
        assert (root / "f.txt").read_bytes() == b"f\n" and temps(root) == []
