"""Glob and Grep on a real tree; Grep's ripgrep and Python backends must give identical results."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.fs import LocalFS
from speculate.tools.base import ToolContext, ToolError, ToolResult
from speculate.tools.glob import MAX_RESULTS
from speculate.tools.globmatch import match_ignore_style, match_path
from speculate.tools.grep import GrepInput, format_matches, search

Call = Callable[[str, dict[str, Any], ToolContext], ToolResult]


needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not on PATH")


def _touch_in_order(root: Path, rels: list[str]) -> None:
    """Give files distinct mtimes, oldest first, so newest-first order is predictable."""
    for i, rel in enumerate(rels):
        os.utime(root / rel, ns=(1_000_000_000 * (i + 1), 1_000_000_000 * (i + 1)))


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "src/x/a.py", True),
        ("src/**", "src/x/a.py", True),
        ("src/**/t_*.py", "src/t_a.py", True),
        ("src/**/t_*.py", "src/x/y/t_a.py", True),
        ("src/**/t_*.py", "lib/t_a.py", False),
        ("*.{ts,tsx}", "a.tsx", True),
        ("*.{ts,tsx}", "a.js", False),
        ("file?.[ch]", "file1.c", True),
        ("file?.[!ch]", "file1.c", False),
        ("a\\*b", "a*b", True),
        ("a\\*b", "axb", False),
    ],
)
def test_glob_matching(pattern: str, path: str, hit: bool) -> None:
    assert match_path(pattern, path) is hit


def test_ignore_style_matches_basename_without_slash() -> None:
    assert match_ignore_style("*.py", "deep/dir/a.py")
    assert match_ignore_style("/src/*.py", "src/a.py") and not match_ignore_style("/src/*.py", "x/src/a.py")
    assert not match_ignore_style("sub/*.py", "x/sub/a.py")


def test_glob_newest_first_relative_to_path(ctx: ToolContext, project: Path, call: Call) -> None:
    _touch_in_order(project, ["src/pkg/util.py", "README.md", "src/pkg/core.py"])
    res = call("Glob", {"pattern": "**/*.py"}, ctx)
    assert res.content.splitlines() == [f"{project}/src/pkg/core.py", f"{project}/src/pkg/util.py"]
    res = call("Glob", {"pattern": "*.py", "path": f"{project}/src/pkg"}, ctx)
    assert res.content.splitlines() == [f"{project}/src/pkg/core.py", f"{project}/src/pkg/util.py"]
    res = call("Glob", {"pattern": "*.py"}, ctx)
    assert res.content == "No files found"
    res = call("Glob", {"pattern": f"{project}/src/**/u*.py"}, ctx)
    assert res.content == f"{project}/src/pkg/util.py"


def test_glob_skips_vcs_and_caps_with_note(ctx: ToolContext, project: Path, call: Call) -> None:
    (project / ".git").mkdir()
    (project / ".git" / "x.py").write_text("")
    many = project / "many"
    many.mkdir()
    for i in range(MAX_RESULTS + 20):
        (many / f"f{i:03}.txt").write_text("")
    res = call("Glob", {"pattern": "**/*.py"}, ctx)
    assert ".git" not in res.content
    res = call("Glob", {"pattern": "many/*.txt"}, ctx)
    lines = res.content.splitlines()
    assert len(lines) == MAX_RESULTS + 1 and f"showing {MAX_RESULTS} of {MAX_RESULTS + 20}" in lines[-1]


def test_glob_errors(ctx: ToolContext, project: Path, tmp_path: Path, call: Call) -> None:
    (project / "out").symlink_to(tmp_path)
    for inp, msg in [
        ({"pattern": "*.py", "path": "nope"}, "Directory does not exist"),
        ({"pattern": "*.py", "path": "README.md"}, "Not a directory"),
        ({"pattern": "*.py", "path": "../"}, "outside the project root"),
        ({"pattern": "*.py", "path": "out"}, "symlink"),
        ({"pattern": "/etc/*.conf"}, "outside the project root"),
    ]:
        res = call("Glob", inp, ctx)
        assert res.is_error and msg in res.content, (inp, res.content)


# -- Grep -------------------------------------------------------------------------------------------------


@pytest.fixture
def grep_tree(project: Path, tmp_path: Path) -> Path:
    (project / "src" / "pkg" / "deep").mkdir()
    (project / "src" / "pkg" / "deep" / "more.py").write_text("x = 'todo'\nTODO again\nnothing\n")
    (project / ".hidden").mkdir()
    (project / ".hidden" / "h.txt").write_text("TODO hidden\n")
    (project / "node_modules").mkdir()
    (project / "node_modules" / "m.js").write_text("TODO vendored\n")
    (project / "blob.bin").write_bytes(b"TODO\x00binary\n")
    (project / "notes.txt").write_text("todo: lower\nTODO: upper " + "w" * 700 + "\n")
    (project / "utf.txt").write_bytes("caf\xe9 TODO\n".encode("latin-1"))
    (tmp_path / "outside.txt").write_text("TODO outside\n")
    (project / "escape.txt").symlink_to(tmp_path / "outside.txt")
    _touch_in_order(
        project,
        ["README.md", "src/pkg/util.py", "src/pkg/deep/more.py", ".hidden/h.txt", "notes.txt", "utf.txt"],
    )
    return project


GREP_CASES = [
    {"pattern": "TODO"},
    {"pattern": "todo", "case_insensitive": True, "output_mode": "content"},
    {"pattern": "TODO", "output_mode": "count"},
    {"pattern": "TODO", "glob": "*.py", "output_mode": "content"},
    {"pattern": "TODO", "glob": "src/**/*.py"},
    {"pattern": "TODO", "glob": "!src"},
    {"pattern": "TODO", "path": "src", "output_mode": "content"},
    {"pattern": "TODO", "path": "notes.txt", "output_mode": "content"},
    {"pattern": r"^\s*return\b", "output_mode": "content"},
    {"pattern": "a|b", "output_mode": "count", "head_limit": 2},
    {"pattern": "no-such-string-anywhere"},
]


@needs_rg
@pytest.mark.parametrize("case", GREP_CASES, ids=[str(c) for c in GREP_CASES])
def test_grep_backends_agree(grep_tree: Path, case: dict[str, object]) -> None:
    fs = LocalFS(grep_tree)
    inp = GrepInput.model_validate(case)
    by_rg = trio.run(lambda: search(fs, inp, backend="rg"))
    by_py = trio.run(lambda: search(fs, inp, backend="python"))
    assert by_rg == by_py
    assert format_matches(fs, by_rg, inp) == format_matches(fs, by_py, inp)


def test_grep_results(grep_tree: Path, ctx: ToolContext, call: Call) -> None:
    root = grep_tree
    res = call("Grep", {"pattern": "TODO"}, ctx)
    assert res.content.splitlines() == [
        "Found 6 files",
        f"{root}/utf.txt",  # newest first
        f"{root}/notes.txt",
        f"{root}/.hidden/h.txt",
        f"{root}/src/pkg/deep/more.py",
        f"{root}/src/pkg/util.py",
        f"{root}/README.md",
    ]  # not node_modules, the binary file, or the link out of the project
    res = call("Grep", {"pattern": "TODO", "path": "src", "output_mode": "content"}, ctx)
    assert res.content.splitlines() == [
        f"{root}/src/pkg/deep/more.py:2:TODO again",
        f"{root}/src/pkg/util.py:3:TODO = 'x'",
    ]
    res = call("Grep", {"pattern": "todo", "case_insensitive": True, "output_mode": "count"}, ctx)
    assert f"{root}/notes.txt:2" in res.content.splitlines()
    assert res.content.splitlines()[0] == "Found 8 matching lines in 6 files"
    res = call("Grep", {"pattern": "upper", "output_mode": "content"}, ctx)
    assert res.content.endswith("... [712 chars]")
    res = call("Grep", {"pattern": "TODO", "head_limit": 2}, ctx)
    assert res.content.splitlines()[1:] == [
        f"{root}/utf.txt",
        f"{root}/notes.txt",
        res.content.splitlines()[-1],
    ]
    assert "showing first 2 of 6 files" in res.content


def test_grep_python_fallback_on_plain_view(grep_tree: Path, ctx: ToolContext, call: Call) -> None:
    """A view that is not a LocalFS (as an overlay is) always goes through the Python backend."""

    class Wrapped:
        def __init__(self, inner: LocalFS) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

        @property
        def root(self) -> Path:
            return self._inner.root

    view = ToolContext(fs=Wrapped(LocalFS(grep_tree)), shell=ctx.shell, spill_dir=ctx.spill_dir)  # type: ignore[arg-type]
    assert call("Grep", {"pattern": "TODO"}, view).content == call("Grep", {"pattern": "TODO"}, ctx).content


@pytest.mark.parametrize("backend", ["rg", "python"])
def test_grep_errors(grep_tree: Path, backend: str) -> None:
    if backend == "rg" and shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not on PATH")
    fs = LocalFS(grep_tree)
    for case, msg in [
        ({"pattern": "a("}, "a("),
        ({"pattern": "x", "path": "missing"}, "does not exist"),
        ({"pattern": "x", "path": "../.."}, "outside the project root"),
        ({"pattern": "x", "path": "escape.txt"}, "symlink"),
    ]:
        inp = GrepInput.model_validate(case)
        with pytest.raises(ToolError, match=None) as info:
            trio.run(lambda inp=inp: search(fs, inp, backend=backend))  # type: ignore[misc]
        assert msg in str(info.value), (case, str(info.value))


def test_large_output_spills_to_file(ctx: ToolContext, project: Path, call: Call) -> None:
    lines = [f"match {i} " + "z" * 50 for i in range(2000)]
    (project / "big.txt").write_text("\n".join(lines) + "\n")
    res = call("Grep", {"pattern": "match", "output_mode": "content"}, ctx)
    first = res.content.splitlines()[0]
    assert first.startswith("Output too large (") and "saved to" in first
    spilled = list(ctx.spill_dir.iterdir())
    assert len(spilled) == 1
    full = spilled[0].read_text()
    assert f"({len(full)} chars, 2000 lines)" in first
    assert full.splitlines()[1999] == f"{project}/big.txt:2000:{lines[1999]}"
    # The pointer is usable: Read opens spill files though they are outside the project.
    res = call("Read", {"file_path": str(spilled[0]), "offset": 2000}, ctx)
    assert not res.is_error and res.content == f"  2000\t{project}/big.txt:2000:{lines[1999]}"
