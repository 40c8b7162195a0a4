"""Shared fixtures. Area-specific fixtures live in the area's own conftest.py."""
