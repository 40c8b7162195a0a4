"""How the REPL's memory grows per turn: a benchmark that prints figures (not a test).

Runs ``speculate repl --plain`` on the simulator demo (fix-pagination, bypassPermissions so that nothing
asks), sends its five scripted prompts again and again with ``/clear`` between passes (speculation on: a
prompt equal to the ghost text takes its speculation), and reads the process's resident set size
(``VmRSS``) after given numbers of turns. Prints the RSS at each mark and the growth per turn after
warm-up.

    .venv/bin/python scripts/repl_rss.py            # 200 turns, marks at 10, 50, 100, 150, 200
    .venv/bin/python scripts/repl_rss.py --turns 60 --marks 10,30,60
    .venv/bin/python scripts/repl_rss.py --tmux     # the full-screen REPL in a tmux terminal, as a person
                                                    # uses it (prompts typed, ghost text, toolbar)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
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


class Line:
    """The REPL in line mode (``--plain``) on pipes: a prompt is a line written, a turn's end its ``(N.Ns)``."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.p = subprocess.Popen([*cmd, "--plain"], cwd=REPO, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)  # fmt: skip
        self.out: list[str] = []
        self.ended = threading.Semaphore(0)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.out.append(line)
            if TURN_END.match(line.strip()):
                self.ended.release()

    def pid(self) -> int:
        return self.p.pid

    def send(self, line: str, *, turn: bool) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        if turn and not self.ended.acquire(timeout=120):
            raise SystemExit("a turn did not end in 120 s:\n" + "".join(self.out[-30:]))

    def close(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(timeout=60)


class Tmux:
    """The full-screen REPL in a private tmux server (the tmux tests' :class:`tests.repl.tmuxkit.Term`): a
    prompt is typed and Enter pressed; a turn's end is one more ``(N.Ns)`` line in the pane's history (kept
    whole: a large history limit, set before the pane is made)."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        import shlex

        from tests.repl.tmuxkit import Term

        self.t = Term()
        line = " ".join(
            f"{k}={shlex.quote(v)}" for k, v in env.items() if k.startswith(("SPECULATE_", "HOME"))
        )
        self.t.tmux("start-server", ";", "set-option", "-g", "history-limit", "500000", ";",
                    "new-session", "-d", "-x", "120", "-y", "40", "-s", self.t.target, "-c", str(REPO),
                    f"{line} {shlex.join(cmd)}; sleep 600")  # fmt: skip
        self.ends = 0
        # Typed before the prompt is drawn, a line is held for a fresh Enter (keys typed ahead): wait for it.
        self.t.wait(lambda: any(ln.startswith("›") for ln in self.t.screen().splitlines()), "the prompt", 60)

    def pid(self) -> int:
        shell = int(self.t.tmux("display-message", "-p", "-t", self.t.target, "#{pane_pid}").strip())
        kids = subprocess.run(
            ["pgrep", "-P", str(shell), "-f", "speculate.cli"], capture_output=True, text=True
        )
        return int(kids.stdout.split()[0])

    def send(self, line: str, *, turn: bool) -> None:
        self.t.type(line)
        self.t.keys("Enter")
        if not turn:
            time.sleep(0.3)
            return

        def ended() -> bool:  # one more turn-end line than before (one capture of the history per look)
            n = len(TURN_END.findall(self.t.scrollback()))
            done, self.ends = n > self.ends, max(n, self.ends)
            return done

        self.t.wait(ended, "the turn's end", 120)

    def close(self) -> None:
        self.t.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--marks", default="10,50,100,150,200")
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument(
        "--tmux", action="store_true", help="drive the full-screen REPL in tmux (default: --plain)"
    )
    a = ap.parse_args()
    marks = sorted({int(m) for m in a.marks.split(",") if int(m) <= a.turns})
    scenario = load_scenario(find_scenario("fix-pagination"))
    prompts = [t.prompt for t in scenario.turns]
    tmp = Path(tempfile.mkdtemp(prefix="repl-rss-"))
    project = prepare_project(scenario, tmp / "proj")
    env = {**os.environ, "SPECULATE_HISTORY": str(tmp / "history"), "SPECULATE_STATE_DIR": str(tmp / "state")}
    cmd = [sys.executable, "-m", "speculate.cli", "repl", str(project), "--scenario", "fix-pagination",
           "--time-scale", str(a.time_scale), "--permission-mode", "bypassPermissions"]  # fmt: skip
    repl = Tmux(cmd, env) if a.tmux else Line(cmd, env)
    t0 = time.monotonic()
    figures: list[tuple[int, int]] = []
    turn = 0
    try:
        while turn < a.turns:
            for prompt in prompts:
                if turn >= a.turns:
                    break
                time.sleep(0.3)  # the ghost text (and its speculation) gets a moment, as a person gives it
                repl.send(prompt, turn=True)
                turn += 1
                if turn in marks:
                    figures.append((turn, rss_kb(repl.pid())))
                    print(f"turn {turn:>4}: RSS {figures[-1][1] / 1024:7.1f} MiB", flush=True)
            repl.send("/clear", turn=False)
    finally:
        repl.close()
        shutil.rmtree(tmp, ignore_errors=True)
    first = next(((n, k) for n, k in figures if n >= 50), figures[0])
    last = figures[-1]
    if last[0] > first[0]:
        slope = (last[1] - first[1]) / (last[0] - first[0])
        print(f"growth after warm-up: {slope:.1f} KB per turn (turns {first[0]} to {last[0]})")
    print(
        f"{turn} turns in {time.monotonic() - t0:.0f} s; {'tmux' if a.tmux else 'line mode'}; time scale "
        f"{a.time_scale}; python {sys.version.split()[0]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
