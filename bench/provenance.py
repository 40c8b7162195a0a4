"""Where a run came from, in its summary.json: the commit and whether the tree was clean, the versions of
what ran it, the machine and how loaded it was, and the full command line and settings.

A result nobody can trace to a commit and a command cannot be checked; ``python -m bench.headline`` refuses
to keep a run whose provenance says it cannot be (bench/headline.py).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shlex
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("speculate", "anthropic", "pydantic", "trio", "httpx2")


def git(*args: str, cwd: Path = ROOT, strip: bool = True) -> str | None:
    """A git command's stdout, or None if git is missing or it failed."""
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return p.stdout.strip() if strip else p.stdout


def source_state(cwd: Path = ROOT) -> dict[str, Any]:
    """The commit checked out and the changes on top of it (tracked or untracked, ignored files aside)."""
    commit = git("rev-parse", "HEAD", cwd=cwd)
    status = git("status", "--porcelain", cwd=cwd, strip=False)  # "XY path": the leading space matters
    changed = [line[3:] for line in (status or "").splitlines() if line.strip()]
    return {
        "commit": commit,
        "branch": git("rev-parse", "--abbrev-ref", "HEAD", cwd=cwd),
        "dirty": None if status is None else bool(changed),
        "dirty_paths": changed[:20],
    }


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (how busy the machine was)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def settings(cfg: Any) -> dict[str, Any]:
    """Every field of the run's config, as JSON-ready values (scenarios by name, conditions by their fields)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if f.name == "scenarios":
            v = [s.name for s in v]
        elif f.name == "conditions":
            v = [{"label": c.label, **{k: _plain(x) for k, x in dataclasses.asdict(c).items()}} for c in v]
        out[f.name] = _plain(v)
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {k: _plain(x) for k, x in dataclasses.asdict(v).items()}
    return v if isinstance(v, str | int | float | bool | type(None)) else repr(v)


def start(argv: list[str], cfg: Any) -> dict[str, Any]:
    """Provenance as the run starts (``finish`` adds the end)."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        **source_state(),
        "command": shlex.join(["speculate", "bench", *argv]),
        "argv": list(argv),
        "cwd": os.getcwd(),
        "versions": {
            "python": platform.python_version(),
            **{p: _version(p) for p in PACKAGES},
            "kernel": platform.release(),
            "os": platform.platform(),
        },
        "machine": {
            "hostname_hash": _short_hash(platform.node()),
            "cpus": os.cpu_count(),
            "cpus_usable": affinity,
            "cpu_model": _cpu_model(),
            "memory_gib": _memory_gib(),
            "load_at_start": load(),
        },
        "settings": settings(cfg),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def finish(prov: dict[str, Any]) -> dict[str, Any]:
    prov["machine"]["load_at_end"] = load()
    prov["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return prov


def _short_hash(s: str) -> str:
    import hashlib

    return hashlib.sha256(s.encode()).hexdigest()[:12]  # which machine, without publishing its name
