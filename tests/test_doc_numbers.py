"""Numbers and lists the documents state that drift as the code grows: each is read back from the code.

- The escape attempts: README.md and docs/security.md say how many there are
  (``tests/sandbox/escapes/catalogue.py``'s ``ATTEMPTS``).
- The overlay backends: docs/architecture.md lists them by name (``overlayfs.backends.REGISTRY``).
- The model backends: docs/architecture.md lists them (``speculate.backends.MODEL_BACKENDS``).
"""

from __future__ import annotations

import re
from pathlib import Path

from overlayfs.backends import REGISTRY
from speculate.backends import MODEL_BACKENDS
from tests.sandbox.escapes.catalogue import ATTEMPTS

REPO = Path(__file__).resolve().parents[1]


def _claims(doc: str, pattern: str) -> list[str]:
    text = " ".join((REPO / doc).read_text().split())  # a claim may wrap across lines
    return re.findall(pattern, text)


def test_the_escape_count_the_documents_state_is_the_catalogue_s() -> None:
    for doc in ("README.md", "docs/security.md"):
        said = _claims(doc, r"(\d+) escape attempts")
        assert said, f"{doc} no longer states the number of escape attempts"
        assert {int(n) for n in said} == {len(ATTEMPTS)}, (doc, said, len(ATTEMPTS))


def test_the_backend_lists_in_the_architecture_are_the_registries() -> None:
    (overlay,) = _claims("docs/architecture.md", r"the overlay backends \(([^)]*)\)")
    assert re.findall(r"`([\w-]+)`", overlay) == list(REGISTRY)
    (model,) = _claims("docs/architecture.md", r"registered by name in `MODEL_BACKENDS` \(([^:]*):")
    assert re.findall(r"`([\w-]+)`", model) == list(MODEL_BACKENDS)
