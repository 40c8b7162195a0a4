"""Read, Write and Edit on a real temporary project through LocalFS: success and error paths."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from speculate.tools import default_tools, tools_by_name
from speculate.tools.base import ToolContext, ToolResult
from speculate.tools.read import DEFAULT_LIMIT, MAX_LINE_CHARS

Call = Callable[[str, dict[str, Any], ToolContext], ToolResult]


def test_default_tools_order_flags_and_schemas() -> None:
    tools = default_tools()
    # The order is part of the prompt-cache key: a new tool goes at the end (speculate.tools.registry).
    assert [t.name for t in tools][:6] == ["Read", "Write", "Edit", "Glob", "Grep", "Bash"]
    by = tools_by_name(tools)
    read_only = {t.name for t in tools[:6] if t.is_read_only(t.parse(_minimal(t.name)))}
    assert {"Read", "Glob", "Grep"} <= read_only and not {"Write", "Edit"} & read_only
    assert by["Grep"].is_concurrency_safe(by["Grep"].parse({"pattern": "x"}))
    assert not by["Edit"].is_concurrency_safe(by["Edit"].parse(_minimal("Edit")))
    assert by["Read"].schema()["input_schema"]["required"] == ["file_path"]
    with pytest.raises(ValueError, match="duplicate tool name 'Read'"):
        tools_by_name([tools[0], tools[0]])


def _minimal(name: str) -> dict[str, object]:
    return {
        "Read": {"file_path": "a"},
        "Write": {"file_path": "a", "content": ""},
        "Edit": {"file_path": "a", "old_string": "x", "new_string": "y"},
        "Glob": {"pattern": "*"},
        "Grep": {"pattern": "x"},
        "Bash": {"command": "true"},
    }[name]


def test_invalid_input_names_the_field(ctx: ToolContext, call: Call) -> None:
    res = call("Read", {"file_path": "README.md", "offset": 0}, ctx)
    assert res.is_error and "offset" in res.content and "Read" in res.content
    res = call("Edit", {"file_path": "README.md", "old_string": "a"}, ctx)
    assert res.is_error and "new_string" in res.content
    res = call("Write", {"file_path": "x", "content": "y", "bogus": 1}, ctx)
    assert res.is_error and "bogus" in res.content


# -- Read -------------------------------------------------------------------------------------------------


def test_read_numbers_lines_like_cat_n(ctx: ToolContext, project: Path, call: Call) -> None:
    res = call("Read", {"file_path": f"{project}/src/pkg/core.py"}, ctx)
    assert not res.is_error
    assert res.content == "     1\tdef add(a, b):\n     2\t    return a + b"


def test_read_offset_limit_and_continuation_note(ctx: ToolContext, project: Path, call: Call) -> None:
    (project / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 3001)))
    res = call("Read", {"file_path": "long.txt", "offset": 10, "limit": 3}, ctx)
    assert res.content.splitlines()[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "offset=13" in res.content and "3000 lines" in res.content
    res = call("Read", {"file_path": "long.txt"}, ctx)
    numbered = [ln for ln in res.content.splitlines() if "\t" in ln]
    assert len(numbered) == DEFAULT_LIMIT and numbered[-1] == "  2000\tline 2000"
    assert f"offset={DEFAULT_LIMIT + 1}" in res.content
    res = call("Read", {"file_path": "long.txt", "offset": 2999}, ctx)
    assert res.content == "  2999\tline 2999\n  3000\tline 3000"


def test_read_truncates_long_lines_and_pages_huge_output(ctx: ToolContext, project: Path, call: Call) -> None:
    (project / "wide.txt").write_text("x" * (MAX_LINE_CHARS + 500) + "\nshort\n")
    res = call("Read", {"file_path": "wide.txt"}, ctx)
    first = res.content.splitlines()[0]
    assert first.startswith("     1\txxx") and f"[line truncated: {MAX_LINE_CHARS + 500} chars]" in first
    assert "     2\tshort" in res.content
    # 2000 lines of 1000 chars would be ~2 MB: Read stops at its size limit and says where to go on.
    (project / "big.txt").write_text(("y" * 1000 + "\n") * 2000)  # ~2 MB
    res = call("Read", {"file_path": "big.txt"}, ctx)
    assert len(res.content) < 101_000 and "output size limit" in res.content
    shown = [ln for ln in res.content.splitlines() if "\t" in ln]
    assert f"offset={len(shown) + 1}" in res.content


def test_read_errors(ctx: ToolContext, project: Path, call: Call) -> None:
    (project / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    (project / "empty.txt").write_text("")
    cases = {
        "missing.py": "File does not exist",
        "src": "is a directory",
        "blob.bin": "binary file",
        "../etc/passwd": "outside the project root",
        "/etc/passwd": "outside the project root",
    }
    for path, msg in cases.items():
        res = call("Read", {"file_path": path}, ctx)
        assert res.is_error and msg in res.content, (path, res.content)
    res = call("Read", {"file_path": "README.md", "offset": 50}, ctx)
    assert res.is_error and "offset 50 is past the end" in res.content and "2 lines" in res.content
    res = call("Read", {"file_path": "empty.txt"}, ctx)
    assert not res.is_error and "empty" in res.content


def test_read_refuses_symlink_out(ctx: ToolContext, project: Path, tmp_path: Path, call: Call) -> None:
    (tmp_path / "secret").write_text("top secret")
    (project / "s").symlink_to(tmp_path / "secret")
    res = call("Read", {"file_path": "s"}, ctx)
    assert res.is_error and "symlink" in res.content and "top secret" not in res.content


# -- Write ------------------------------------------------------------------------------------------------


def test_write_creates_parents_and_overwrites(ctx: ToolContext, project: Path, call: Call) -> None:
    res = call("Write", {"file_path": f"{project}/new/deep/f.txt", "content": "a\nb\n"}, ctx)
    assert not res.is_error and res.content.startswith("Created") and "2 lines" in res.content
    assert res.written == ("new/deep/f.txt",)
    assert (project / "new/deep/f.txt").read_text() == "a\nb\n"
    res = call("Write", {"file_path": "new/deep/f.txt", "content": "c"}, ctx)
    assert res.content.startswith("Updated") and (project / "new/deep/f.txt").read_text() == "c"


def test_write_errors(ctx: ToolContext, project: Path, tmp_path: Path, call: Call) -> None:
    (project / "out").symlink_to(tmp_path)
    for path, msg in {
        "src": "is a directory",
        "../x.txt": "outside the project root",
        "out/x.txt": "symlink",
        "README.md/x/y": "README.md is a file, not a directory",
    }.items():
        res = call("Write", {"file_path": path, "content": "x"}, ctx)
        assert res.is_error and msg in res.content, (path, res.content)
    assert not (tmp_path / "x.txt").exists()


# -- Edit -------------------------------------------------------------------------------------------------


def test_edit_replaces_unique_string_and_shows_snippet(ctx: ToolContext, project: Path, call: Call) -> None:
    res = call("Edit", {"file_path": "src/pkg/core.py", "old_string": "a + b", "new_string": "a - b"}, ctx)
    assert not res.is_error and res.written == ("src/pkg/core.py",)
    assert (project / "src/pkg/core.py").read_text() == "def add(a, b):\n    return a - b\n"
    assert "     2\t    return a - b" in res.content


def test_edit_errors(ctx: ToolContext, project: Path, call: Call) -> None:
    (project / "dup.txt").write_text("x = 1\nx = 1\nx = 1\n")
    res = call("Edit", {"file_path": "dup.txt", "old_string": "x = 1", "new_string": "x = 2"}, ctx)
    assert res.is_error and "not unique" in res.content and "found 3 matches" in res.content
    res = call("Edit", {"file_path": "dup.txt", "old_string": "y = 1", "new_string": "x"}, ctx)
    assert res.is_error and "not found" in res.content
    res = call("Edit", {"file_path": "dup.txt", "old_string": "x", "new_string": "x"}, ctx)
    assert res.is_error and "identical" in res.content
    res = call("Edit", {"file_path": "nope.txt", "old_string": "a", "new_string": "b"}, ctx)
    assert res.is_error and "does not exist" in res.content
    res = call("Edit", {"file_path": "dup.txt", "old_string": "", "new_string": "b"}, ctx)
    assert res.is_error and "use Write" in res.content
    (project / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    res = call("Edit", {"file_path": "latin1.txt", "old_string": "caf", "new_string": "bar"}, ctx)
    assert res.is_error and "not valid UTF-8" in res.content
    assert (project / "dup.txt").read_text() == "x = 1\nx = 1\nx = 1\n"  # failed edits change nothing


def test_edit_replace_all_crlf_and_create(ctx: ToolContext, project: Path, call: Call) -> None:
    (project / "dup.txt").write_text("x = 1\nx = 1\n")
    res = call(
        "Edit", {"file_path": "dup.txt", "old_string": "= 1", "new_string": "= 2", "replace_all": True}, ctx
    )
    assert "replaced 2" in res.content and (project / "dup.txt").read_text() == "x = 2\nx = 2\n"
    (project / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    res = call("Edit", {"file_path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2"}, ctx)
    assert not res.is_error and (project / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"
    res = call("Edit", {"file_path": "made/new.py", "old_string": "", "new_string": "x = 1\n"}, ctx)
    assert not res.is_error and (project / "made/new.py").read_text() == "x = 1\n"
