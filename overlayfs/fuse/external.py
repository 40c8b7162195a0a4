"""Changes made to the upper layer behind the FUSE server's back (by the pure view, between commands): the
cached nodes at those paths re-resolved, and what the kernel must be told to drop.

The owner names every upper-layer path that was added, removed or changed (:mod:`overlayfs.sandbox.session`
finds them by comparing listings of the layer); :func:`external` then updates the inode table, and the
server drops the kernel's dentries for those names (positive or negative) and the attributes and cached
listings of their directories.
"""

from __future__ import annotations

import stat as stat_mod

from overlayfs import layer
from overlayfs.fuse.tree import ROOT_INO, MergedTree, Node, lexists_stat


def external(tree: MergedTree, rels: list[str]) -> tuple[list[tuple[int, str]], set[int]]:
    """Re-resolve the cached nodes at ``rels`` (upper-layer paths another writer changed, parents listed
    too): a directory that still is one keeps its inode with fresh flags (its children dropped if it
    became opaque); anything else is dropped from the table, to be looked up afresh as a new inode (so no
    stale attributes or pages can be served for it). Returns the kernel dentries to drop, positive or
    negative, as (parent inode, name), and the inodes whose attributes to drop."""
    entries: list[tuple[int, str]] = []
    attrs = {ROOT_INO}
    for rel in sorted(set(rels), key=lambda r: r.count("/")):  # parents first
        *dirs, name = rel.split("/")
        parent: Node | None = tree.root
        for d in dirs:
            parent = parent.kids.get(d) if parent is not None else None
        if parent is None:  # not in the table: the kernel holds nothing beneath it either
            continue
        attrs.add(parent.ino)
        node = parent.kids.get(name)
        if node is not None and node.is_dir and _refresh_dir(tree, node, entries):
            attrs.add(node.ino)
            continue
        if node is not None:
            _drop_subtree(tree, node)
        entries.append((parent.ino, name))
    return entries, attrs


def _refresh_dir(tree: MergedTree, node: Node, entries: list[tuple[int, str]]) -> bool:
    """Re-read a cached directory's layers; False if the merged view has no directory there now."""
    parent = node.parent
    assert parent is not None
    up = f"{tree.upath(parent)}/{node.name}"
    ust = lexists_stat(up) if parent.upper else None
    if ust is not None and layer.is_whiteout_at(up, ust):
        return False
    lst = lexists_stat(f"{tree.lpath(parent)}/{node.name}") if parent.lower_children else None
    st = ust if ust is not None else lst
    if st is None or not stat_mod.S_ISDIR(st.st_mode):
        return False
    opaque = ust is not None and (
        layer.is_opaque(up) or (lst is not None and not stat_mod.S_ISDIR(lst.st_mode))
    )
    lower = lst is not None
    if (opaque and not node.opaque) or (node.lower and not lower):  # lower children hidden now
        for name, kid in list(node.kids.items()):
            _drop_subtree(tree, kid)
            entries.append((node.ino, name))
    node.upper, node.lower, node.opaque = ust is not None, lower, opaque
    return True


def _drop_subtree(tree: MergedTree, node: Node) -> None:
    for kid in list(node.kids.values()):
        _drop_subtree(tree, kid)
    tree.detach(node)
