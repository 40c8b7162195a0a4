"""Cost proportional to the change (issue #34 item 6), on every backend, without giving up the conflict
check: what a speculation records for the check holds what it read and wrote, never a record per file of
the project; and a change in the real tree to a file it read or wrote is still a conflict.

kernel overlayfs and fuse-overlayfs cannot say what a command read: the whole project counts as read,
through one record naming a watch of the real tree (fanotify as root, inotify otherwise), or, where no
watch can be made (``SPECULATE_TREE_WATCH=snapshot``), a snapshot of every file as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from overlayfs import backends, layer, treewatch
from overlayfs.conflicts import find_conflicts
from overlayfs.sandbox import SandboxLimits, keep_view, run_sandboxed
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require

FILES = 3000  # half of them in a gitignored node_modules/, as a JavaScript project has
BACKENDS = backend_params("pure", "fuse", "kernel", "fuse-overlayfs")
# The ways a backend that records no reads can stand for "everything was read".
WATCHES = ["auto", "inotify", "snapshot"]


@pytest.fixture(scope="module")
def big_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big") / "proj"
    for i in range(FILES):
        rel = f"src/d{i // 50:03}/m{i:05}.py" if i % 2 else f"node_modules/p{i // 50:03}/lib/f{i:05}.js"
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"value = {i}\n")
    (root / ".gitignore").write_text("node_modules/\n")
    return root


def _speculate(ov: Overlay, backend: str, read: str, write: str) -> None:
    """The fork reads ``read`` and rewrites ``write``, as its Bash (or, on ``pure``, its file tools) would."""
    if backend == "pure":
        ov.read_text(read)
        ov.write_text(write, ov.read_text(write) + "# edited\n")
        return
    keep_view(ov, backend)
    r = run_sandboxed(
        ov, f"cat {read} > /dev/null && echo '# edited' >> {write}", timeout=60, backend=backend
    )
    assert r.exit_code == 0, r.stderr


@pytest.fixture
def spec(request: pytest.FixtureRequest) -> Iterator[list[Overlay]]:
    made: list[Overlay] = []
    yield made
    for ov in made:
        ov.discard()


def _watch_mode(backend: str, watch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if watch != "auto" and not backends.get(backend).snapshots_lower:
        pytest.skip(f"{backend} records its reads itself: no watch")
    monkeypatch.setenv(treewatch.ENV, watch)


@pytest.mark.parametrize("watch", WATCHES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_what_the_check_walks_does_not_hold_the_whole_tree(
    backend: str,
    watch: str,
    big_template: Path,
    spec: list[Overlay],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require(backend)
    _watch_mode(backend, watch, monkeypatch)
    ov = Overlay(big_template, bound=SandboxLimits().layer_bound())
    spec.append(ov)
    _speculate(ov, backend, "src/d000/m00001.py", "src/d001/m00051.py")
    if ov.sandbox is not None:
        ov.sandbox.record_so_far()
    reads, bases = ov.reads(), ov.bases()
    if watch == "snapshot":  # the fallback keeps the old, whole-tree read set: the control
        assert len(reads) >= FILES
        return
    # What the conflict check walks: the read records and the bases, a handful, not 3,000.
    assert len(reads) <= 3, sorted(reads)[:10]
    assert set(bases) <= {"src/d001/m00051.py"}, sorted(bases)
    if backends.get(backend).snapshots_lower:
        assert [r.kind for r in reads.values()] == ["watch"]
    else:
        assert "src/d000/m00001.py" in reads
    changes = {c.path for c in ov.changes()}
    conflicts, _ = find_conflicts(ov.lower, changes | set(bases), bases, reads)
    assert conflicts == []


@pytest.mark.parametrize("watch", WATCHES)
@pytest.mark.parametrize("what", ["read", "written", "untouched"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_real_change_to_a_file_the_fork_read_or_wrote_is_a_conflict(
    backend: str,
    what: str,
    watch: str,
    project: Path,
    spec: list[Overlay],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guarantee kept: a file the fork read or wrote that the user changes before acceptance is a
    conflict, and nothing lands; untouched, the speculation lands."""
    require(backend)
    _watch_mode(backend, watch, monkeypatch)
    ov = Overlay(project, bound=SandboxLimits().layer_bound())
    spec.append(ov)
    read, written = "src/shop/cart.py", "src/shop/utils.py"
    _speculate(ov, backend, read, written)
    before = (project / written).read_bytes()
    if what != "untouched":
        target = project / (read if what == "read" else written)
        with target.open("a") as f:  # the user's editor, in place
            f.write("# the user's\n")
    res = ov.promote()
    if what == "untouched":
        assert res.ok, res.conflicts
        assert (project / written).read_bytes().endswith(b"# edited\n")
        return
    assert not res.ok and res.promoted == []
    assert (read if what == "read" else written) in {c.path for c in res.conflicts}, res.conflicts
    if what == "read":
        assert (project / written).read_bytes() == before  # nothing landed


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse-overlayfs"))
def test_on_backends_that_record_no_reads_any_real_change_is_a_conflict(
    backend: str, project: Path, spec: list[Overlay]
) -> None:
    """Those backends cannot tell a file read from one not read: a change anywhere in the project, in an
    ignored tree too, is a conflict (the guarantee is the snapshot's, made cheap)."""
    require(backend)
    (project / "node_modules/pkg").mkdir(parents=True)
    (project / "node_modules/pkg/index.js").write_text("old\n")
    ov = Overlay(project, bound=SandboxLimits().layer_bound())
    spec.append(ov)
    _speculate(ov, backend, "src/shop/cart.py", "src/shop/utils.py")
    (project / "node_modules/pkg/index.js").write_text("new\n")
    res = ov.promote()
    assert not res.ok
    assert "node_modules/pkg/index.js" in {c.path for c in res.conflicts}, res.conflicts


def test_a_record_naming_a_watch_this_process_lacks_is_a_conflict(project: Path, spec: list[Overlay]) -> None:
    """A read set left by another process (its watch went with it) vouches for nothing."""
    ov = Overlay(project)
    spec.append(ov)
    ov.write_text("new.txt", "x")
    token = f"inotify-{os.getpid()}-0-deadbeef"
    layer.record_read(ov.metadir, layer.Identity(f"//watch/{token}", True, "watch", 0, 0, 0, token))
    res = ov.promote()
    assert not res.ok and [c.path for c in res.conflicts] == ["."]
    assert not (project / "new.txt").exists()
