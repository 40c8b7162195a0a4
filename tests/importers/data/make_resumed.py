"""Makes data/resumed.jsonl: the real Claude Code CLI (2.1.332, scripts/setup.sh installs it) against the
embedded simulator, `claude -p`, then `--resume SESSION`, then `--continue`, in one project; then
`--resume SESSION --fork-session` (data/forked/: that file and the fork's).

    .venv/bin/python tests/importers/data/make_resumed.py /tmp/resumed
    # then: the transcript under /tmp/resumed/home/.claude/projects/, attachments trimmed and api-request*
    # records taken out (they carry no uuid), as the other excerpts here
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from speculate.sim import SimServer
from speculate.sim.claude_code import ClaudeCode
from speculate.sim.scenario_yaml import parse_scenario

SCENARIO = """
name: gen
turns:
  - prompt: "what does config.py set?"
    steps:
      - tools:
          - Read: {file_path: "{root}/config.py"}
      - tools:
          - Grep: {pattern: LIMIT, path: "{root}"}
      - text: "It sets the mode and a limit of 3."
  - prompt: "raise the limit to 5"
    steps:
      - tools:
          - Edit: {file_path: "{root}/config.py", old_string: "LIMIT = 3", new_string: "LIMIT = 5"}
      - tools:
          - Bash: {command: "python3 -c 'import config; print(config.LIMIT)'"}
      - text: "Done: the limit is 5."
  - prompt: "list the python files"
    steps:
      - tools:
          - Glob: {pattern: "*.py"}
      - text: "config.py is the only one."
"""


def main(base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
    root = base / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / "config.py").write_text('MODE = "text"\nLIMIT = 3\n')
    allow = {"permissions": {"allow": ["Bash", "Edit", "Read", "Glob", "Grep"]}}
    (root / ".claude" / "settings.json").write_text(json.dumps(allow))
    home = base / "home"
    home.mkdir()
    trust = {"projects": {str(root): {"hasTrustDialogAccepted": True}}}
    (home / ".claude.json").write_text(json.dumps(trust))
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        sys.exit(binary)
    cc = ClaudeCode(binary, home=home)
    with SimServer([parse_scenario(SCENARIO)], seed=0, time_scale=0.01) as sim:
        env = cc.env(sim.base_url)

        def run(*args: str) -> str | None:
            argv = [str(cc.binary), "-p", "--output-format", "stream-json", "--verbose", *args]
            p = subprocess.run(
                argv, cwd=root, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
            )
            results = [e for e in map(json.loads, p.stdout.splitlines()) if e.get("type") == "result"]
            print("exit", p.returncode, [(e.get("subtype"), e.get("result", "")[:60]) for e in results])
            return results[-1].get("session_id") if results else None

        sid = run("--", "what does config.py set?")
        run("--resume", str(sid), "--", "raise the limit to 5")
        run("--continue", "--", "list the python files")
        # data/forked/: a fork writes a new file that copies the conversation (same uuids, new sessionId)
        run("--resume", str(sid), "--fork-session", "--", "list the python files")
    print(*sorted((home / ".claude" / "projects").glob("*/*.jsonl")), sep="\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
