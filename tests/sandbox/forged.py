"""A command that forges the overlay's own markers, run in the sandbox and accepted (importable by uid 65534
with Debian's python3: no pytest here). See tests/sandbox/test_forged_markers.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Each line: set an xattr a reader could take for the layer's marker, then look at what the command sees.
FORGE = r"""
import os
def attempt(path, name):
    try:
        os.setxattr(path, name, b"y", follow_symlinks=False)
        return "set"
    except OSError as e:
        return f"refused {e.errno}"
open("made", "w").close()
for path, what in (("pkg/__init__.py", "whiteout"), ("dd", "opaque"), ("made", "whiteout"), (".", "opaque")):
    for ns in ("user", "trusted"):
        print(path, f"{ns}.overlay.{what}", attempt(path, f"{ns}.overlay.{what}"))
print("seen", os.path.exists("pkg/__init__.py"), os.listdir("dd"), os.path.exists("made"))
"""


def make_project(root: Path) -> None:
    for rel, text in {
        "pkg/__init__.py": "",
        "dd/real.txt": "real\n",
        "gone.txt": "gone\n",
        "old/x.txt": "x\n",
        "top.txt": "top\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def tree(root: Path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs)


def forge_and_accept(base: str, backend: str) -> dict[str, object]:
    """In ``base``: a project, a fork whose view deletes ``gone.txt`` and replaces ``old/`` (the layer's own
    markers), a sandboxed command that forges markers, then the fork accepted. What the command printed,
    the change list, and the project's tree after."""
    os.environ["SPECULATE_STATE_DIR"] = os.path.join(base, "state")
    from overlayfs import Overlay
    from overlayfs.sandbox import SandboxLimits, keep_view, run_sandboxed

    root = Path(base) / "proj"
    root.mkdir()
    make_project(root)
    ov = Overlay(lower=root, bound=SandboxLimits().layer_bound())  # as a fork's (fork_fs.fork_overlay)
    try:
        ov.unlink("gone.txt")
        ov.rmtree("old")
        ov.mkdir("old")
        ov.write_text("old/new.txt", "new\n")
        keep_view(ov, backend)
        r = run_sandboxed(ov, f"python3 -c '{FORGE}'", timeout=60, backend=backend)
        ov.close_sandbox()
        changes = sorted(f"{c.kind} {c.path}" for c in ov.changes())
        result = ov.promote()
        ok = bool(result.ok)
    finally:
        ov.discard()
    return {
        "exit": r.exit_code,
        "out": r.stdout + r.stderr,
        "changes": changes,
        "promoted": ok,
        "tree": tree(root),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(forge_and_accept(sys.argv[1], sys.argv[2])))
