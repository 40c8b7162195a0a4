"""The runner: each attempt made in a sandbox over a fresh overlay of a small project (or with plain bash,
for the control), then judged by the host's state afterwards (:class:`Outcome`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from overlayfs import Overlay, backends
from overlayfs.sandbox import SandboxLimits, SandboxResult, keep_view, run_sandboxed, sandbox_env
from overlayfs.state import ENV
from tests.sandbox.escapes.attempt import OK, Attempt, MiB
from tests.sandbox.escapes.bait import Bait, digest
from tests.sandbox.escapes.catalogue import ATTEMPTS, CONTROL
from tests.sandbox.escapes.sockets import innocent_secrets


@dataclass
class Outcome:
    name: str
    area: str
    contained: bool
    why: str
    exit_code: int
    output: str
    limit: str | None = None


def make_project(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# proj\n")
    os.symlink("/etc", root / "escape-link")
    return root


def run_attempt(a: Attempt, bait: Bait, project: Path, backend: str) -> Outcome:
    f = bait.fields(project)
    targets = list(
        dict.fromkeys([t.format(**f) for t in a.targets] + [os.fspath(project), os.fspath(bait.home)])
    )
    before = {t: digest(t) for t in targets}
    hits0 = len(bait.hits)
    env = {
        **os.environ,
        "HOME": os.fspath(bait.home),
        "ANTHROPIC_API_KEY": bait.api_key,
        **innocent_secrets(bait.secret),
    }
    if backend == "none":  # the control: no sandbox at all, to show that the checks catch an escape
        ov = Overlay(project)  # its layers exist while the command runs, as a speculation's do
        try:
            p = subprocess.run(
                ["bash", "-c", a.command.format(**f)],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=a.timeout,
            )
        finally:
            ov.discard()
        r = SandboxResult(p.stdout, p.stderr, p.returncode, False)
        upper_used, entries = 0, []
    else:
        ov = Overlay(project)
        keep_view(ov, backend)  # as a fork's shell does: the mount is kept until the overlay is discarded
        try:
            r = run_sandboxed(
                ov,
                a.command.format(**f),
                timeout=a.timeout,
                backend=backend,
                limits=SandboxLimits(**a.limits),
                env=sandbox_env(env),
            )
            entries = [e for e in Path(ov.upper).rglob("*")]
            upper_used = sum(e.lstat().st_blocks * 512 for e in entries)
        finally:
            ov.discard()
    out = r.stdout + r.stderr
    bait.host_sockets.collect()
    why = [f"{t} changed on the host" for t in targets if digest(t) != before[t]]
    if len(bait.hits) > hits0:
        why.append(f"a host listener was reached: {bait.hits[hits0:]}")
    if (p := bait.canary_problem()) is not None:
        why.append(p)
    if bait.secret in out or bait.api_key in out:
        why.append("a host secret appeared in the output")
    if a.refused and OK in r.stdout:
        why.append("the action succeeded inside the sandbox")
    if a.name == "outside-route":
        devices = {ln.split()[1].rstrip(":") for ln in r.stdout.splitlines() if len(ln.split()) == 2}
        if devices - {"lo"}:
            why.append(f"the sandbox has routes or interfaces besides loopback: {sorted(devices)}")
    if f"speculate-canary-{bait.tag}" in r.stdout:
        why.append("a host process is visible")
    if a.name == "other-overlays" and "projects" in r.stdout:
        why.append("the speculation state dir (other overlays, journals) is visible")
    if a.limits.get("upper_bytes") and upper_used > a.limits["upper_bytes"] + MiB:
        why.append(f"the upper layer grew to {upper_used} bytes past its bound")
    if a.name.startswith("bound-"):
        why += _bound_problems(a, r, upper_used, len(entries), backend)
    if a.name == "disk-upper" and r.limit != "upper_bytes" and "File too large" not in out:
        why.append("the upper-layer bound was not enforced")
    if a.name == "disk-upper-many" and r.limit != "upper_bytes":
        why.append("the upper-layer bound (summed over files) was not enforced")
    if a.name == "time" and not r.timed_out:
        why.append("the timeout did not stop the command")
    return Outcome(a.name, a.area, not why, "; ".join(why) or "contained", r.exit_code, out[-400:], r.limit)


def _bound_problems(a: Attempt, r: SandboxResult, used: int, entries: int, backend: str) -> list[str]:
    """The upper layer's hard bound held (what the layer holds now, and the most the runner saw in it
    while the command ran), and the run was flagged as reaching it."""
    why = []
    peak_bytes, peak_inodes = r.upper_peak or (0, 0)
    if max(used, peak_bytes) > a.limits["upper_bytes"] + MiB:
        why.append(
            f"the upper layer held {max(used, peak_bytes)} bytes, past its bound of {a.limits['upper_bytes']}"
        )
    if max(entries, peak_inodes) > a.limits["upper_inodes"]:
        why.append(
            f"the upper layer held {max(entries, peak_inodes)} inodes, past its bound of "
            f"{a.limits['upper_inodes']}"
        )
    want = "upper_inodes" if a.name == "bound-inodes" else "upper_bytes"
    ours = isinstance(backends.get(backend), backends.FuseBackend)  # our FUSE server, on either transport
    # Our FUSE server has no fallocate (EOPNOTSUPP): there that loop writes nothing and reaches nothing.
    unsupported = a.name == "bound-fallocate" and ours and used < MiB and "filled 0" in r.stdout
    if r.limit != want and not unsupported and (a.name != "bound-fill-and-hide" or ours):
        why.append(f"the run was not flagged as reaching its bound ({want}): limit {r.limit!r}")
    return why


def _visible(path: Path) -> bool:
    from overlayfs.sandbox.policy import PRIVATE_DIRS

    real = os.path.realpath(path)
    return not any(real == d or real.startswith(d + "/") for d in PRIVATE_DIRS)


def _workspace_candidates() -> list[Path]:
    given = os.environ.get("SPECULATE_ESCAPE_BASE")
    return [Path(given)] if given else [Path("/var/lib"), Path.home() / ".cache"]


def workspace_parent() -> Path | None:
    """Where :func:`workspace` makes its directory, or None where no candidate is writable and seen."""
    return next(
        (p for p in _workspace_candidates() if p.is_dir() and os.access(p, os.W_OK) and _visible(p)), None
    )


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A scratch directory the sandbox sees (read-only) at its real path, as it sees a user's home and
    project: not under /tmp, /var/tmp or /run, which are private there. SPECULATE_ESCAPE_BASE chooses it."""
    parent = workspace_parent()
    if parent is None:
        raise RuntimeError(
            f"no writable directory outside the sandbox's private ones among {_workspace_candidates()}"
        )
    base = Path(tempfile.mkdtemp(prefix="speculate-escape-", dir=parent))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def _state_dir(path: Path) -> Iterator[None]:
    """Speculation state (overlays, journals) where the sandbox could see it, unless hidden there."""
    old = os.environ.get(ENV)
    os.environ[ENV] = os.fspath(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = old


def run_all(backend: str, names: list[str] | None = None, *, owner: int | None = None) -> list[Outcome]:
    """Every attempt (or ``names``) on ``backend``; "none" runs the CONTROL attempts with no sandbox.
    ``owner`` (as root): the project belongs to that uid and gid, so root's commands run with its file
    capabilities in a namespace mapping every id (docs/security.md, "Root on another user's project")."""
    if backend == "none":
        names = [n for n in (names or CONTROL) if n in CONTROL]
    with workspace() as base, Bait(base) as bait, _state_dir(base / "state"):
        project = make_project(base / "proj")
        if owner is not None:
            for p in (project, *project.rglob("*")):
                os.chown(p, owner, owner, follow_symlinks=False)
        chosen = [a for a in ATTEMPTS if names is None or a.name in names]
        chosen.sort(key=lambda a: a.name == "kill-canary")  # last: the others need the canary alive
        out = []
        for a in chosen:
            try:
                out.append(run_attempt(a, bait, project, backend))
            finally:  # an escape's leftovers must not hide the next escape (same name, same content)
                for p in (
                    *Path("/etc").glob(f"speculate-escape-{bait.tag}"),
                    *Path("/var/lib").glob(f"speculate-escape-{bait.tag}"),
                ):
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
        return out
