"""The pytest-benchmark microbenchmarks: overlays they open keep their state (journal, lock, layers) in a
temporary state dir, never in the user's own."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from overlayfs.state import ENV, remove_tree, wait_disposals


@pytest.fixture(autouse=True, scope="session")
def _private_state_dir() -> Iterator[None]:
    d = Path(tempfile.mkdtemp(prefix="speculate-bench-state-"))
    old = os.environ.get(ENV)
    os.environ[ENV] = str(d)
    yield
    wait_disposals()
    remove_tree(d)
    if old is None:
        del os.environ[ENV]
    else:
        os.environ[ENV] = old
