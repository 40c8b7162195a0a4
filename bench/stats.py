"""The experiments' statistics: :mod:`speculate.statistics`, where the study's report uses them too (the
library never imports the benchmark). Every name is re-exported here for the benchmark's modules."""

from __future__ import annotations

from speculate.statistics import (
    Nested,
    bootstrap_ci,
    break_even,
    break_even_ci,
    efficiency,
    hierarchical_bootstrap_ci,
    mean,
    median,
    percentile,
    pooled_efficiency,
    summary,
)

__all__ = [
    "Nested",
    "bootstrap_ci",
    "break_even",
    "break_even_ci",
    "efficiency",
    "hierarchical_bootstrap_ci",
    "mean",
    "median",
    "percentile",
    "pooled_efficiency",
    "summary",
]
