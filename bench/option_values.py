"""The values of ``speculate bench``'s list options (``--accept-prob natural,0``, ``--spec-value 0.01,inf``,
``--spec-candidates 1,2``, ...), parsed for argparse: a bad value is an ``ArgumentTypeError`` naming the
option and the value."""

from __future__ import annotations

import argparse


def floats(s: str, what: str) -> list[float]:
    try:
        vals = [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} {s!r}: expected comma-separated numbers") from None
    if not vals or any(v < 0 for v in vals):
        raise argparse.ArgumentTypeError(f"{what} {s!r}: expected non-negative numbers")
    return vals


def rates(s: str) -> list[float | None]:
    """``--accept-prob``: forced rates between 0 and 1, and ``natural`` for the scenarios' own weights."""
    out: list[float | None] = []
    for x in (x.strip() for x in s.split(",")):
        if x == "natural":
            out.append(None)
        elif x:
            try:
                v = float(x)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"--accept-prob {s!r}: {x!r} is neither a number nor 'natural'"
                ) from None
            if not 0 <= v <= 1:
                raise argparse.ArgumentTypeError(f"--accept-prob {x}: must be between 0 and 1")
            out.append(v)
    if not out:
        raise argparse.ArgumentTypeError(f"--accept-prob {s!r}: expected rates such as natural,0,0.5,1")
    return out


def values(s: str) -> list[float | None]:
    """``--spec-value``: λ values (dollars per second saved), ``inf`` or ``always`` for no abstention."""
    out: list[float | None] = []
    for x in (x.strip() for x in s.split(",")):
        if x in ("inf", "always"):
            out.append(None)
        elif x:
            try:
                v = float(x)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"--spec-value {s!r}: {x!r} is neither a number nor 'inf'"
                ) from None
            if not v >= 0:
                raise argparse.ArgumentTypeError(f"--spec-value {x}: must be >= 0 (dollars per second saved)")
            out.append(None if v == float("inf") else v)
    if not out:
        raise argparse.ArgumentTypeError(f"--spec-value {s!r}: expected values such as 0.002,0.01,inf")
    return out


def ks(s: str) -> list[int]:
    try:
        ks = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--spec-candidates {s!r}: expected comma-separated integers"
        ) from None
    if not ks or any(not 1 <= k <= 5 for k in ks):
        raise argparse.ArgumentTypeError(f"--spec-candidates {s!r}: each K must be between 1 and 5")
    return ks
