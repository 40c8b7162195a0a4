"""Microbenchmarks of the pure-Python overlay (run: .venv/bin/pytest bench/micro --benchmark-only).

Figures and how to read them: docs/overlay.md, "Microbenchmarks".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from overlayfs import Overlay

N_FILES = 10_000


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10k files of ~1 KiB in 100 directories of 100, two levels deep."""
    root = tmp_path_factory.mktemp("bench") / "project"
    for d in range(100):
        sub = root / f"pkg{d // 10}" / f"mod{d}"
        sub.mkdir(parents=True)
        for f in range(N_FILES // 100):
            (sub / f"file{f}.py").write_bytes(b"x = 1\n" * 170)
    return root


@pytest.fixture
def ov(tree: Path) -> Iterator[Overlay]:
    o = Overlay(tree)
    yield o
    o.discard()


def test_create_overlay_on_10k_files(benchmark, tree: Path) -> None:
    made: list[Overlay] = []
    benchmark(lambda: made.append(Overlay(tree)))
    for o in made:
        o.discard()


@pytest.mark.parametrize("via", ["pathlib", "overlay"])
def test_read(benchmark, tree: Path, ov: Overlay, via: str) -> None:
    rel = "pkg3/mod37/file42.py"
    read = (lambda: (tree / rel).read_bytes()) if via == "pathlib" else (lambda: ov.read_bytes(rel))
    assert benchmark(read) == (tree / rel).read_bytes()


@pytest.mark.parametrize("via", ["pathlib", "overlay"])
def test_stat(benchmark, tree: Path, ov: Overlay, via: str) -> None:
    rel = "pkg3/mod37/file42.py"
    st = (lambda: (tree / rel).stat()) if via == "pathlib" else (lambda: ov.stat(rel))
    assert benchmark(st).st_size == 1020


@pytest.mark.parametrize("via", ["pathlib", "overlay"])
def test_listdir(benchmark, tree: Path, ov: Overlay, via: str) -> None:
    rel = "pkg3/mod37"
    ls = (lambda: sorted(os.listdir(tree / rel))) if via == "pathlib" else (lambda: ov.listdir(rel))
    assert len(benchmark(ls)) == 100


@pytest.mark.parametrize("via", ["os.walk", "overlay"])
def test_walk_10k(benchmark, tree: Path, ov: Overlay, via: str) -> None:
    def count() -> int:
        it = os.walk(tree) if via == "os.walk" else ov.walk()
        return sum(len(files) for _, _, files in it)

    assert benchmark.pedantic(count, rounds=5, iterations=1) == N_FILES


@pytest.mark.parametrize("via", ["pathlib", "overlay"])
def test_read_after_changes(benchmark, tree: Path, ov: Overlay, via: str) -> None:
    """Reads through directories that have upper copies (merged, with whiteouts)."""
    for f in range(0, 100, 10):
        ov.write_bytes(f"pkg3/mod37/file{f}.py", b"changed\n")
    ov.unlink("pkg3/mod37/file99.py")
    rel = "pkg3/mod37/file42.py"
    read = (lambda: (tree / rel).read_bytes()) if via == "pathlib" else (lambda: ov.read_bytes(rel))
    assert benchmark(read) == (tree / rel).read_bytes()


def test_copy_up(benchmark, tree: Path) -> None:
    """First write-in-place of a lower file: copy-up (copy_file_range) then the edit."""
    big = tree / "big.bin"
    big.write_bytes(os.urandom(1 << 20))
    made: list[Overlay] = []

    def setup() -> tuple[tuple[Overlay], dict[str, object]]:
        made.append(Overlay(tree))
        return (made[-1],), {}

    def copy_up(o: Overlay) -> None:
        with o.open("big.bin", "r+b") as f:
            f.write(b"!")

    benchmark.pedantic(copy_up, setup=setup, rounds=30)
    assert made[0].statistics().bytes_copied == 1 << 20
    for o in made:
        o.discard()
    big.unlink()


@pytest.mark.parametrize("n", [1, 10, 100])
def test_promote(benchmark, tmp_path: Path, n: int) -> None:
    """Promotion of n changed files (durable: fsync'd) into a 1k-file tree; each round rewrites them."""
    root = tmp_path / "p"
    for d in range(10):
        (root / f"d{d}").mkdir(parents=True)
        for f in range(100):
            (root / f"d{d}/f{f}.txt").write_bytes(b"v0\n" * 300)
    ov = Overlay(root)
    rounds = iter(range(1, 10_000))

    def setup() -> tuple[tuple[()], dict[str, object]]:
        r = next(rounds)
        for i in range(n):
            ov.write_bytes(f"d{i % 10}/f{i // 10}.txt", b"v%d\n" % r * 300)
        return (), {}

    def promote() -> None:
        assert ov.promote().ok

    benchmark.pedantic(promote, setup=setup, rounds=20)
    assert ov.changes() == []
    ov.discard()
    shutil.rmtree(root)
