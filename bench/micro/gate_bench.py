"""What the permission gate's Bash decision costs per command, before and after deciding on the parse.

Run: ``.venv/bin/python -m bench.micro.gate_bench [--reps 200]``.

Before (#33): the text-based check the gate used to make, rebuilt here from the helpers that are still
there (``split_command`` on ``&&``/``;``/``|``, an anchored regex per rule and part, ``classify`` for
read-only). After: :func:`speculate.permission_bash.decide` (tree-sitter parse, the walk with wrappers,
scripts and substitutions, path checks, globs expanded against the disk). Both over the same commands
(the spellings, redirections, reads and file commands of the differential corpus, plus long ordinary
lines) and rule sets, interleaved per repetition in one run. Prints p50/p99 per decision in ms; the aim is
≤ 2 ms p99, far below a model turn.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from speculate.permission_rules import Rule, bash_match, split_command
from speculate.permissions import PermissionGate
from speculate.shell.classify import classify
from speculate.tools import tools_by_name

COMMANDS = [
    "rm a.txt", "FOO=1 rm a.txt", "command rm a.txt", "nice rm a.txt", "timeout 5 rm a.txt",
    "echo a.txt | xargs rm", "\\rm a.txt", "/bin/rm a.txt", "r''m a.txt", "(rm a.txt)",
    "if true; then rm a.txt; fi", "for f in a.txt; do rm $f; done", "echo $(rm a.txt)", "cat <(rm a.txt)",
    "sh -c 'rm a.txt'", "eval 'rm a.txt'", "x=rm; $x a.txt", "GIT_DIR=.git git push", "echo hi > f.txt",
    "ls >> f.txt", "echo x >> ~/.bashrc", "cat /etc/hostname", "cat ../x", "cat ~/secret.txt", "ls -la",
    "git status", "git log --oneline -5", "git diff HEAD~1 -- src", "grep -rn 'def main' src",
    "find . -name '*.py' -not -path './.venv/*'", "python -m pytest -q tests/test_a.py", "mkdir -p build/x",
    "sed -i 's/a/b/' src/a.py", "cat .env", "head -20 secrets/a.txt", 'echo {"a":1} # x',
    "npm ls", "env", "cd src && ls", "wc -l src/*.py | sort -n | tail -5",
    " && ".join(f"echo step{i}" for i in range(50)),
    " | ".join(["cat a.txt", "grep x", "sort", "uniq -c", "sort -rn", "head -5"]),
]  # fmt: skip
RULES = {"allow": ["Bash(echo:*)", "Bash(cat:*)", "Bash(ls:*)", "Bash(git status)"], "deny": ["Bash(rm:*)"]}


def before(allow: list[Rule], deny: list[Rule], command: str) -> str:
    """The text-based decision the gate made before #33 (default mode)."""
    parts, subst = split_command(command)
    if any(bash_match(r, p) for r in deny for p in [*parts, command]):
        return "deny"
    if not subst and parts and all(any(bash_match(r, p) for r in allow) for p in parts):
        return "allow"
    return "allow" if classify(command).read_only else "ask"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    bash = tools_by_name()["Bash"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        (root / "src").mkdir(parents=True)
        (root / "secrets").mkdir()
        for name in ("a.txt", "src/a.py", "src/b.py", "secrets/a.txt"):
            (root / name).write_text("x\n")
        gate = PermissionGate(root=root, home=Path(tmp) / "h", deny=[*RULES["deny"], "Read(secrets/**)"],
                              allow=RULES["allow"])  # fmt: skip
        allow = [Rule.parse(r) for r in RULES["allow"]]
        deny = [Rule.parse(r) for r in RULES["deny"]]
        times: dict[str, list[float]] = {"before (text)": [], "after (parse)": []}
        for _ in range(args.reps):
            for command in COMMANDS:
                t0 = time.perf_counter()
                before(allow, deny, command)
                t1 = time.perf_counter()
                gate.check(bash, {"command": command})
                t2 = time.perf_counter()
                times["before (text)"].append((t1 - t0) * 1000)
                times["after (parse)"].append((t2 - t1) * 1000)
    print(f"{len(COMMANDS)} commands x {args.reps} repetitions, interleaved")
    print(f"{'decision':<16} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, xs in times.items():
        q = statistics.quantiles(xs, n=100)
        print(f"{name:<16} {statistics.median(xs):8.3f} {q[98]:8.3f} {max(xs):8.3f}")


if __name__ == "__main__":
    main()
