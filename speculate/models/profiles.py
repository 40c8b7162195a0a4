"""Model profiles and their prices, as the engine, the session and the benchmark read them (cost of a
response from its usage). The table is still defined in :mod:`speculate.sim.profiles` while the simulator's
profiles are being reworked on another branch; it moves here afterwards (a ``git mv`` and a re-export the
other way round), so nothing outside the simulator imports prices from the simulator."""

from speculate.sim.profiles import DEFAULT_MODEL, MTOK, PROFILES, ModelProfile, Prices, find_profile

__all__ = ["DEFAULT_MODEL", "MTOK", "PROFILES", "ModelProfile", "Prices", "find_profile"]
