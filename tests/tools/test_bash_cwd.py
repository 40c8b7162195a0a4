"""The Bash tool's working directory persists from call to call, as Claude Code 2.1.332's does: a command that
exits 0 leaves the next one where it ended; a subshell's or a pipeline's ``cd`` does not count; one that ends
outside the project (and its additional working directories) resets to the project root with Claude Code's
note; a directory that is gone is not run in. The last test runs the same calls under the real Claude Code.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from speculate.fs import LocalFS, LocalShell
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario_yaml import parse_scenario
from speculate.sim.server import SimServer
from speculate.tools.base import ShellDir, ToolContext, ToolResult

Call = Callable[[str, dict[str, Any], ToolContext], ToolResult]


def bash(call: Call, ctx: ToolContext, command: str) -> str:
    res = call("Bash", {"command": command}, ctx)
    return ("ERROR " if res.is_error else "") + str(res.content)


@pytest.fixture
def tree(project: Path) -> Path:
    (project / "sub" / "deep").mkdir(parents=True)
    return project


def test_cd_persists_to_the_next_call(ctx: ToolContext, tree: Path, call: Call) -> None:
    assert ctx.cwd == tree  # the project root until a cd
    assert bash(call, ctx, "cd sub") == "(no output)"
    assert ctx.cwd == tree / "sub"
    assert bash(call, ctx, "pwd") == str(tree / "sub")
    assert bash(call, ctx, "cd deep && touch here.txt && ls") == "here.txt"
    assert (tree / "sub" / "deep" / "here.txt").is_file()
    assert bash(call, ctx, "cd ..") == "(no output)"
    assert bash(call, ctx, "pwd") == str(tree / "sub")


def test_subshells_and_pipelines_do_not_move_it(ctx: ToolContext, tree: Path, call: Call) -> None:
    assert bash(call, ctx, "(cd sub)") == "(no output)"
    assert bash(call, ctx, "cd sub | cat") == "(no output)"
    assert ctx.cwd == tree
    assert bash(call, ctx, "{ cd sub; }") == "(no output)"  # a group runs in the shell itself
    assert bash(call, ctx, "pwd") == str(tree / "sub")


def test_only_a_command_that_exits_0_moves_it(ctx: ToolContext, tree: Path, call: Call) -> None:
    assert bash(call, ctx, "cd nowhere").startswith("ERROR bash: line 1: cd: nowhere: No such file")
    assert bash(call, ctx, "cd sub; false") == "ERROR Exit code 1"
    assert ctx.cwd == tree
    assert bash(call, ctx, "cd sub; exit 0") == "(no output)"  # the shell is gone before it is asked
    assert ctx.cwd == tree
    assert bash(call, ctx, "cd sub && false || true") == "(no output)"
    assert ctx.cwd == tree / "sub"


def test_outside_the_project_resets_to_the_root_with_a_note(ctx: ToolContext, tree: Path, call: Call) -> None:
    assert bash(call, ctx, "cd sub") == "(no output)"
    assert bash(call, ctx, "cd /tmp && echo hi; echo warn >&2") == f"hi\nwarn\nShell cwd was reset to {tree}"
    assert ctx.cwd == tree
    assert bash(call, ctx, "cd ..") == f"Shell cwd was reset to {tree}"
    assert bash(call, ctx, "pwd") == str(tree)
    # A failing command records nothing, so there is nothing to reset and no note.
    assert bash(call, ctx, "cd /tmp; echo out; exit 3") == "ERROR out\nExit code 3"
    assert ctx.cwd == tree


def test_additional_working_directories_keep_it(tree: Path, tmp_path: Path, call: Call) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    ctx = ToolContext(
        fs=LocalFS(tree),
        shell=LocalShell(tree),
        spill_dir=tmp_path / "spill",
        shell_dir=ShellDir(working_dirs=(extra,)),
    )
    assert bash(call, ctx, f"cd {extra}") == "(no output)"
    assert bash(call, ctx, "pwd") == str(extra)
    assert bash(call, ctx, "cd /tmp") == f"Shell cwd was reset to {tree}"


def test_symlinks_are_followed_to_the_physical_directory(ctx: ToolContext, tree: Path, call: Call) -> None:
    (tree / "link").symlink_to("sub/deep")
    assert bash(call, ctx, "cd link") == "(no output)"
    assert bash(call, ctx, "pwd -L") == str(tree / "sub" / "deep")  # pwd -P, as Claude Code records it


def test_a_directory_that_is_gone_is_not_run_in(ctx: ToolContext, tree: Path, call: Call) -> None:
    assert bash(call, ctx, "mkdir gone && cd gone") == "(no output)"
    assert bash(call, ctx, "rmdir ../gone") == "(no output)"
    assert not (tree / "gone").exists()
    assert bash(call, ctx, "touch x; pwd") == (
        f'ERROR Working directory "{tree / "gone"}" no longer exists, so this command was not run. '
        f'Shell cwd recovered to "{tree}": re-issue the command if it still makes sense there.'
    )
    assert not (tree / "x").exists()
    assert bash(call, ctx, "pwd") == str(tree)


def test_environment_does_not_persist(ctx: ToolContext, call: Call) -> None:
    assert bash(call, ctx, "export FOO=1; BAR=2") == "(no output)"
    assert bash(call, ctx, "echo foo=$FOO bar=$BAR") == "foo= bar="


def test_the_side_channel_stays_out_of_the_command(ctx: ToolContext, tree: Path, call: Call) -> None:
    # Its output is exactly the command's, whatever it quotes, redirects or leaves unterminated; it sees
    # no positional parameters and no descriptor beyond its three (ls adds its own directory's, 3).
    assert bash(call, ctx, "printf 'a\\0b'; printf 'no newline' >&2") == "a\x00b\nno newline"
    assert bash(call, ctx, 'echo "it\'s" \'$1\' $# "[$1]"') == "it's $1 0 []"
    assert bash(call, ctx, "ls /proc/self/fd | xargs") == "0 1 2 3"
    assert bash(call, ctx, "exec 2>/dev/null; exec 1>&-; cd sub") == "(no output)"
    assert ctx.cwd == tree / "sub"
    assert bash(call, ctx, "mkdir -p 'a\nb' && cd 'a\nb'") == "(no output)"  # a name with a newline
    assert ctx.cwd == tree / "sub" / "a\nb"


def test_a_run_without_cwd_is_unchanged(tree: Path) -> None:
    """Hooks run through the same shell: in the project root, their cd reported nowhere."""
    res = trio.run(lambda: LocalShell(tree).run("cd sub && pwd", timeout=10))
    assert res.stdout == f"{tree / 'sub'}\n" and res.cwd is None
    res = trio.run(lambda: LocalShell(tree).run("cd deep && pwd", timeout=10, cwd=tree / "sub"))
    assert res.stdout == f"{tree / 'sub' / 'deep'}\n" and res.cwd == str(tree / "sub" / "deep")


# -- the same calls under Claude Code ---------------------------------------------------------------------

# Each call's result must read the same in both, the project's and the extra directory's paths aside.
# Not compared: how a call that removed its own directory reads (Claude Code's trailing `pwd -P` fails
# there and its error becomes the result, "Exit code 1 / pwd: error retrieving current directory").
CALLS = [
    "cd sub",
    "pwd",
    "(cd deep); pwd",
    "cd deep | cat; pwd",
    "{ cd deep; }",
    "pwd",
    "cd ..; pwd",
    "cd /tmp && echo hi",
    "pwd",
    "cd sub; false",
    "pwd",
    "cd sub; exit 0",
    "pwd",
    "cd sub && false || true",
    "pwd",
    "cd ..",
    "cd link",
    "pwd",
    "cd {extra}",
    "pwd",
    "cd {root}",
    "export FOO=1",
    "echo foo=$FOO",
    "mkdir gone && cd gone",
    "python3 -c \"import os; os.rmdir('{root}/gone')\"",
    "pwd",
    "pwd",
]
NOT_COMPARED = {CALLS.index("python3 -c \"import os; os.rmdir('{root}/gone')\"")}


def make_tree(base: Path) -> tuple[Path, Path]:
    root, extra = base / "proj", base / "extra"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "link").symlink_to("sub/deep")
    extra.mkdir()
    return root, extra


def normalized(text: str, is_error: bool, root: Path, extra: Path) -> tuple[bool, list[str]]:
    """The result's lines, in order but for "Exit code N" (Claude Code puts it first, speculate last),
    with the paths and the no-output placeholder spelled alike."""
    text = text.replace(str(extra), "{extra}").replace(str(root), "{root}")
    text = text.replace("(Bash completed with no output)", "(no output)")
    lines = text.splitlines()
    return is_error, sorted(ln for ln in lines if ln.startswith("Exit code")) + [
        ln for ln in lines if not ln.startswith("Exit code")
    ]


def claude_code_results(cc_bin: Path, base: Path) -> list[tuple[bool, list[str]]]:
    root, extra = make_tree(base)
    home = base / "home"
    home.mkdir()
    (root / ".claude").mkdir()
    settings = {"permissions": {"allow": ["Bash"], "additionalDirectories": [str(extra)]}}
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    trusted = {"projects": {str(root): {"hasTrustDialogAccepted": True}}}
    (home / ".claude.json").write_text(json.dumps(trusted))
    cmds = [c.replace("{root}", str(root)).replace("{extra}", str(extra)) for c in CALLS]
    steps = "".join(f"      - tools:\n          - Bash: {{command: {json.dumps(c)}}}\n" for c in cmds)
    scen = f'name: bash-cwd\nturns:\n  - prompt: "go"\n    steps:\n{steps}      - text: "done"\n'
    scen += "    suggestion: null\n"
    cc = ClaudeCode(cc_bin, home=home)
    with SimServer([parse_scenario(scen)], seed=0, time_scale=0.01) as sim:
        args = [str(cc_bin), "-p", "--output-format", "stream-json", "--verbose", "--", "go"]
        proc = subprocess.run(args, cwd=root, env=cc.env(sim.base_url), capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)  # fmt: skip
    results = []
    for line in proc.stdout.splitlines():
        e = json.loads(line)
        for b in (e.get("message") or {}).get("content") or [] if e.get("type") == "user" else []:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                c = b["content"] if isinstance(b["content"], str) else b["content"][0]["text"]
                results.append(normalized(c, bool(b.get("is_error")), root, extra))
    assert len(results) == len(CALLS), (proc.stderr[-2000:], proc.stdout[-2000:])
    return results


def speculate_results(base: Path, call: Call) -> list[tuple[bool, list[str]]]:
    root, extra = make_tree(base)
    ctx = ToolContext(
        fs=LocalFS(root),
        shell=LocalShell(root),
        spill_dir=base / "spill",
        shell_dir=ShellDir(working_dirs=(extra,)),
    )
    out = []
    for c in CALLS:
        res = call("Bash", {"command": c.replace("{root}", str(root)).replace("{extra}", str(extra))}, ctx)
        out.append(normalized(str(res.content), res.is_error, root, extra))
    return out


@pytest.mark.slow
def test_as_claude_code_does(tmp_path: Path, call: Call) -> None:
    found = ClaudeCode.locate()
    if isinstance(found, str):
        pytest.skip(found)
    theirs = claude_code_results(found, tmp_path / "cc")
    ours = speculate_results(tmp_path / "sp", call)
    for i, (c, t, o) in enumerate(zip(CALLS, theirs, ours, strict=True)):
        if i not in NOT_COMPARED:
            assert o == t, f"call {i} {c!r}: Claude Code {t}, speculate {o}"
    # What the comparison is about, seen in Claude Code's own results.
    assert theirs[CALLS.index("cd /tmp && echo hi")] == (False, ["hi", "Shell cwd was reset to {root}"])
    assert theirs[CALLS.index("cd {extra}") + 1] == (False, ["{extra}"])
