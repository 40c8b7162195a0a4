"""The model profiles the simulator serves are the project's own (:mod:`speculate.models.profiles`): names,
limits, API behaviour, latency and prices live with the models, not in the simulator."""

from speculate.models.profiles import (
    ALL_THINKING,
    DEFAULT_MODEL,
    MTOK,
    PROFILES,
    ModelProfile,
    Prices,
    find_profile,
)

__all__ = ["ALL_THINKING", "DEFAULT_MODEL", "MTOK", "PROFILES", "ModelProfile", "Prices", "find_profile"]
