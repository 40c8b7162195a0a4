"""Conflicts: whatever the user did to the real tree after the overlay read or changed a path is detected,
and the user's version is kept."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from overlayfs import Overlay
from tests.overlay.conftest import snapshot

OverlayAction = Callable[[Overlay], None]
UserAction = Callable[[Path], None]

OVERLAY_ACTIONS: dict[str, OverlayAction] = {
    "read": lambda ov: ov.read_bytes("src/util.py") and None,
    "write": lambda ov: ov.write_text("src/util.py", "changed by the speculation\n"),
    "unlink": lambda ov: ov.unlink("src/util.py"),
    "chmod": lambda ov: ov.chmod("src/util.py", 0o600),
    "rename-away": lambda ov: ov.rename("src/util.py", "src/helpers.py"),
    "rmtree-parent": lambda ov: ov.rmtree("src"),
    "rename-parent": lambda ov: ov.rename("src", "lib"),
}


def _edit_same_size_and_mtime(root: Path) -> None:
    p = root / "src/util.py"
    st = p.stat()
    p.write_bytes(p.read_bytes().replace(b"1", b"9"))  # same size ...
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... same mtime: only the content hash tells


USER_ACTIONS: dict[str, UserAction] = {
    "edit": lambda root: (root / "src/util.py").write_text("user's own edit\n") and None,
    "sneaky-edit": _edit_same_size_and_mtime,
    "delete": lambda root: (root / "src/util.py").unlink(),
    "replace-with-dir": lambda root: (
        ((root / "src/util.py").unlink(), (root / "src/util.py").mkdir()) and None
    ),
}


@pytest.mark.parametrize("user", list(USER_ACTIONS))
@pytest.mark.parametrize("action", list(OVERLAY_ACTIONS))
def test_user_change_after_overlay_touched_a_path_is_a_conflict(
    project: Path, ov: Overlay, action: str, user: str
) -> None:
    OVERLAY_ACTIONS[action](ov)
    ov.write_text("unrelated.txt", "the speculation also wrote this")
    USER_ACTIONS[user](project)
    users_tree = snapshot(project)
    result = ov.promote()
    assert not result.ok and result.promoted == []
    assert "src/util.py" in {c.path for c in result.conflicts}
    assert snapshot(project) == users_tree  # all or nothing: not even the unrelated file
    assert ov.changes()  # the overlay still holds its work; the caller decides


@pytest.mark.parametrize("how", ["write", "mkdir", "symlink"])
def test_user_creating_a_path_the_overlay_created_is_a_conflict(project: Path, ov: Overlay, how: str) -> None:
    if how == "write":
        ov.write_text("new.txt", "speculation")
    elif how == "mkdir":
        ov.mkdir("new.txt")
    else:
        ov.symlink("README.md", "new.txt")
    (project / "new.txt").write_text("user")
    result = ov.promote()
    assert [(c.path, c.reason) for c in result.conflicts] == [
        ("new.txt", "created in the real tree after the overlay first changed it")
    ]
    assert (project / "new.txt").read_text() == "user"


def test_user_adding_a_file_under_a_deleted_directory_is_a_conflict(project: Path, ov: Overlay) -> None:
    ov.rmtree("docs")
    (project / "docs/notes.txt").write_text("mine")
    result = ov.promote()
    assert {c.path for c in result.conflicts} == {"docs/notes.txt"}
    assert (project / "docs/notes.txt").read_text() == "mine"
    assert (project / "docs/guide.txt").exists()


def test_read_set_conflict_names_the_read(project: Path, ov: Overlay) -> None:
    ov.read_text("docs/guide.txt")
    ov.write_text("src/app.py", "based on the guide")
    (project / "docs/guide.txt").write_text("the guide changed")
    result = ov.promote()
    assert [(c.path, c.reason) for c in result.conflicts] == [
        ("docs/guide.txt", "read by the speculation, then changed in the real tree")
    ]
    assert (project / "src/app.py").read_text() == "print('hello')\n"


def test_untouched_user_edits_elsewhere_do_not_conflict(project: Path, ov: Overlay) -> None:
    ov.write_text("src/app.py", "v2")
    ov.read_text("src/pkg/mod.py")
    (project / "README.md").write_text("user edit of a file the speculation never saw")
    (project / "src/other.py").write_text("user's new file")
    result = ov.promote()
    assert result.ok
    assert (project / "src/app.py").read_text() == "v2"
    assert (project / "README.md").read_text() == "user edit of a file the speculation never saw"
    assert (project / "src/other.py").exists()


def test_partial_promotion_keeps_conflicting_paths(project: Path, ov: Overlay) -> None:
    ov.write_text("src/app.py", "v2")
    ov.mkdir("newdir")
    ov.write_text("newdir/a.txt", "a")
    ov.write_text("docs/guide.txt", "speculated guide")
    (project / "docs/guide.txt").write_text("user guide")
    result = ov.promote(all_or_nothing=False)
    assert [c.path for c in result.conflicts] == ["docs/guide.txt"]
    assert {c.path for c in result.promoted} == {"src/app.py", "newdir", "newdir/a.txt"}
    assert (project / "src/app.py").read_text() == "v2"
    assert (project / "newdir/a.txt").read_text() == "a"
    assert (project / "docs/guide.txt").read_text() == "user guide"
    assert [c.path for c in ov.changes()] == ["docs/guide.txt"]  # promoted entries left the upper layer
    assert ov.read_text("src/app.py") == "v2"


def test_partial_promotion_reports_dependents_of_a_conflict(project: Path, ov: Overlay) -> None:
    ov.rmtree("docs")
    ov.write_text("README.md", "r2")
    (project / "docs/guide.txt").write_text("user")
    result = ov.promote(all_or_nothing=False)
    assert {(c.path, c.reason.startswith("depends on")) for c in result.conflicts} == {
        ("docs/guide.txt", False),
        ("docs", True),
    }
    assert [c.path for c in result.promoted] == ["README.md"]
    assert (project / "docs/guide.txt").read_text() == "user"


def test_promoting_selected_paths(project: Path, ov: Overlay) -> None:
    ov.mkdir("a/b", parents=True)
    ov.write_text("a/b/new.txt", "n")
    ov.write_text("README.md", "r2")
    result = ov.promote(["a/b/new.txt"])
    assert [c.path for c in result.promoted] == ["a", "a/b", "a/b/new.txt"]  # with its new parents
    assert (project / "a/b/new.txt").read_text() == "n"
    assert (project / "README.md").read_text() == "# demo\n"
    assert [c.path for c in ov.changes()] == ["README.md"]
    with pytest.raises(ValueError, match=r"nothing\.txt: no change"):
        ov.promote(["nothing.txt"])


@pytest.mark.parametrize("listing", ["listdir", "walk"])
@pytest.mark.parametrize("user", ["add", "remove"])
def test_a_listing_the_user_changed_since_is_a_conflict(
    project: Path, ov: Overlay, listing: str, user: str
) -> None:
    if listing == "listdir":
        names = ov.listdir("src")
    else:
        names = [f for d, _, files in ov.walk(".") if d == "src" for f in files]
    assert "util.py" in names
    ov.write_text("notes.txt", "the speculation's conclusion rests on that listing\n")
    if user == "add":
        (project / "src/new.py").write_text("x = 1\n")
    else:
        (project / "src/util.py").unlink()
    before = snapshot(project)
    res = ov.promote()
    assert [c.path for c in res.conflicts] == ["src"] and "listed by the speculation" in res.conflicts[
        0
    ].reason
    assert snapshot(project) == before  # nothing written


def test_listings_do_not_conflict_with_the_overlays_own_or_a_partial_promotion(
    project: Path, ov: Overlay
) -> None:
    ov.listdir(".")
    list(ov.walk("src"))
    ov.write_text("src/a_new.py", "a\n")
    ov.write_text("b_new.txt", "b\n")
    first = ov.promote(["src/a_new.py"], all_or_nothing=True)
    assert first.ok and (project / "src/a_new.py").exists()
    second = ov.promote()  # the first promotion changed src/ and the root: not the user's doing
    assert second.ok and (project / "b_new.txt").read_text() == "b\n"
