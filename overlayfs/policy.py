"""What acceptance lands: the rules promotion applies to what a speculation left in its upper layer, whatever
wrote it (the view, a mounted backend, a sandboxed command). See docs/security.md, "What acceptance lands".

- **Modes**: setuid and setgid bits never land. The sticky bit and write permission for others land only
  where the real entry of the same kind already had them (a rewrite keeps the user's own mode).
- **Extended attributes** (``security.capability``, ``security.*``, ``trusted.*``, ``user.*``): promotion
  copies bytes and the mode only, never xattrs, ownership or times.
- **Special files** (FIFOs, sockets, device nodes) are refused: a :class:`Conflict` naming the path, never a
  failed acceptance. Deleting one that the real tree has is allowed.
- **Symlinks** whose target resolves outside the project (absolute, through ``..``, or through another
  symlink, resolved as the kernel will once the acceptance has landed) are refused the same way; so is a
  directory replaced by such a symlink.
"""

from __future__ import annotations

import os
import stat as stat_mod

from overlayfs.changes import Change
from overlayfs.conflicts import Conflict
from overlayfs.merged import MAX_LINKS, Node, parent_of, root_node, step

_NEVER = stat_mod.S_ISUID | stat_mod.S_ISGID
_ONLY_KEPT = stat_mod.S_ISVTX | stat_mod.S_IWOTH


def landed_mode(new: int, real: os.stat_result | None) -> int:
    """The permission bits promotion gives an entry whose upper mode is ``new`` over the real entry ``real``
    (None: nothing of the same kind there)."""
    keep = stat_mod.S_IMODE(real.st_mode) if real is not None else 0
    return stat_mod.S_IMODE(new) & ~_NEVER & ~(_ONLY_KEPT & ~keep)


def same_kind(real: os.stat_result | None, new: int) -> os.stat_result | None:
    return real if real is not None and stat_mod.S_IFMT(real.st_mode) == stat_mod.S_IFMT(new) else None


def _special(mode: int) -> str:
    if stat_mod.S_ISFIFO(mode):
        return "a FIFO"
    if stat_mod.S_ISSOCK(mode):
        return "a socket"
    if stat_mod.S_ISBLK(mode):
        return "a block device"
    if stat_mod.S_ISCHR(mode):
        return "a character device"
    return "a special file"


def refusals(lower: str, upper: str, changes: list[Change]) -> list[Conflict]:
    """The changes acceptance never lands, each as a Conflict naming its path and the rule."""
    out = []
    links = _Links(lower, upper)
    for ch in changes:
        if ch.kind == "deleted":
            continue
        if ch.type == "other":
            kind = _special(os.lstat(f"{upper}/{ch.path}").st_mode)
            out.append(Conflict(ch.path, f"{kind}: special files are never accepted"))
        elif ch.type == "symlink" and links.escapes(ch.path):
            target = os.readlink(f"{upper}/{ch.path}")
            out.append(
                Conflict(
                    ch.path, f"a symlink to {target}, which resolves outside the project: never accepted"
                )
            )
    return out


class _Links:
    """Resolve symlinks in the tree as it will be after acceptance (the merged view), as the kernel does:
    ``..`` after a symlink goes to the parent of its target, absolute targets start at ``/``."""

    def __init__(self, lower: str, upper: str) -> None:
        self.lower = lower
        self.root = root_node(lower, upper)
        self.count = 0  # links followed for the current question

    def escapes(self, rel: str) -> bool:
        stack: list[Node | None] = [self.root]
        parent = parent_of(rel)[0]
        # Directories all the way down: promotion never writes through a symlink.
        for name in [] if parent == "." else parent.split("/"):
            stack.append(step(stack[-1], name) if stack[-1] is not None else None)
        node = step(stack[-1], parent_of(rel)[1]) if stack[-1] is not None else None
        if node is None or node.kind != "symlink":
            return False
        self.count = 0
        return self._follow(stack, os.readlink(node.path)) is None

    def _follow(self, stack: list[Node | None], target: str) -> list[Node | None] | None:
        """The directory stack ``target`` leads to from ``stack``; None when it leaves the project. A
        missing component counts as a directory (conservative: what is created there later could not move
        the answer outside)."""
        if target.startswith("/"):
            if target != self.lower and not target.startswith(self.lower + "/"):
                return None
            stack, target = [self.root], target[len(self.lower) :]
        for comp in target.split("/"):
            if comp in ("", "."):
                continue
            if comp == "..":
                if len(stack) == 1:
                    return None
                stack = stack[:-1]
                continue
            cur = stack[-1]
            node = step(cur, comp) if cur is not None and cur.kind == "dir" else None
            if node is not None and node.kind == "symlink":
                self.count += 1
                if self.count > MAX_LINKS:
                    return stack  # the kernel gives up (ELOOP): it resolves to nothing
                res = self._follow(stack, os.readlink(node.path))
                if res is None:
                    return None
                stack = res
                continue
            stack = [*stack, node]
        return stack
