#!/usr/bin/env bash
# Set up (idempotent) and run the main job: the speculative-vs-plain benchmark on the embedded simulator.
# Extra arguments go to `speculate bench` (try --quick).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/speculate bench "$@"
