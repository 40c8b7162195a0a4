"""Every exception the project defines has the project's root: ``SpeculateError`` in ``speculate`` and
``bench``, ``OverlayError`` in ``overlayfs`` (which depends on nothing in ``speculate``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from overlayfs.errors import OverlayError
from speculate.errors import SpeculateError

ROOTS = {"speculate": SpeculateError, "bench": SpeculateError, "overlayfs": OverlayError}


def _exceptions(package: str) -> list[type[BaseException]]:
    pkg = importlib.import_module(package)
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(pkg.__path__, package + "."):
        if ".workspaces." in info.name or info.name.endswith("__main__") or ".scenarios." in info.name:
            continue  # a scenario's sample project is the user's code, not ours; __main__ runs on import
        mod = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == mod.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_every_exception_the_package_defines_has_its_root(package: str) -> None:
    classes = _exceptions(package)
    assert len(classes) >= 3, classes  # the walk found the package's modules
    strays = [f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, ROOTS[package])]
    assert strays == [], f"exceptions without {ROOTS[package].__name__} as a base: {strays}"


def test_the_roots_keep_the_standard_bases_callers_catch() -> None:
    from overlayfs.journal import PromoteError
    from speculate.settings import SettingsError

    assert issubclass(SettingsError, ValueError) and issubclass(PromoteError, OSError)
    assert not issubclass(OverlayError, SpeculateError) and not issubclass(SpeculateError, OverlayError)
