"""How the REPL's memory grows per turn: a benchmark that prints figures (not a test).

Runs ``speculate repl --plain`` on the simulator demo (fix-pagination, bypassPermissions so that nothing
asks), sends its five scripted prompts again and again with ``/clear`` between passes (speculation on: a
prompt equal to the ghost text takes its speculation), and reads the process's resident set size
(``VmRSS``) after given numbers of turns. Prints the RSS at each mark and the growth per turn after
warm-up.

    .venv/bin/python scripts/repl_rss.py            # 200 turns, marks at 10, 50, 100, 150, 200
    .venv/bin/python scripts/repl_rss.py --turns 60 --marks 10,30,60
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from speculate.repl.demo import find_scenario, prepare_project  # noqa: E402
from speculate.sim.scenario_yaml import load_scenario  # noqa: E402

TURN_END = re.compile(r"^\(\d+\.\d+s\)$", re.M)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--marks", default="10,50,100,150,200")
    ap.add_argument("--time-scale", type=float, default=0.01)
    a = ap.parse_args()
    marks = sorted({int(m) for m in a.marks.split(",") if int(m) <= a.turns})
    scenario = load_scenario(find_scenario("fix-pagination"))
    prompts = [t.prompt for t in scenario.turns]
    tmp = Path(tempfile.mkdtemp(prefix="repl-rss-"))
    project = prepare_project(scenario, tmp / "proj")
    env = {**os.environ, "SPECULATE_HISTORY": str(tmp / "history"), "SPECULATE_STATE_DIR": str(tmp / "state")}
    cmd = [sys.executable, "-m", "speculate.cli", "repl", str(project), "--scenario", "fix-pagination",
           "--time-scale", str(a.time_scale), "--permission-mode", "bypassPermissions", "--plain"]  # fmt: skip
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, bufsize=1)  # fmt: skip
    assert p.stdin is not None and p.stdout is not None
    out: list[str] = []
    ended = threading.Semaphore(0)

    def reader() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            out.append(line)
            if TURN_END.match(line.strip()):
                ended.release()

    threading.Thread(target=reader, daemon=True).start()
    t0 = time.monotonic()
    figures: list[tuple[int, int]] = []
    turn = 0
    try:
        while turn < a.turns:
            for prompt in prompts:
                if turn >= a.turns:
                    break
                time.sleep(0.3)  # the ghost text (and its speculation) gets a moment, as a person gives it
                p.stdin.write(prompt + "\n")
                p.stdin.flush()
                if not ended.acquire(timeout=120):
                    raise SystemExit("a turn did not end in 120 s:\n" + "".join(out[-30:]))
                turn += 1
                if turn in marks:
                    figures.append((turn, rss_kb(p.pid)))
                    print(f"turn {turn:>4}: RSS {figures[-1][1] / 1024:7.1f} MiB", flush=True)
            p.stdin.write("/clear\n")
            p.stdin.flush()
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    first = next(((n, k) for n, k in figures if n >= 50), figures[0])
    last = figures[-1]
    if last[0] > first[0]:
        slope = (last[1] - first[1]) / (last[0] - first[0])
        print(f"growth after warm-up: {slope:.1f} KB per turn (turns {first[0]} to {last[0]})")
    print(
        f"{turn} turns in {time.monotonic() - t0:.0f} s; time scale {a.time_scale}; python {sys.version.split()[0]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
