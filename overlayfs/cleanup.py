"""The cleanup half of a promotion's steps (:mod:`overlayfs.steps`): removing what one journal left under
our temporary names (staged copies, backups, trash) after a rollback, a finished promotion or an abandoned
one. Cleanup never stops at the first error: each call that fails while its name still stands is noted in
``problems`` (a read-only or vanished filesystem must not turn one failed acceptance into a project nobody
can recover)."""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overlayfs.merged import lstat_or_none


class Cleanup:
    """What :class:`overlayfs.steps.Steps` removes; it sets these attributes from the journal."""

    j: dict[str, Any]
    lower: str
    problems: list[str]
    puts: list[list[Any]]
    rms: list[list[Any]]
    inplace: set[int]  # puts written into the real file (overlayfs.inplace)

    def p(self, rel: str) -> str:
        return f"{self.lower}/{rel}"

    # -- before the commit point: undo prepare ---------------------------------------------------------

    def rollback(self) -> None:
        """Undo prepare: temp files, backups (links to entries still in place) and early directories."""
        for _, stage, backup, _, _ in self.puts:
            self._remove(stage)
            if backup is not None:
                self._remove(backup)
        for rel in reversed(self.j["pre"]):
            try:
                os.rmdir(self.p(rel))
            except (FileNotFoundError, NotADirectoryError):
                pass
            except OSError as e:
                if e.errno != errno.ENOTEMPTY and os.path.lexists(self.p(rel)):  # not empty: the user's now
                    self.problems.append(f"could not remove the new directory {self.p(rel)}: {e.strerror}")

    # -- after apply -----------------------------------------------------------------------------------

    def finish(self, aside: str | None = None) -> None:
        """After apply: delete the backups and the trash (what the promotion replaced or removed), and an
        old entry a swap displaced if the process was killed before its name went. ``aside``: a directory
        outside the project, on its filesystem, to move them into instead (deleted later, on a thread:
        freeing a file's blocks takes milliseconds each on a busy disk, and nobody waits for that)."""
        for i, (_, stage, backup, _, _) in enumerate(self.puts):
            if i in self.inplace:  # its staged copy is still there (copied in, not renamed): aside too
                self._drop(stage, aside)
            else:
                self._remove(stage)
            if backup is not None:
                self._drop(backup, aside)
        for rel, _, trash, _, _ in self.rms:
            self._tolerate(f"remove {self.p(trash)}", self.p(trash), self._drop_trash, rel, trash, aside)

    def _drop(self, rel: str, aside: str | None) -> None:
        if aside is not None:
            try:
                os.rename(self.p(rel), f"{aside}/{os.path.basename(rel)}")
                return
            except OSError:
                pass  # gone already, or another filesystem after all, or the aside dir went: remove it here
        self._remove(rel)

    def _drop_trash(self, rel: str, trash: str, aside: str | None) -> None:
        t = self.p(trash)
        st = lstat_or_none(t)
        if st is None:
            return
        if not stat_mod.S_ISDIR(st.st_mode):
            self._drop(trash, aside)
            return
        try:
            os.rmdir(t)
        except OSError as e:
            if e.errno != errno.ENOTEMPTY:
                raise
            # Something was created in it after the conflict check: give it back rather than delete it.
            if not os.path.lexists(self.p(rel)):
                os.rename(t, self.p(rel))
            else:
                from overlayfs.state import remove_tree

                remove_tree(Path(t))

    def abandon(self) -> None:
        """Keep the tree as it is: remove our temp names (staged copies, backups, trash) where possible."""
        self.finish()

    # -- tolerant primitives --------------------------------------------------------------------------

    def _remove(self, rel: str) -> None:
        self._tolerate(f"remove {self.p(rel)}", self.p(rel), os.unlink, self.p(rel))

    def _tolerate(self, what: str, left: str, fn: Callable[..., object], *args: Any) -> None:
        """Run one cleanup call; if it fails while ``left`` still stands, say so in ``problems`` (EROFS for
        a name that is not there means there was nothing to do)."""
        try:
            fn(*args)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as e:
            if os.path.lexists(left):
                self.problems.append(f"could not {what}: {e.strerror}")
