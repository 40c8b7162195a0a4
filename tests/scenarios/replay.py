"""Replaying a bundled scenario's scripted tool calls for real on its workspace (tests/scenarios): a small
local executor with the tools' semantics (Read, Write, Edit, Glob, Grep, Bash), or the agent's own tools,
each call checked against what the script says it returns."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

# Bash commands expected to fail, by (scenario, command): anything else must exit 0. pytest runs are not
# listed: their expected outcome is read from the text of the step after them ("N failed" or not).
EXPECTED_EXIT: dict[tuple[str, str], int] = {
    ("add-low-stock-command", "git push"): 128,  # no remote configured: the scenario's text says so
}
SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".venv", "node_modules"}
TEST_RUN = re.compile(r"\bpytest\b|\bmake test\b")
COUNT_RE = re.compile(r"\b(\d+) (passed|failed)\b")
NO_MATCH = ("No matches found", "No files found")


def _bash_env() -> dict[str, str]:
    """Overrides for a command's environment: isolated from this pytest run, with a fixed git identity."""
    return {
        # `python` in a command means an interpreter with pytest: this one.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": "",
        "PYTEST_ADDOPTS": "",
        "GIT_AUTHOR_NAME": "Sim User",
        "GIT_AUTHOR_EMAIL": "sim@example.invalid",
        "GIT_COMMITTER_NAME": "Sim User",
        "GIT_COMMITTER_EMAIL": "sim@example.invalid",
    }


def _project_path(root: Path, raw: str) -> Path:
    p = Path(os.path.normpath(Path(raw) if os.path.isabs(raw) else root / raw))
    assert p == root or root in p.parents, f"path {raw!r} leaves the project root"
    return p


def _subst(value: Any, root: Path) -> Any:
    if isinstance(value, str):
        return value.replace("{root}", str(root))
    if isinstance(value, list):
        return [_subst(v, root) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, root) for k, v in value.items()}
    return value


@dataclass
class Replayer:
    """Runs scripted tool calls on a real directory with the semantics of the agent's tools."""

    root: Path
    scenario: str
    read: set[Path] = field(default_factory=set)

    def path(self, raw: str) -> Path:
        return _project_path(self.root, raw)

    def run(self, name: str, inp: dict[str, Any]) -> tuple[int, str]:
        if name == "Bash":
            return self.do_bash(**inp)
        return 0, getattr(self, f"do_{name.lower()}")(**inp)

    def do_read(self, file_path: str, offset: int = 1, limit: int | None = None) -> str:
        p = self.path(file_path)
        assert p.is_file(), f"Read {file_path}: no such file"
        lines = p.read_text(encoding="utf-8").splitlines()
        assert 1 <= offset <= max(1, len(lines)), f"Read {file_path}: offset {offset} past {len(lines)} lines"
        end = None if limit is None else offset - 1 + limit
        return "\n".join(lines[offset - 1 : end])

    def do_write(self, file_path: str, content: str) -> str:
        p = self.path(file_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
        return f"wrote {p}"

    def do_edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        p = self.path(file_path)
        assert p.is_file(), f"Edit {file_path}: no such file"
        assert old_string != new_string, f"Edit {file_path}: old_string equals new_string"
        text = p.read_text(encoding="utf-8")
        n = text.count(old_string)
        if replace_all:
            assert n >= 1, f"Edit {file_path}: old_string not found: {old_string!r}"
        else:
            assert n == 1, f"Edit {file_path}: old_string found {n} times (need exactly 1): {old_string!r}"
        p.write_text(text.replace(old_string, new_string), encoding="utf-8")
        return f"edited {p}"

    def _files(self, base: Path) -> list[Path]:
        if base.is_file():
            return [base]
        out = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            out.extend(Path(dirpath) / f for f in sorted(filenames))
        return out

    def do_glob(self, pattern: str, path: str | None = None) -> str:
        base = self.path(path) if path else self.root
        hits = [p for p in base.glob(pattern) if p.is_file() and not SKIP_DIRS & set(p.parts)]
        assert hits, f"Glob {pattern!r} matched nothing"
        return "\n".join(str(p) for p in sorted(hits))

    def do_grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        output_mode: str = "files_with_matches",
        case_insensitive: bool = False,
        head_limit: int | None = None,
    ) -> str:
        rx = re.compile(pattern, re.IGNORECASE if case_insensitive else 0)
        base = self.path(path) if path else self.root
        assert base.exists(), f"Grep path {path!r} does not exist"
        lines: list[str] = []
        for f in self._files(base):
            if (
                glob
                and not fnmatch.fnmatch(f.name, glob)
                and not fnmatch.fnmatch(str(f.relative_to(self.root)), glob)
            ):
                continue
            data = f.read_bytes()
            if b"\0" in data[:8192]:
                continue
            hits = [
                (n, line)
                for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1)
                if rx.search(line)
            ]
            if not hits:
                continue
            if output_mode == "content":
                lines.extend(f"{f}:{n}:{line}" for n, line in hits)
            elif output_mode == "count":
                lines.append(f"{f}:{len(hits)}")
            else:
                lines.append(str(f))
        return "\n".join(lines[:head_limit] if head_limit else lines) or NO_MATCH[0]

    def do_bash(
        self, command: str, timeout_ms: int = 120_000, description: str | None = None
    ) -> tuple[int, str]:
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=self.root,
            env={**os.environ, **_bash_env()},
            capture_output=True,
            text=True,
            timeout=timeout_ms / 1000,
        )
        return proc.returncode, proc.stdout + proc.stderr


class ToolsReplayer:
    """Runs scripted calls through the agent's real tools on LocalFS / LocalShell."""

    def __init__(self, root: Path, scenario: str) -> None:
        from speculate.fs import LocalFS, LocalShell
        from speculate.tools import ToolContext, tools_by_name

        self.root, self.scenario = root, scenario
        self.read: set[Path] = set()
        self.tools = tools_by_name()
        env = _bash_env()
        self.ctx = ToolContext(
            fs=LocalFS(root), shell=LocalShell(root, env=env), spill_dir=root.parent / f"{root.name}-spill"
        )

    def run(self, name: str, inp: dict[str, Any]) -> tuple[int, str]:
        from speculate.tools import ToolError

        tool = self.tools[name]
        try:
            result = trio.run(tool.call, tool.parse(inp), self.ctx)
        except ToolError as e:
            raise AssertionError(f"{name} {inp}: {e}") from None
        if not result.is_error:
            return 0, result.content
        code = re.search(r"Exit code (\d+)$", result.content) if name == "Bash" else None
        assert code, f"{name} {inp} failed: {result.content}"
        return int(code.group(1)), result.content


def replay_steps(rp: Replayer | ToolsReplayer, steps: list[dict[str, Any]], where: str) -> None:
    for s, step in enumerate(steps):
        next_text = (steps[s + 1].get("text") or "") if s + 1 < len(steps) else ""
        for call in step.get("tools") or []:
            ((name, inp),) = call.items()
            inp = _subst(inp, rp.root)
            label = f"{where} step {s} {name}"
            path = _project_path(rp.root, inp["file_path"]) if "file_path" in inp else None
            # As with the real agent, a file is edited or overwritten only after it was Read.
            if name == "Edit" or (name == "Write" and path is not None and path.exists()):
                assert path in rp.read, f"{label}: {path} is changed without an earlier Read"
            code, output = rp.run(name, inp)
            if name in ("Read", "Write") and path is not None:
                rp.read.add(path)
            if name != "Bash":
                assert code == 0, f"{label}: {output}"
                if name == "Grep" and output in NO_MATCH:
                    assert re.search(r"\b(no|nothing)\b", next_text, re.IGNORECASE), (
                        f"{label}: Grep {inp['pattern']!r} found nothing but the next text does not say so"
                    )
                continue
            counts = COUNT_RE.findall(next_text) if TEST_RUN.search(inp["command"]) else []
            want = EXPECTED_EXIT.get((rp.scenario, inp["command"]), 0)
            if any(kind == "failed" for _, kind in counts):
                want = 1
            want = (step.get("expect") or {}).get("exit_code", want)  # a step's own expectation wins
            assert code == want, f"{label}: `{inp['command']}` exited {code}, expected {want}:\n{output}"
            for n, kind in counts:
                assert re.search(rf"\b{n} {kind}\b", output), (
                    f"{label}: the next text says '{n} {kind}' but pytest printed:\n{output[-800:]}"
                )
