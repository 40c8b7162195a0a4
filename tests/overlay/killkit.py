"""A real project of ~1,000 entries and a speculation over it that changes more than 1,000 paths with every
kind of change promotion handles, built and accepted by a child process that the kill test SIGKILLs.

``python -m tests.overlay.killkit LOWER [--bounded]`` opens an overlay in the project's state dir as the
engine does (named by this process; ``--bounded``: its upper layer on a private tmpfs, which dies with the
process, as the engine's does), builds the speculation in it, prints ``built``, then promotes, printing
each journal state as it is written (``prepare``, ``commit``) and ``done``: the parent times its SIGKILL by
these lines."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from overlayfs import Overlay


def make_lower(root: Path) -> None:
    def put(rel: str, data: bytes, mode: int = 0o644) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)

    for i in range(450):
        put(f"src/p{i % 9}/m{i:03}.py", f"def f{i}():\n    return {i}\n".encode() * 8)
    for i in range(100):
        put(f"del/d{i:03}.txt", f"delete me {i}\n".encode())
    for t in range(3):
        for i in range(30):
            put(f"trees/t{t}/s{i % 3}/x{i:02}.txt", f"tree {t} {i}\n".encode())
    for i in range(50):
        put(f"ren/r{i:02}.txt", f"rename me {i}\n".encode())
    for i in range(20):
        put(f"rdir/sub/q{i:02}.txt", f"moved with the dir {i}\n".encode())
    for i in range(5):
        put(f"fod{i}/a.txt", b"a\n")
        put(f"fod{i}/deep/b.txt", b"b\n")
        put(f"dof{i}", f"a file that becomes a dir {i}\n".encode())
        put(f"lod{i}/c.txt", b"c\n")  # a directory that becomes a symlink
    for i in range(60):
        put(f"mode/f{i:02}.sh", b"#!/bin/sh\necho hi\n", 0o644)
    (root / "links").mkdir()
    for i in range(20):
        os.symlink(f"../src/p{i % 9}", root / f"links/l{i:02}")
    for i in range(5):
        os.symlink("nowhere", root / f"dol{i}")  # a symlink that becomes a directory
    (root / "ro-old").mkdir()
    (root / "ro-old/keep.txt").write_bytes(b"keep\n")


def speculate(ov: Overlay) -> None:
    for i in range(450):
        ov.write_bytes(f"src/p{i % 9}/m{i:03}.py", f"def f{i}():\n    return {i + 1}\n".encode() * 7)
    for i in range(100):
        ov.unlink(f"del/d{i:03}.txt")
    for t in range(3):
        ov.rmtree(f"trees/t{t}")
    ov.mkdir("ren2")
    for i in range(50):
        ov.rename(f"ren/r{i:02}.txt", f"ren2/r{i:02}.txt")
    ov.rename("rdir", "rdir-moved")
    for i in range(5):
        ov.rmtree(f"fod{i}")
        ov.write_bytes(f"fod{i}", f"a file where a dir was {i}\n".encode())
        ov.unlink(f"dof{i}")
        ov.mkdir(f"dof{i}")
        ov.write_bytes(f"dof{i}/inner.txt", b"inner\n")
        ov.symlink("../src", f"dof{i}/up")
        ov.rmtree(f"lod{i}")
        ov.symlink("src/p0", f"lod{i}")
        ov.unlink(f"dol{i}")
        ov.mkdir(f"dol{i}")
        ov.write_bytes(f"dol{i}/was-a-link.txt", b"dir\n")
    for i in range(60):
        ov.chmod(f"mode/f{i:02}.sh", 0o755)
    for i in range(20):
        if i < 10:
            ov.unlink(f"links/l{i:02}")
            ov.symlink(f"../src/p{(i + 1) % 9}", f"links/l{i:02}")  # retargeted
        elif i < 15:
            ov.unlink(f"links/l{i:02}")
        else:
            ov.unlink(f"links/l{i:02}")
            ov.write_bytes(f"links/l{i:02}", b"a file where a link was\n")
    for j in range(10):
        ov.mkdir(f"add/d{j}/e", parents=True)
        for i in range(20):
            ov.write_bytes(f"add/d{j}/e/n{i:02}.txt", f"new {j} {i}\n".encode())
    ov.write_bytes("add/private.key", b"secret\n")
    ov.chmod("add/private.key", 0o600)
    ov.mkdir("ro-new")
    ov.write_bytes("ro-new/inside.txt", b"inside a read-only new dir\n")
    ov.chmod("ro-new", 0o555)
    ov.symlink("ro-new/inside.txt", "new-link")


def main() -> None:
    from overlayfs import journal
    from overlayfs.bounded import LayerBound

    ov = Overlay(sys.argv[1], bound=LayerBound(bytes=256 << 20) if "--bounded" in sys.argv else None)
    speculate(ov)
    real_begin, real_mark = journal.begin, journal.mark

    def begin(path: Path, j: journal.Journal) -> None:
        real_begin(path, j)
        print("prepare", flush=True)

    def mark(path: Path, state: str, data: dict | None = None, *, sync: bool = True) -> None:
        real_mark(path, state, data, sync=sync)
        print(state, flush=True)

    journal.begin, journal.mark = begin, mark
    print("built", flush=True)
    assert ov.promote(durable=False).ok
    print("done", flush=True)


if __name__ == "__main__":
    main()
