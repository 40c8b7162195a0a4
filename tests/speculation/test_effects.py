"""What a fork's changes mean in words: which upper-layer entries one command touched (its changes, not
the fork's earlier ones), and a change list as files written, deleted and renamed."""

from __future__ import annotations

import os
from pathlib import Path

from overlayfs import Overlay
from overlayfs.changes import Change
from speculate.speculation.effects import attribute, renames, snapshot, summarize, touched


def project(tmp: Path) -> Path:
    root = tmp / "proj"
    (root / "build" / "lib").mkdir(parents=True)
    (root / "build" / "lib" / "m.py").write_text("x = 1\n")
    (root / "build" / "out.o").write_text("object\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / "old.txt").write_text("the same text\n")
    (root / "empty.txt").write_text("")
    return root


def test_a_command_is_charged_with_what_it_touched_only(tmp_path: Path) -> None:
    root = project(tmp_path)
    with Overlay(lower=root) as ov:
        ov.write_text("src/a.py", "a = 2\n")  # the fork's earlier edit
        before = snapshot(ov.upper)
        ov.rmtree("build")  # "the command": the same upper-layer operations a sandboxed rm makes
        ov.write_text("src/b.py", "b = 1\n")
        paths, replaced = touched(before, snapshot(ov.upper))
        mine = attribute(ov.changes(), paths, replaced)
        assert {c.path for c in mine} == {"build", "build/lib", "build/lib/m.py", "build/out.o", "src/b.py"}
        assert summarize(mine).words() == "deleted build/; wrote src/b.py"
        # Rewriting a file the fork had already changed is the command's too (same path, new content).
        before = snapshot(ov.upper)
        with open(ov.upper / "src" / "a.py", "a") as f:
            f.write("a = 3\n")
        os.utime(ov.upper / "src" / "a.py", ns=(1, 1))
        paths, replaced = touched(before, snapshot(ov.upper))
        assert [c.path for c in attribute(ov.changes(), paths, replaced)] == ["src/a.py"]
        assert touched(snapshot(ov.upper), snapshot(ov.upper)) == (set(), set())


def test_whiteouts_and_opaque_markers_of_the_file_form_name_the_entry_they_replace() -> None:
    before = {"d": (1, 0o040755, 0, 1)}
    after = {
        "d": (1, 0o040755, 0, 2),
        "d/.wh.gone": (2, 0o100644, 0, 3),
        "d/sub": (3, 0o040755, 0, 3),
        "d/sub/.wh..wh..opq": (4, 0o100644, 0, 3),
    }
    paths, replaced = touched(before, after)
    assert paths == {"d", "d/gone", "d/sub"} and replaced == {"d/gone", "d/sub"}
    changes = [Change("d/gone", "deleted"), Change("d/other", "modified"), Change("d/sub/x", "deleted")]
    assert [c.path for c in attribute(changes, paths, replaced)] == ["d/gone", "d/sub/x"]


def test_renames_pair_a_deleted_file_with_an_added_one_of_the_same_content(tmp_path: Path) -> None:
    root = project(tmp_path)
    with Overlay(lower=root) as ov:
        ov.rename("old.txt", "new.txt")
        ov.unlink("empty.txt")
        ov.write_text("also-empty.txt", "")  # empty files are all alike: no rename told from them
        ov.write_text("different.txt", "the same text, not\n")
        changes = ov.changes()
        pairs = renames(changes, ov.lower, ov.upper)
        assert pairs == [("old.txt", "new.txt")]
        s = summarize(changes, pairs)
        assert s.renamed == ["old.txt -> new.txt"] and s.deleted == ["empty.txt"]
        assert s.written == ["also-empty.txt", "different.txt"]
