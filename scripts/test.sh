#!/usr/bin/env bash
# Set up (idempotent) and run the linter, the type checker and the whole test suite. Extra arguments go to pytest.
# The suite must leave the checkout exactly as it found it: `git status` is compared before and after.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/ruff check speculate overlayfs bench tests setup.py
.venv/bin/ruff format --check speculate overlayfs bench tests setup.py  # the formatter's layout, line-length 110
.venv/bin/mypy  # speculate, overlayfs, bench: settings in pyproject.toml [tool.mypy]
before=$(git status --porcelain --untracked-files=all 2>/dev/null || true)
status=0
.venv/bin/python -m pytest "$@" || status=$?
# The pytest-benchmark microbenchmarks (bench/micro/test_*.py), in quick mode: each measured for a few
# rounds and its table printed, so that they keep running and a broken one fails CI (~20 s). Their figures
# are indicative only; bench/micro's docstrings say how to run them in full.
.venv/bin/python -m pytest bench/micro -q -p no:cacheprovider --benchmark-max-time=0.05 \
  --benchmark-min-rounds=3 --benchmark-warmup=off --benchmark-columns=min,median,max,rounds || status=$?
after=$(git status --porcelain --untracked-files=all 2>/dev/null || true)
if [ "$before" != "$after" ]; then
  echo "test.sh: the test suite changed the checkout (git status before and after differ):" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  [ "$status" != 0 ] || status=1
fi
exit "$status"
