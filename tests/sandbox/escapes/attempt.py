"""What an escape attempt is (:class:`Attempt`), and the pieces the catalogue's commands are written with."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

OK = "ESCAPED"  # printed by an attempt whose action succeeded inside the sandbox
MiB = 1 << 20
PY = "python3 -c"


@dataclass(frozen=True)
class Attempt:
    name: str
    area: str
    command: str  # formatted with the bait's fields: {project} {home} {pid} {sock} {port} {shmid} ...
    targets: tuple[str, ...] = ()  # host paths (formatted likewise) that must hash the same afterwards
    refused: bool = False  # the action itself must fail: OK must not be printed
    limits: dict[str, int] = field(default_factory=dict)
    timeout: float = 20.0


def py(code: str) -> str:
    return f"{PY} {shlex.quote(code)}"


CT = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long; "
# Prints OK unless the call failed with the sandbox's refusals (EPERM, EACCES, ENOSYS): an unfiltered
# call with junk arguments fails otherwise (EFAULT, EINVAL), which must not pass for a refusal.
VERDICT = f"e = ctypes.get_errno(); print('refused' if r < 0 and e in (1, 13, 38) else '{OK}', r, e)"


def py_args(code: str, *args: str) -> str:
    """``python3 -c CODE ARGS`` as an attempt's command: CODE's braces kept through the fields' format."""
    quoted = shlex.quote(code.replace("OK_MARK", OK)).replace("{", "{{").replace("}", "}}")
    return " ".join([PY, quoted, *args])
