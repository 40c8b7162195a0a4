#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite plus the linter. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/ruff check speculate overlayfs bench tests
.venv/bin/python -m pytest "$@"
