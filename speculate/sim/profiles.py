"""The model profiles the simulator serves; they live in :mod:`speculate.models.profiles` with their prices."""

from speculate.models.profiles import DEFAULT_MODEL, MTOK, PROFILES, ModelProfile, Prices, find_profile

__all__ = ["DEFAULT_MODEL", "MTOK", "PROFILES", "ModelProfile", "Prices", "find_profile"]
