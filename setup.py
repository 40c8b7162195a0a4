"""Only what pyproject.toml cannot say: the bundled scenarios (``bench/scenarios``, with their sample
workspaces) ship in the package as ``speculate.sim.bundled`` (the simulator's and the REPL demo's
defaults), while the benchmark package (``bench``) itself is not installed: its name is too common to claim
in site-packages, and it runs from the checkout (docs/architecture.md, "Layers")."""

from setuptools import find_namespace_packages, find_packages, setup

BUNDLED = "speculate.sim.bundled"
# Every folder under the scenarios is listed (as a data-only package), so each one's files ship.
bundled = [
    BUNDLED,
    *(f"{BUNDLED}.{p}" for p in find_namespace_packages(where="bench/scenarios", exclude=["*__pycache__*"])),
]

setup(
    packages=[*find_packages(include=["speculate*", "overlayfs*"]), *bundled],
    package_dir={BUNDLED: "bench/scenarios"},
    package_data={
        # every package ("" in setup.py is "*" in pyproject)
        "": ["*.yaml", "*.md", "*.txt", "*.json", "*.c"],
        **{p: ["*", ".*"] for p in bundled},  # a workspace's every file (Makefile, .js, dotfiles)
    },
)
