"""The sandbox for untrusted commands (speculative Bash): bubblewrap, seccomp, Landlock and limits.

:func:`run_in_overlay` / :func:`run_sandboxed` run a command with the merged view of an overlay at the
project's own path; nothing else it can write reaches the host (see docs/security.md). Parts:
:mod:`.policy` (limits, availability, the bwrap command line), :mod:`.seccomp` (the syscall filter),
:mod:`.limits` (cgroups, the upper layer's bound), :mod:`._inner` (rlimits and Landlock, in the sandbox,
where ``stage.c`` cannot be compiled),
:mod:`.run` (the runner, backend failure), :mod:`.stop` (timeout and cancel, and aborting a view a killed
command is stuck in), :mod:`.session` (the mounted view a fork's commands
share, :func:`keep_view`), :mod:`overlayfs.stage` (the compiled stages, ``stage.c``).
"""

from overlayfs.sandbox.policy import SandboxLimits, landlock_abi, sandbox_env, sandbox_problem
from overlayfs.sandbox.run import (
    BACKEND_FAILED_EXIT,
    SandboxResult,
    SandboxSetupFailed,
    SandboxUnavailable,
    run_in_overlay,
    run_sandboxed,
)
from overlayfs.sandbox.session import keep_view
from overlayfs.sandbox.stop import TIMEOUT_EXIT, CancelToken

__all__ = [
    "BACKEND_FAILED_EXIT",
    "TIMEOUT_EXIT",
    "CancelToken",
    "SandboxLimits",
    "SandboxResult",
    "SandboxSetupFailed",
    "SandboxUnavailable",
    "keep_view",
    "landlock_abi",
    "run_in_overlay",
    "run_sandboxed",
    "sandbox_env",
    "sandbox_problem",
]
