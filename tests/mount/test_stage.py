"""The compiled stage program on a machine as set-up finds it: built once where a compiler is at hand, a
file someone else could write never run, and where no compiler exists the Python stages enter the sandbox
on every backend (the fuse-overlayfs start included, which takes its stage apart from the command's)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from overlayfs import stage as stages
from overlayfs.bounded import LayerBound
from overlayfs.sandbox import keep_view, run_sandboxed
from overlayfs.view import Overlay
from tests.mount.conftest import backend_params, require


@pytest.fixture
def fresh_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stage source where nothing has been built yet, and a per-user cache of our own; the real
    program's cached answer is dropped before and after (other tests find it again)."""
    src = tmp_path / "src"
    src.mkdir(mode=0o755)
    shutil.copy(stages.SOURCE, src / "stage.c")
    cache = tmp_path / "tmp"
    cache.mkdir()
    monkeypatch.setattr(stages, "SOURCE", src / "stage.c")
    monkeypatch.setattr(stages.tempfile, "tempdir", os.fspath(cache))
    monkeypatch.delenv(stages.ENV_OFF, raising=False)
    stages.stage_program.cache_clear()
    yield src
    stages.stage_program.cache_clear()


def _no_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    with monkeypatch.context() as m:
        m.setenv("PATH", os.fspath(empty))
        m.delenv("CC", raising=False)
        assert stages.stage_program() is None  # the answer is cached: the sandbox below uses it


def test_built_once_next_to_its_source(fresh_machine: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here")
    got = stages.stage_program()
    assert got is not None and Path(got).parent == fresh_machine and Path(got).name.startswith("_stage-")
    assert not os.stat(got).st_mode & 0o022
    stages.stage_program.cache_clear()
    before = os.stat(got).st_mtime_ns
    assert stages.stage_program() == got and os.stat(got).st_mtime_ns == before  # found, not rebuilt


def test_a_program_others_could_write_is_not_run(
    fresh_machine: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Root runs the stage program: a file of the right name that anyone else could have written (its mode
    or its directory's) is never used, even where nothing could be built instead."""
    planted = fresh_machine / f"_stage-{stages._digest()}"
    planted.write_text("#!/bin/sh\necho planted\n")
    planted.chmod(0o777)
    _no_compiler(monkeypatch, tmp_path)
    planted.chmod(0o755)
    fresh_machine.chmod(0o777)
    stages.stage_program.cache_clear()
    _no_compiler(monkeypatch, tmp_path)
    fresh_machine.chmod(0o755)
    stages.stage_program.cache_clear()
    with monkeypatch.context() as m:  # the control: the same file, now trusted, is found
        m.setenv("PATH", os.fspath(tmp_path / "empty-bin"))
        assert stages.stage_program() == os.fspath(planted)


def test_no_compiler_says_so(fresh_machine: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_compiler(monkeypatch, tmp_path)
    assert not list(fresh_machine.glob("_stage-*"))


@pytest.mark.parametrize("backend", backend_params("kernel", "fuse", "fuse-overlayfs"))
def test_without_a_compiler_the_python_stages_enter_the_sandbox(
    backend: str, fresh_machine: Path, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require(backend)
    _no_compiler(monkeypatch, tmp_path)
    ov = Overlay(project, bound=LayerBound())
    try:
        keep_view(ov, backend)
        r = run_sandboxed(
            ov, "ulimit -u; grep NoNewPrivs /proc/self/status; echo one > a.txt", timeout=60, backend=backend
        )
        assert r.exit_code == 0 and r.backend_failed is None, r.stderr
        assert r.enforced is not None and r.enforced["stages"] == "Python"
        assert r.stdout.split()[:3] == ["512", "NoNewPrivs:", "1"]
        ov.write_text("b.txt", "two\n")  # a file-tool write: fuse-overlayfs is started afresh, by Python too
        r = run_sandboxed(ov, "cat a.txt b.txt", timeout=60, backend=backend)
        assert r.exit_code == 0 and r.stdout == "one\ntwo\n", r.stderr
        assert project.joinpath("a.txt").exists() is False
    finally:
        ov.discard()
