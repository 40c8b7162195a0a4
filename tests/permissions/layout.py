"""A configuration's scratch directories, the same for both agents: ``{base}/proj`` (a git repository with a
few files and the configuration's settings), ``{base}/home`` (the scratch HOME: ``.claude.json`` marking the
project trusted, a secret, fake credentials, shell profiles), ``{base}/side`` (a sibling directory outside
the project) and ``{base}/outside.txt``; the scripted turn (:func:`scenario`); and the snapshot of what
the calls changed (:func:`snapshot`, :func:`changes`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .cases import Config

PROJECT_FILES = {
    "a.txt": "alpha\n",
    "b.txt": "beta\n",
    "notes.md": "# notes\n",
    "secret.txt": "s3cret\n",
    "x.py": 'open("py-out.txt", "w").write("py\\n")\n',
    "package.json": '{"name": "p", "version": "1.0.0", "private": true}\n',
}
HOME_FILES = {
    "secret.txt": "home secret\n",
    ".aws/credentials": "[default]\naws_access_key_id = FAKE\n",
    ".ssh/authorized_keys": "",
    ".bashrc": "# bashrc\n",
    ".gitconfig": "[user]\n\tname = t\n\temail = t@example.com\n",
}
HOOK = r"""
import json, sys
p = json.load(sys.stdin)
rules = json.load(open(sys.argv[1]))
blob = json.dumps(p.get("tool_input") or {})
for contains, decision in rules:
    if contains in blob:
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": decision, "permissionDecisionReason": "the hook says " + decision}}))
        break
"""
# Written by the agents themselves, not by a call: left out of the comparison.
NOISE_HOME = (".claude", ".claude.json", ".cache", ".npm", ".local", ".config/configstore")
# In .git only whether these changed is compared (a commit's hashes differ run to run); objects and logs
# follow from refs and are left out, as is the index, which read-only commands refresh.
GIT_SKIP = ("objects", "logs", "index")
GIT_FULL = ("hooks", "config", "info")


def fill(value: Any, base: Path) -> Any:
    """``value`` with the placeholders replaced for the side whose directory is ``base``."""
    if isinstance(value, str):
        root, home, side = base / "proj", base / "home", base / "side"
        return (
            value.replace("{root}", str(root))
            .replace("{home}", str(home))
            .replace("{side}", str(side))
            .replace("{base}", str(base))
        )
    if isinstance(value, dict):
        return {k: fill(v, base) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [fill(v, base) for v in value]
    return value


def settings(cfg: Config, base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"permissions": fill(cfg.permissions, base)} if cfg.permissions else {}
    if cfg.hooks:
        entries = []
        for i, rule in enumerate(cfg.hooks):
            policy = base / f"hook-{i}.json"
            policy.write_text(json.dumps([[rule.contains, rule.decision]]))
            cmd = f"{sys.executable} {base / 'hook.py'} {policy}"
            entries.append({"matcher": rule.matcher, "hooks": [{"type": "command", "command": cmd}]})
        (base / "hook.py").write_text(HOOK)
        out["hooks"] = {"PreToolUse": entries}
    return out


def make(cfg: Config, base: Path) -> None:
    """Create ``base``'s directories for ``cfg`` (``base`` must not exist yet)."""
    root, home = base / "proj", base / "home"
    files = {
        **{f"proj/{k}": v for k, v in PROJECT_FILES.items()},
        **{f"home/{k}": v for k, v in HOME_FILES.items()},
        "side/s.txt": "sibling\n",
        "outside.txt": "outside\n",
        **cfg.files,
    }
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fill(text, base))
    (root / ".claude").mkdir(exist_ok=True)
    (root / ".claude" / "settings.json").write_text(json.dumps(settings(cfg, base), indent=1))
    if cfg.local_permissions:
        local = {"permissions": fill(cfg.local_permissions, base)}
        (root / ".claude" / "settings.local.json").write_text(json.dumps(local))
    if cfg.user_permissions:
        (home / ".claude").mkdir(exist_ok=True)
        user = {"permissions": fill(cfg.user_permissions, base)}
        (home / ".claude" / "settings.json").write_text(json.dumps(user))
    if cfg.trusted:
        trust = {"projects": {str(root): {"hasTrustDialogAccepted": True}}}
        (home / ".claude.json").write_text(json.dumps(trust))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run([*git, *args], cwd=root, env=env, check=True, capture_output=True)


def scenario(cfg: Config, base: Path) -> str:
    """The scripted turn: one step per call, in order, then a closing text (JSON, which YAML reads)."""
    steps: list[dict[str, Any]] = [{"tools": [{c.tool: fill(c.input, base)}]} for c in cfg.calls]
    steps.append({"text": "done"})
    turn = {"prompt": "go", "steps": steps, "suggestion": None}
    return json.dumps({"name": f"permissions-{cfg.name}", "turns": [turn]})


def _skipped(rel: Path) -> bool:
    parts = rel.parts
    if parts[0] == "run" or parts[0].startswith("hook"):
        return True  # the harness's own files (the scenario, the agents' output, the hook and its policy)
    if parts[0] == "home" and len(parts) > 1:
        sub = "/".join(parts[1:])
        return any(sub == n or sub.startswith(n + "/") or sub.startswith(n + ".") for n in NOISE_HOME)
    if parts[:2] == ("proj", ".git") and len(parts) > 2:
        return parts[2] in GIT_SKIP
    return parts[-1] == "__pycache__" or "__pycache__" in parts


def _digest(path: Path, rel: Path, base: Path) -> str:
    if path.is_symlink():
        return "link " + os.readlink(path).replace(str(base), "{base}")
    if path.is_dir():
        return "dir"
    data = path.read_bytes().replace(str(base).encode(), b"{base}")
    if rel.parts[:2] == ("proj", ".git") and rel.parts[2] not in GIT_FULL:
        return "git " + hashlib.sha1(data).hexdigest()  # compared as changed or not (GIT_SKIP)
    head = data[:60].decode("utf-8", "replace").replace("\n", "\\n")
    return f"{hashlib.sha1(data).hexdigest()[:10]} {head}"


def snapshot(base: Path) -> dict[str, str]:
    """Every file, directory and link under ``base`` but the agents' own (NOISE_HOME, GIT_SKIP): path
    relative to ``base`` -> a digest of its content (the base path in it normalised)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(base)
            if _skipped(rel):
                if name in dirnames:
                    dirnames.remove(name)
                continue
            out[str(rel)] = _digest(path, rel, base)
    return out


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """What the run changed: path -> ``created <digest>``, ``modified <digest>`` or ``deleted``."""
    out = {}
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        shown = "" if new is None or new.startswith("git ") else f" {new}"
        out[path] = "deleted" if new is None else ("created" if old is None else "modified") + shown
    return out
