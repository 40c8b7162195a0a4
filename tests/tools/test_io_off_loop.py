"""File-tool I/O runs in worker threads, not on the trio loop: read-only calls really overlap, and a long
Python grep stops between files when its caller is cancelled."""

from __future__ import annotations

import threading
from pathlib import Path

import trio

from speculate.fs import LocalFS, LocalShell
from speculate.tools.base import ToolContext
from speculate.tools.grep import GrepInput, search
from speculate.tools.read import Read, ReadInput


class MeetingFS(LocalFS):
    """Each read waits until two reads are in flight at once: inline (serial) I/O would never get there."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.barrier = threading.Barrier(2, timeout=10)

    def read_bytes(self, path):  # type: ignore[no-untyped-def]
        self.barrier.wait()
        return super().read_bytes(path)


class CountingFS(LocalFS):
    """Counts reads; on the 20th it asks the trio side to cancel the grep and waits until it has."""

    def __init__(self, root: Path, token: trio.lowlevel.TrioToken, scope: trio.CancelScope) -> None:
        super().__init__(root)
        self.reads, self.token, self.scope = 0, token, scope

    def read_bytes(self, path):  # type: ignore[no-untyped-def]
        self.reads += 1
        if self.reads == 20:
            done = threading.Event()
            self.token.run_sync_soon(lambda: (self.scope.cancel(), done.set()))
            done.wait(10)
        return super().read_bytes(path)


def test_two_reads_in_one_batch_overlap(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(f"{name}\n")
    ctx = ToolContext(fs=MeetingFS(tmp_path), shell=LocalShell(tmp_path), spill_dir=tmp_path / "spill")

    async def main() -> list[str]:
        out: list[str] = []

        async def read(name: str) -> None:
            out.append(str((await Read().call(ReadInput(file_path=str(tmp_path / name)), ctx)).content))

        async with trio.open_nursery() as n:
            n.start_soon(read, "a.txt")
            n.start_soon(read, "b.txt")
        return out

    out = sorted(trio.run(main))
    assert len(out) == 2 and "a.txt" in out[0] and "b.txt" in out[1]


def test_a_python_grep_is_cancelled_between_files(tmp_path: Path) -> None:
    for i in range(2000):
        (tmp_path / f"f{i:04}.txt").write_text("needle\n")

    async def main() -> int:
        scope = trio.CancelScope()
        fs = CountingFS(tmp_path, trio.lowlevel.current_trio_token(), scope)
        with scope:
            await search(fs, GrepInput(pattern="needle"), backend="python")
        assert scope.cancelled_caught
        return fs.reads

    assert trio.run(main) <= 21  # the file being read when the cancel came, then it stopped
