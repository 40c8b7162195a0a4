"""Behaviour of the classifier beyond the corpus: API shape, cwd tracking, scanners, the CLI entry."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from speculate.shell import Classification, check_bash_main, classify
from speculate.shell.scripts import scan_awk, scan_sed

ROOT = "/srv/project"  # not under /tmp, need not exist for lexical checks


def test_classification_is_frozen_and_lists_parts() -> None:
    got = classify("ls | grep x && echo $(pwd)", project_root=ROOT)
    assert isinstance(got, Classification)
    assert got.parts == ("ls", "grep x", "echo $(pwd)", "pwd")
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.read_only = False  # type: ignore[misc]


def test_reason_names_the_offending_part() -> None:
    got = classify("ls && git status && curl -s https://example.com", project_root=ROOT)
    assert got.risky and "curl" in got.reason and got.reason.startswith("risky:")
    assert classify("touch a", project_root=ROOT).reason.startswith("sandboxable:")
    assert classify("ls", project_root=ROOT).reason == "read-only: ls"


def test_non_string_command_is_rejected_by_name() -> None:
    with pytest.raises(TypeError, match="b'ls'"):
        classify(b"ls")  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["", "   ", "# just a comment"])
def test_blank_commands_are_read_only(command: str) -> None:
    assert classify(command).read_only


def test_nul_byte_is_risky() -> None:
    assert classify("ls\0rm -rf ~").risky


def test_absolute_project_paths_need_the_root() -> None:
    command = f"touch {ROOT}/src/new.py"
    assert classify(command, project_root=ROOT).sandboxable
    assert classify(command).risky  # without a root, an absolute path cannot be known to be inside
    assert classify("touch src/new.py").sandboxable  # relative paths start in the project


def test_cd_tracking_keeps_both_directories() -> None:
    assert classify("cd /tmp && rm -rf x", project_root=ROOT).sandboxable
    assert classify("cd src && cd .. && touch a", project_root=ROOT).sandboxable
    assert classify("cd src && cd ../.. && touch a", project_root=ROOT).risky
    assert classify("(cd / && ls) && touch a", project_root=ROOT).sandboxable  # subshell keeps cd local
    assert classify("eval 'cd /' && touch a", project_root=ROOT).risky  # eval runs in this shell
    assert classify("bash -c 'cd /' && touch a", project_root=ROOT).sandboxable


def test_function_bodies_run_in_the_callers_directory() -> None:
    assert classify("f() { touch x; }; cd /; f", project_root=ROOT).risky


def test_symlink_out_of_the_project_is_outside(tmp_path: Path) -> None:
    root = Path("/var/tmp") / tmp_path.name
    root.mkdir()
    try:
        (root / "out").symlink_to("/etc")
        assert classify("touch out/x", project_root=str(root)).risky
        assert classify("touch in/x", project_root=str(root)).sandboxable
    finally:
        (root / "out").unlink()
        root.rmdir()


def test_project_shell_scripts_are_read_and_classified(tmp_path: Path) -> None:
    root = Path("/var/tmp") / f"sh-{tmp_path.name}"
    root.mkdir()
    try:
        (root / "safe.sh").write_text("#!/bin/sh\ngrep -r TODO .\n")
        (root / "bad.sh").write_text("#!/bin/sh\ncurl https://x\n")
        assert classify("./safe.sh", project_root=str(root)).read_only
        assert classify("bash bad.sh", project_root=str(root)).risky
        assert classify("./missing.sh", project_root=str(root)).risky
    finally:
        for name in ("safe.sh", "bad.sh"):
            (root / name).unlink()
        root.rmdir()


@pytest.mark.parametrize(
    ("script", "writes", "executes", "understood"),
    [
        ("s/a/b/g", [], False, True),
        ("1,10p;$d", [], False, True),
        ("/x/,/y/{s/a/b/;p}", [], False, True),
        ("s/a/b/w out.txt", ["out.txt"], False, True),
        ("s|/usr|/opt|e", [], True, True),
        ("/re/w /etc/x", ["/etc/x"], False, True),
        ("1e date", [], True, True),
        ("$!N;s/\\n/ /", [], False, True),
        ("a\\\nappended", [], False, True),
        ("y/abc/xyz/", [], False, True),
        ("s/unterminated", [], False, False),
        ("k", [], False, False),
    ],
)
def test_sed_scanner(script: str, writes: list[str], executes: bool, understood: bool) -> None:
    got = scan_sed(script)
    assert (got.writes, got.executes, got.understood) == (writes, executes, understood)


@pytest.mark.parametrize(
    ("program", "executes", "understood"),
    [
        ("{print $1}", False, True),
        ("$3 > 100 {print $1}", False, True),
        ("NR==1 || NR==2", False, True),
        ('{system("rm " $1)}', True, True),
        ('{print | "sort"}', True, True),
        ('{print > "out"}', False, False),
    ],
)
def test_awk_scanner(program: str, executes: bool, understood: bool) -> None:
    got = scan_awk(program)
    assert (got.executes, got.understood) == (executes, understood)


def test_check_bash_main_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_bash_main(["--root", ROOT, "git status"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"read_only": True, "sandboxable": True, "reason": "read-only: git"}
    assert check_bash_main(["--root", ROOT, "rm", "-rf", "/"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["read_only"] is False and out["sandboxable"] is False and "rm" in out["reason"]


def test_check_bash_main_rejects_missing_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        check_bash_main([])
    assert exc.value.code == 2
    assert "command" in capsys.readouterr().err


def test_symlink_escape_counts_even_for_a_project_under_tmp(tmp_path: Path) -> None:
    (tmp_path / "out").symlink_to("/etc")
    assert classify("touch out/x", project_root=str(tmp_path)).risky
    assert classify("touch ../sibling", project_root=str(tmp_path)).sandboxable  # still under /tmp
