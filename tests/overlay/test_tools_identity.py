"""The Edit and Write tools leave a file as Claude Code's own Edit and Write leave it (#34 item 3), live and
accepted from a fork.

Claude Code 2.1.332 (strace of ``claude -p``) writes ``<name>.tmp.<pid>.<hex>`` beside the file
(``O_CREAT|O_EXCL``, the file's mode), writes, ``fchmod``s it to the old mode, ``fsync``s it and renames it
over the file: a new inode, so the other hard links keep the old bytes, user xattrs and the ACL are gone,
and the owner is whoever runs it (root: root); the mode stays. The test runs the real CLI against the
simulator, our tools live on an identical tree, and our tools in a fork that is then accepted, and
compares what each left (skipped where the CLI is not installed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from overlayfs.view import Overlay
from speculate import FileSystem
from speculate.fs import LocalFS, LocalShell
from speculate.sim import SimServer
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario_yaml import parse_scenario
from speculate.tools.base import ToolContext
from speculate.tools.edit import Edit, EditInput
from speculate.tools.write import Write, WriteInput

FILES = {"a.txt": "alpha\nline two\n", "b.txt": "one\ntwo\n"}


def make(root: Path, out: Path) -> dict[str, int]:
    root.mkdir(parents=True)
    out.mkdir(parents=True)
    for name, text in FILES.items():
        f = root / name
        f.write_text(text)
        os.link(f, root / f"{name}.link")
        os.link(f, out / f"{name}.out")
        os.setxattr(f, "user.x", b"1")
        subprocess.run(["setfacl", "-m", "u:65534:rw", f], check=True)
        if os.geteuid() == 0:
            os.chown(f, 1000, 1000)
        f.chmod(0o640)
    return {name: (root / name).stat().st_ino for name in FILES}


def describe(root: Path, out: Path, before: dict[str, int]) -> dict[str, object]:
    desc: dict[str, object] = {}
    for name in FILES:
        f = root / name
        st = f.stat()
        desc[name] = {
            "inode kept": st.st_ino == before[name],
            "links": st.st_nlink,
            "content": hashlib.sha256(f.read_bytes()).hexdigest(),
            "link content": (root / f"{name}.link").read_text(),
            "outside content": (out / f"{name}.out").read_text(),
            "xattrs": sorted(n for n in os.listxattr(f) if n.startswith("user.")),
            "acl": subprocess.run(["getfacl", "-cp", f], capture_output=True, text=True).stdout,
            "owner": (st.st_uid, st.st_gid),
            "mode": oct(st.st_mode),
        }
    return desc


def run_claude_code(binary: Path, base: Path) -> dict[str, object]:
    root, out = base / "proj", base / "out"
    before = make(root, out)
    (root / ".claude").mkdir()
    (root / ".claude/settings.json").write_text(json.dumps({"permissions": {"allow": ["Edit", "Write"]}}))
    steps = [
        {"Read": {"file_path": str(root / "a.txt")}},
        {"Edit": {"file_path": str(root / "a.txt"), "old_string": "alpha", "new_string": "beta"}},
        {"Read": {"file_path": str(root / "b.txt")}},
        {"Write": {"file_path": str(root / "b.txt"), "content": "three\n"}},
    ]
    scenario = {
        "name": "identity",
        "turns": [
            {
                "prompt": "go",
                "steps": [{"tools": [s]} for s in steps] + [{"text": "done"}],
                "suggestion": None,
            }
        ],
    }
    home = base / "home"
    home.mkdir()
    (home / ".claude.json").write_text(
        json.dumps({"projects": {str(root): {"hasTrustDialogAccepted": True}}})
    )
    cc = ClaudeCode(binary, home=home)
    with SimServer([parse_scenario(json.dumps(scenario))], seed=0, time_scale=0.01) as sim:
        p = subprocess.run(
            [str(cc.binary), "-p", "--output-format", "json", "--permission-mode", "acceptEdits", "--", "go"],
            cwd=root,
            env=cc.env(sim.base_url),
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert p.returncode == 0, p.stderr[-2000:]
    assert (root / "a.txt").read_text() == "beta\nline two\n", p.stdout[-2000:]
    assert (root / "b.txt").read_text() == "three\n", p.stdout[-2000:]
    return describe(root, out, before)


def run_ours(fs: FileSystem, root: Path, spill: Path) -> None:
    ctx = ToolContext(fs=fs, shell=LocalShell(root), spill_dir=spill)
    Edit().run(EditInput(file_path=str(root / "a.txt"), old_string="alpha", new_string="beta"), ctx)
    Write().run(WriteInput(file_path=str(root / "b.txt"), content="three\n"), ctx)


def test_edit_and_write_leave_files_as_claude_code_does(tmp_path: Path, state_dir: Path) -> None:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    if shutil.which("setfacl") is None:
        pytest.skip("setfacl is not installed (the acl package; scripts/setup.sh installs it)")
    try:
        os.setxattr(tmp_path, "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs on {tmp_path}: {e}")
    os.chmod(tmp_path, 0o755)
    claude = run_claude_code(binary, tmp_path / "cc")

    live_root, live_out = tmp_path / "live/proj", tmp_path / "live/out"
    before = make(live_root, live_out)
    run_ours(LocalFS(live_root), live_root, tmp_path / "spill")
    assert describe(live_root, live_out, before) == claude

    fork_root, fork_out = tmp_path / "fork/proj", tmp_path / "fork/out"
    before = make(fork_root, fork_out)
    ov = Overlay(fork_root)
    run_ours(ov, fork_root, tmp_path / "spill")
    assert ov.promote().ok
    assert describe(fork_root, fork_out, before) == claude
