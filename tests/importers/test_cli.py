"""``speculate import claude-code``: one clear line for bad input, a summary of what was set aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.cli import main
from tests.importers.cc_records import Transcript, text

DATA = Path(__file__).parent / "data"


def test_imports_a_projects_directory_and_prints_what_it_set_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    projects = tmp_path / "projects"
    for name in ("interrupt_compact.jsonl", "clear.jsonl", "image_error.jsonl"):
        (projects / "-tmp-tx-it-project").mkdir(parents=True, exist_ok=True)
        (projects / "-tmp-tx-it-project" / name).write_bytes((DATA / name).read_bytes())
    t = Transcript()
    t.prompt("hi")
    t.add({"type": "hologram"}, chain=False)
    t.message("m1", text("hello"))
    t.write(projects / "-work-proj" / "s.jsonl")
    assert main(["import", "claude-code", str(projects), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    written = sorted(p.name for p in (tmp_path / "out").glob("*.yaml"))
    assert len(written) == 4 and "4 scenario(s) written" in out
    for line in (
        "interrupted turns",
        "/clear (new session)",
        "compactions (summary not replayed)",
        "images in tool results",
        "tool errors",
        "unknown record types (hologram, skipped)",
    ):
        assert line in out, line


@pytest.mark.parametrize(("args", "message"), [
    (["--rev", "HEAD"], "--rev needs --repo"),
    (["{tmp}/projects", "--repo", "{tmp}", "--rev", "HEAD"], "not a git repository"),
    (["{tmp}/projects", "--repo", "{tmp}/nope"], "not a directory"),
    (["{tmp}/nope.jsonl"], "nope.jsonl: no such file or directory"),
])  # fmt: skip
def test_bad_input_is_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (tmp_path / "projects").mkdir()  # named: the default, this user's own ~/.claude/projects, is not read
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["import", "claude-code", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_nothing_to_import_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.jsonl").write_text('{"type": "mode", "mode": "normal"}\n')
    assert main(["import", "claude-code", str(tmp_path / "empty.jsonl"), "--out", str(tmp_path / "o")]) == 1
    assert "0 scenario(s) written" in capsys.readouterr().out
    assert main(["import"]) == 2
    err = capsys.readouterr().err
    assert "usage: speculate import" in err and "claude-code" in err  # the group names what it can import
