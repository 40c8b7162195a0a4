"""What the benchmarks raise when a run they time went wrong, so that no figure is printed for it."""

from __future__ import annotations

from speculate.errors import SpeculateError


class BenchRunFailed(SpeculateError, RuntimeError):
    """A timed run failed (a command's exit status, a promotion, a server that never said ready): the
    message names the run and what it returned."""
