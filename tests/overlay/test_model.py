"""Model-based test: random operation sequences on Overlay and on an in-memory reference tree agree.

Checked after every step: the merged view equals the model (every listing and every file's bytes), the
real tree is byte-for-byte what it was at the last promotion, and ``changes()`` is exactly the difference
between the two. A promotion makes the real tree equal the model; reopening the layer changes nothing.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from overlayfs import Overlay
from tests.overlay.conftest import make_tree

LOWER: dict[str, bytes] = {"a/a": b"1", "a/b/c": b"22", "b": b"", "c/a/b": b"333", "c/c": b"1"}
NAMES = st.sampled_from(["a", "b", "c"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map("/".join)
DATA = st.sampled_from([b"", b"1", b"22", b"new", b"\x00\xff"])


class ModelError(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


class Model:
    """The merged view as a plain dict of files and a set of directories."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.dirs = {"."}
        for p in files:
            parts = p.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))

    def kind(self, p: str) -> str | None:
        return "file" if p in self.files else "dir" if p in self.dirs else None

    def under(self, p: str) -> list[str]:
        return [q for q in [*self.files, *self.dirs] if q.startswith(p + "/")]

    def parent_ok(self, p: str) -> None:
        parts = p.split("/")
        for i in range(1, len(parts)):
            k = self.kind("/".join(parts[:i]))
            if k is None:
                raise ModelError(errno.ENOENT)
            if k == "file":
                raise ModelError(errno.ENOTDIR)

    def read(self, p: str) -> bytes:
        self.parent_ok(p)
        k = self.kind(p)
        if k is None:
            raise ModelError(errno.ENOENT)
        if k == "dir":
            raise ModelError(errno.EISDIR)
        return self.files[p]

    def write(self, p: str, data: bytes) -> None:
        self.parent_ok(p)
        if self.kind(p) == "dir":
            raise ModelError(errno.EISDIR)
        self.files[p] = data

    def unlink(self, p: str) -> None:
        self.parent_ok(p)
        k = self.kind(p)
        if k is None:
            raise ModelError(errno.ENOENT)
        if k == "dir":
            raise ModelError(errno.EISDIR)
        del self.files[p]

    def mkdir(self, p: str) -> None:
        self.parent_ok(p)
        if self.kind(p) is not None:
            raise ModelError(errno.EEXIST)
        self.dirs.add(p)

    def _dir_checks(self, p: str) -> None:
        self.parent_ok(p)
        k = self.kind(p)
        if k is None:
            raise ModelError(errno.ENOENT)
        if k == "file":
            raise ModelError(errno.ENOTDIR)

    def rmdir(self, p: str) -> None:
        self._dir_checks(p)
        if self.under(p):
            raise ModelError(errno.ENOTEMPTY)
        self.dirs.discard(p)

    def rmtree(self, p: str) -> None:
        self._dir_checks(p)
        for q in self.under(p):
            self.files.pop(q, None)
            self.dirs.discard(q)
        self.dirs.discard(p)

    def rename(self, s: str, d: str) -> None:
        self.parent_ok(s)
        ks = self.kind(s)
        if ks is None:
            raise ModelError(errno.ENOENT)
        self.parent_ok(d)
        if s == d:
            return
        if d.startswith(s + "/"):
            raise ModelError(errno.EINVAL)
        kd = self.kind(d)
        if ks == "dir" and kd is not None:
            if kd != "dir":
                raise ModelError(errno.ENOTDIR)
            if self.under(d):
                raise ModelError(errno.ENOTEMPTY)
        elif ks == "file" and kd == "dir":
            raise ModelError(errno.EISDIR)
        if ks == "file":
            self.files[d] = self.files.pop(s)
            return
        self.dirs.discard(d)
        moved = self.under(s)
        for q in moved:
            nq = d + q[len(s) :]
            if q in self.files:
                self.files[nq] = self.files.pop(q)
            else:
                self.dirs.discard(q)
                self.dirs.add(nq)
        self.dirs.discard(s)
        self.dirs.add(d)

    def listdir(self, p: str) -> list[str]:
        self._dir_checks(p) if p != "." else None
        prefix = "" if p == "." else p + "/"
        return sorted(
            {
                q[len(prefix) :]
                for q in [*self.files, *self.dirs]
                if q != "." and q.startswith(prefix) and "/" not in q[len(prefix) :]
            }
        )


def real_tree(root: Path) -> tuple[dict[str, bytes], set[str]]:
    files: dict[str, bytes] = {}
    dirs = {"."}
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_dir():
            dirs.add(rel)
        else:
            files[rel] = p.read_bytes()
    return files, dirs


class OverlayMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="ovl-model-"))
        self.lower = self.tmp / "lower"
        self.lower.mkdir()
        make_tree(self.lower, LOWER)
        self.ov = Overlay(self.lower, self.tmp / "layers/upper")
        self.model = Model(LOWER)
        self.real = Model(LOWER)  # what the real tree must hold: the model at the last promotion

    def teardown(self) -> None:
        self.ov.discard()
        shutil.rmtree(self.tmp)

    def both(self, real_call, model_call):  # type: ignore[no-untyped-def]
        try:
            expected = model_call()
        except ModelError as e:
            try:
                real_call()
            except OSError as got:
                assert got.errno == e.code, (got, e.code)
                return None
            raise AssertionError(
                f"overlay succeeded where the model fails with {errno.errorcode[e.code]}"
            ) from None
        got = real_call()
        assert got == expected
        return got

    @rule(p=PATHS, data=DATA)
    def write(self, p: str, data: bytes) -> None:
        self.both(lambda: self.ov.write_bytes(p, data), lambda: self.model.write(p, data))

    @rule(p=PATHS)
    def read(self, p: str) -> None:
        self.both(lambda: self.ov.read_bytes(p), lambda: self.model.read(p))

    @rule(p=PATHS)
    def unlink(self, p: str) -> None:
        self.both(lambda: self.ov.unlink(p), lambda: self.model.unlink(p))

    @rule(p=PATHS)
    def mkdir(self, p: str) -> None:
        self.both(lambda: self.ov.mkdir(p), lambda: self.model.mkdir(p))

    @rule(p=PATHS)
    def rmdir(self, p: str) -> None:
        self.both(lambda: self.ov.rmdir(p), lambda: self.model.rmdir(p))

    @rule(p=PATHS)
    def rmtree(self, p: str) -> None:
        self.both(lambda: self.ov.rmtree(p), lambda: self.model.rmtree(p))

    @rule(s=PATHS, d=PATHS)
    def rename(self, s: str, d: str) -> None:
        self.both(lambda: self.ov.rename(s, d), lambda: self.model.rename(s, d))

    @rule(p=st.one_of(st.just("."), PATHS))
    def listdir(self, p: str) -> None:
        self.both(lambda: self.ov.listdir(p), lambda: self.model.listdir(p))

    @rule()
    def reopen(self) -> None:
        self.ov = Overlay(self.lower, self.ov.upper)

    @rule()
    def promote(self) -> None:
        result = self.ov.promote()
        assert result.ok, result.conflicts
        self.real = Model(self.model.files)
        self.real.dirs = set(self.model.dirs)
        assert list(self.ov.upper.iterdir()) == []
        assert self.ov.changes() == []

    @rule(data=st.data())
    def promote_one_file(self, data: st.DataObject) -> None:
        files = [c for c in self.ov.changes() if c.type == "file"]
        if not files:
            return
        ch = data.draw(st.sampled_from(files))
        result = self.ov.promote([ch.path])
        assert result.ok, result.conflicts
        assert ch in result.promoted
        for c in result.promoted:  # itself, the new directories above it, the entries it replaces
            assert c.path == ch.path or ch.path.startswith(c.path + "/") or c.path.startswith(ch.path + "/")
            new = self.model.kind(c.path)
            self.real.files.pop(c.path, None)
            self.real.dirs.discard(c.path)
            if new == "file":
                self.real.files[c.path] = self.model.files[c.path]
            elif new == "dir":
                self.real.dirs.add(c.path)

    @invariant()
    def view_equals_model(self) -> None:
        files: dict[str, bytes] = {}
        dirs = set()
        for dirpath, _dirnames, filenames in self.ov.walk():
            dirs.add(dirpath)
            for f in filenames:
                rel = f if dirpath == "." else f"{dirpath}/{f}"
                files[rel] = self.ov.read_bytes(rel)
        assert files == self.model.files
        assert dirs == self.model.dirs

    @invariant()
    def real_tree_untouched_until_promotion(self) -> None:
        files, dirs = real_tree(self.lower)
        assert files == self.real.files
        assert dirs == self.real.dirs

    @invariant()
    def changes_are_the_difference(self) -> None:
        expected = set()
        for p in {*self.model.files, *self.model.dirs, *self.real.files, *self.real.dirs} - {"."}:
            new, old = self.model.kind(p), self.real.kind(p)
            if old is None and new is not None:
                expected.add((p, "added", new))
            elif new is None and old is not None:
                expected.add((p, "deleted", old))
            elif new != old or (new == "file" and self.model.files[p] != self.real.files[p]):
                expected.add((p, "modified", new))
        assert {(c.path, c.kind, c.type) for c in self.ov.changes()} == expected


OverlayMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_overlay_matches_model = OverlayMachine.TestCase
