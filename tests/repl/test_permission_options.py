"""``speculate repl``'s permission options (``--permission-mode``/``--mode``, ``--allowedTools``,
``--disallowedTools``, ``--add-dir``), the starting mode and trust it works out, the trust question (its
function, and in a real terminal), and what a line-mode run says about an untrusted workspace."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speculate.cliparse import UsageError
from speculate.repl.main import Permissions, _permissions, ask_trust
from speculate.repl.options import build_parser
from speculate.trust import is_trusted

REPO = Path(__file__).resolve().parents[2]


def project(tmp: Path, settings: dict[str, object]) -> Path:
    root = tmp / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    return root


def test_the_options_parse_as_claude_codes() -> None:
    p = build_parser()
    a = p.parse_args(
        ["--permission-mode", "dontAsk", "--allowedTools", "Bash(git log:*) Edit", "Read",
         "--disallowedTools", "Write", "--add-dir", "x", "y", "--allowed-tools", "Grep"]
    )  # fmt: skip
    assert a.mode == "dontAsk" and a.allowed_tools == ["Bash(git log:*) Edit", "Read", "Grep"]
    assert a.disallowed_tools == ["Write"] and a.add_dir == ["x", "y"]
    assert p.parse_args(["--mode", "plan"]).mode == "plan"  # the old name stays
    assert p.parse_args(["--permission-mode", "manual"]).mode == "manual"
    with pytest.raises(UsageError):
        p.parse_args(["--permission-mode", "auto"])  # Claude Code's classifier mode: not speculate's
    assert "dontAsk" in p.format_help() and "--disallowedTools" in p.format_help()
    from speculate.repl.commands import HELP, MODES

    assert "dontAsk" in MODES and all(m in HELP for m in MODES)  # /mode takes and lists every mode


def permissions(argv: list[str], root: Path, **kw: bool) -> Permissions:
    args = build_parser().parse_args(argv)
    return _permissions(args, root, own=kw.get("own", False), demo=kw.get("demo", False))


def test_the_starting_mode_rules_and_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal: no question
    root = project(tmp_path, {"permissions": {"defaultMode": "plan", "allow": ["Bash"]}})
    p = permissions([], root)
    assert (p.mode, p.from_settings, p.trusted) == ("plan", True, False)
    p = permissions(["--mode", "acceptEdits", "--allowedTools", "Bash(git log:*),Edit", "--add-dir",
                     str(tmp_path), "nowhere"], root)  # fmt: skip
    assert (p.mode, p.from_settings) == ("acceptEdits", False)
    assert p.allow == ["Bash(git log:*)", "Edit"]
    assert p.add_dirs == [str(tmp_path), str(Path("nowhere").resolve())]
    assert any("--add-dir" in n and "no such directory" in n for n in p.notes)
    assert permissions(["--permission-mode", "manual"], root).mode == "default"
    # A demo project speculate made is its own: trusted, and the demo's mode where nothing else says.
    p = permissions([], tmp_path / "empty", own=True, demo=True)
    assert (p.mode, p.trusted) == ("acceptEdits", True)
    assert not is_trusted(tmp_path / "empty")  # stated for this run, not recorded


def test_the_question_records_a_yes_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "cfg" / ".claude.json"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config.parent))
    proj = tmp_path / "proj"
    proj.mkdir()
    said: list[str] = []
    assert not ask_trust(proj, 2, read=lambda q: "n", write=said.append)
    assert not config.exists() and "not trusted" in said[-1]
    assert "2 permission entries" in said[0] and str(proj) in said[0]

    def eof(q: str) -> str:
        raise EOFError

    assert not ask_trust(proj, 1, read=eof, write=said.append) and not config.exists()
    assert ask_trust(proj, 1, read=lambda q: "y", write=said.append)
    assert is_trusted(proj) and "hasTrustDialogAccepted" in said[-1] and str(config) in said[-1]


@pytest.mark.slow
def test_line_mode_states_the_untrusted_workspace_and_takes_dont_ask(tmp_path: Path) -> None:
    root = project(tmp_path, {"permissions": {"allow": ["Bash(git *)"], "defaultMode": "plan"}})
    home = tmp_path / "home"
    home.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "speculate.cli", "repl", str(root), "--no-spec", "--disallowedTools", "Grep"],
        input="/mode dontAsk\n/mode\n/quit\n",
        text=True,
        capture_output=True,
        cwd=REPO,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "SPECULATE_HISTORY": str(tmp_path / "h")},
    )
    assert r.returncode == 0, r.stderr
    assert "mode plan (the settings' defaultMode)" in r.stdout
    assert (
        "note: Ignoring 1 permissions.allow entry from .claude/settings.json: this workspace has not been "
        "trusted." in r.stdout
    )
    assert f'projects["{root}"].hasTrustDialogAccepted: true in {home / ".claude.json"}' in r.stdout
    assert "permission mode dontAsk" in r.stdout and "mode is dontAsk" in r.stdout
    assert not (home / ".claude.json").exists()  # not a terminal: nothing asked, nothing recorded


@pytest.mark.slow
@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("answer", ["y", "n"])
def test_the_repl_asks_once_on_a_terminal(tmp_path: Path, answer: str) -> None:
    from tests.repl.tmuxkit import Term

    root = project(tmp_path, {"permissions": {"allow": ["Bash(git *)", "Edit"]}})
    config = tmp_path / "cfg" / ".claude.json"
    t = Term()
    try:
        t.start(
            f"CLAUDE_CONFIG_DIR={config.parent} SPECULATE_HISTORY={tmp_path / 'history'} {sys.executable} "
            f"-m speculate.cli repl {root} --no-spec; echo EXIT=$?; sleep 60"
        )
        t.wait(lambda: "Trust this folder? [y/n]" in t.screen(), "the trust question")
        assert "Do you trust the files in this folder?" in t.scrollback()
        assert "2 permission entries" in t.scrollback()
        t.type(answer)
        t.keys("Enter")
        t.wait(lambda: "Tab takes the grey prediction" in t.scrollback(), "the REPL")
        t.wait(lambda: "speculation off" in t.toolbar(), "the prompt's toolbar")
        if answer == "y":
            data = json.loads(config.read_text())
            assert data["projects"][str(root)] == {"hasTrustDialogAccepted": True}
            assert "note: Ignoring" not in t.scrollback()
        else:
            assert not config.exists() and "note: Ignoring 2 permissions.allow entries" in t.scrollback()
        t.type("/quit")
        t.keys("Enter")
        t.wait(lambda: "EXIT=0" in t.screen(), "the exit")
        time.sleep(0.1)
    finally:
        t.close()
