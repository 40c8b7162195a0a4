"""``python -m tests.sandbox.escapes --backend B [--only NAME...]``: the outcomes as JSON on stdout."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

import tests.sandbox.escapes
from tests.sandbox.escapes.runner import run_all


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=tests.sandbox.escapes.__doc__)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    out = run_all(args.backend, args.only)
    json.dump([asdict(o) for o in out], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
