"""The fixed environment a bench session's commands run in: the workspace's own interpreter with its test
dependencies, installed by the harness, and a PATH that does not depend on whoever runs the bench.

A workspace says what it needs the way its ecosystem does:

- Python (``pyproject.toml``): ``requires-python``, ``dependencies`` and the ``test`` extra. The harness makes
  a virtual environment for it once (cached under ``$SPECULATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/speculate``,
  else ``~/.cache/speculate``; keyed on the interpreter and the requirements) and installs them with pip.
  The project itself is not installed: each session has its own copy, and its tests find ``src`` by config.
- Node (``package.json``): ``engines.node`` is checked against the system's ``node``. Packages
  (``dependencies``/``devDependencies``) are refused with a clear error: no workspace needs them yet.

Everything else on PATH is the system's (``/usr/local/bin:/usr/bin:/bin``), so a caller's activated venv,
``PYTHONPATH`` or ``node_modules/.bin`` cannot change what a scenario's ``python -m pytest`` runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from overlayfs.sandbox.policy import TOOLCHAIN_ENV
from speculate.errors import SpeculateError

SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
# The caller's environment that would change which interpreter or packages a command finds: dropped (the
# sandbox passes these same names through, as the toolchain's own).
DROPPED_ENV = TOOLCHAIN_ENV
TEST_EXTRA = "test"


class ToolchainError(SpeculateError, RuntimeError):
    """A workspace's interpreter or test dependencies cannot be provided; the message names the workspace."""


@dataclass(frozen=True)
class Toolchain:
    path: str  # PATH for every command the session runs
    describe: str  # one line for the run's metadata, e.g. "python 3.11.7 venv …: pytest"

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": self.path}


def cache_dir() -> Path:
    if d := os.environ.get("SPECULATE_CACHE_DIR"):
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "speculate"


def system_toolchain() -> Toolchain:
    return Toolchain(":".join(SYSTEM_PATH), "system PATH only")


def workspace_toolchain(workspace: Path | None) -> Toolchain:
    """The toolchain for ``workspace`` (None: a scenario with no workspace gets the system PATH)."""
    if workspace is None:
        return system_toolchain()
    if (workspace / "pyproject.toml").is_file():
        return _python(workspace)
    if (workspace / "package.json").is_file():
        return _node(workspace)
    return system_toolchain()


def _python(workspace: Path) -> Toolchain:
    where = workspace / "pyproject.toml"
    try:
        project = tomllib.loads(where.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ToolchainError(f"{where}: cannot read it: {e}") from e
    requires = project.get("requires-python")
    if requires and not _satisfies(sys.version_info[:3], requires):
        raise ToolchainError(
            f"{where}: requires-python {requires!r}, but the bench runs Python "
            f"{'.'.join(map(str, sys.version_info[:3]))}"
        )
    reqs = sorted(
        {*project.get("dependencies", []), *project.get("optional-dependencies", {}).get(TEST_EXTRA, [])}
    )
    base = getattr(sys, "_base_executable", sys.executable)
    key = hashlib.sha256(json.dumps([base, sys.version, reqs]).encode()).hexdigest()[:12]
    env = cache_dir() / "bench-envs" / f"{workspace.name}-{key}"
    _ensure_venv(env, base, reqs, where)
    path = ":".join([str(env / "bin"), *SYSTEM_PATH])
    return Toolchain(path, f"python {sys.version.split()[0]} venv {env}: {', '.join(reqs) or 'no packages'}")


def _ensure_venv(env: Path, base: str, reqs: list[str], where: Path) -> None:
    """Build ``env`` once; concurrent benches wait on a lock, and a half-built env (a killed build) is rebuilt."""
    stamp = env / ".speculate-complete"
    if stamp.exists():
        return
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(env.with_name(env.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return
        shutil.rmtree(env, ignore_errors=True)
        steps = [("python -m venv", [base, "-m", "venv", str(env)])]
        if reqs:
            steps.append(
                (
                    f"pip install {' '.join(reqs)}",
                    [
                        str(env / "bin" / "python"),
                        "-m",
                        "pip",
                        "install",
                        "-q",
                        "--disable-pip-version-check",
                        *reqs,
                    ],
                )
            )
        for what, cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True, env=_clean_env())
            if r.returncode != 0:
                tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
                raise ToolchainError(
                    f"{where}: making its test environment in {env} failed: `{what}` exited "
                    f"{r.returncode}: {' | '.join(tail)}"
                )
        stamp.touch()


def _node(workspace: Path) -> Toolchain:
    where = workspace / "package.json"
    try:
        pkg = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ToolchainError(f"{where}: cannot read it: {e}") from e
    deps = sorted({*pkg.get("dependencies", {}), *pkg.get("devDependencies", {})})
    if deps:
        raise ToolchainError(
            f"{where}: declares packages ({', '.join(deps)}); the harness installs none for "
            "Node workspaces yet, so their tests could not run the same everywhere"
        )
    path = ":".join(SYSTEM_PATH)
    node = shutil.which("node", path=path)
    if node is None:
        raise ToolchainError(
            f"{where}: a Node workspace, but there is no `node` on {path} (scripts/setup.sh installs nodejs)"
        )
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    version = tuple(int(x) for x in re.findall(r"\d+", out)[:3])
    wanted = pkg.get("engines", {}).get("node")
    if wanted and not _satisfies(version, wanted):
        raise ToolchainError(f"{where}: engines.node {wanted!r}, but {node} is {out}")
    return Toolchain(path, f"node {out} ({node}): no packages")


def _satisfies(version: tuple[int, ...], spec: str) -> bool:
    """A version against a comma-separated ``>=``/``>``/``<=``/``<``/``==`` spec (enough for requires-python
    and engines.node, which is all the bundled workspaces use)."""
    ops = {">=": tuple.__ge__, ">": tuple.__gt__, "<=": tuple.__le__, "<": tuple.__lt__, "==": tuple.__eq__}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = re.fullmatch(r"(>=|<=|==|>|<)?\s*v?(\d+(?:\.\d+)*)(?:\.\*)?", part)
        if m is None:
            raise ToolchainError(f"version spec {spec!r}: cannot read {part!r} (use >=, >, <=, < or ==)")
        want = tuple(int(x) for x in m.group(2).split("."))
        if not ops[m.group(1) or "=="](version[: len(want)], want):
            return False
    return True


def _clean_env() -> dict[str, str]:
    drop = {*DROPPED_ENV, "PIP_REQUIRE_VIRTUALENV"}
    return {k: v for k, v in os.environ.items() if k not in drop} | {"PATH": ":".join(SYSTEM_PATH)}
