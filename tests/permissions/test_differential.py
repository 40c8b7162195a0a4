"""The permission corpus under Claude Code 2.1.332 and under speculate's live gate (slow; skipped with the
reason where scripts/setup.sh could not install the CLI): at least 500 calls compared, none where speculate
is looser, and every call where it is stricter listed below with its reason (mirrored in docs/claude-code.md,
"The permission corpus")."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculate.sim.claude_code import ClaudeCode

from .corpus import configurations
from .differential import run

# Calls where speculate is stricter than Claude Code on purpose: key ("config#label") -> why. Mirrored in
# docs/claude-code.md ("The permission corpus"); an entry that is no longer stricter fails the test too.
PLAN = (
    "plan mode refuses a change outright; Claude Code's refusal (`Cannot write to … while in plan mode.`) "
    "names no rule or hook, so the corpus reads it as an ask"
)
WALKED = (
    "the parse walks into what Claude Code runs unchecked (eval's text, xargs -I and find -exec commands, a "
    "variable holding the name): a deny rule that matches inside refuses the line"
)
SCRIPT = (
    "a `sh -c`/`bash -c` script is parsed and walked like the line: a deny rule that matches inside refuses "
    "it, where Claude Code asks"
)
UNKNOWN = "a command whose name is not known before running cannot be checked against a deny rule: it asks"
GIT = (
    "git's global options (`-C .`) are taken off before matching, so `git -C . push` meets `Bash(git push:*)`"
)
PAGERS = "less, more and xxd read the file a Read deny rule covers, like cat: refused (Claude Code ran them)"
LINKS = "ln and dd of= write the path an Edit deny rule covers, like cp: refused (Claude Code ran them)"
PLAN_READ = (
    "a read outside the working directories asks in every mode but bypass (Claude Code's plan mode reads)"
)
OUTSIDE_TOOL = (
    "speculate's file tools act on the project tree only (a fork's overlay holds every write they make): a "
    "path outside it, an additional directory's included, is refused by the tool even where the gate allows"
)
ASK_RULES = "Read and Edit ask rules reach Bash reads and writes as deny rules do (Claude Code ran them)"
BARE_DENY = (
    "a bare deny rule keeps its family (a bare `Edit` deny withholds Write too), where Claude Code's bare rules "
    "name their own tool only (its bare allow and ask rules do so here as well)"
)
HOOK_ASK = "in dontAsk a hook that asks is refused like any other ask (Claude Code refused it too, as an ask)"
INTENDED_STRICTER: dict[str, str] = {
    **{f"rm-deny-{m}#rm:{k}": WALKED for m in ("default", "bypassPermissions", "dontAsk")
       for k in ("xargs-i", "eval", "eval-quoted", "var-braces", "find-exec")},
    **{f"rm-deny-{m}#rm:{k}": SCRIPT for m in ("default", "bypassPermissions") for k in ("sh-c", "bash-c", "sh-c-and")},
    **{f"rm-deny-{m}#rm:{k}": UNKNOWN for m in ("default", "dontAsk") for k in ("ansi-c", "dyn-subst")},
    "bare-deny-Edit#Write {root}/new-b.txt": BARE_DENY,
    "bare-allow-Read#Read {side}/s.txt": OUTSIDE_TOOL,  # a bare Read allow reads outside in Claude Code
    "push-deny-default#git -C . push": GIT,
    "push-deny-bypassPermissions#git -C . push": GIT,
    **{f"file-rules-{m}#{c} .env": PAGERS for m in ("default", "acceptEdits") for c in ("less", "more", "xxd")},
    **{f"file-rules-{m}#{c}": LINKS for m in ("default", "acceptEdits")
       for c in ("ln -s ../a.txt conf/link.txt", "dd if=a.txt of=conf/i.txt")},
    "mode-plan#Read {home}/secret.txt": PLAN_READ,
    "mode-plan#Read {side}/s.txt": PLAN_READ,
    "mode-plan#Write {root}/new-w.txt": PLAN,
    "mode-plan#Write {side}/new-out.txt": PLAN,
    "mode-plan#Edit {root}/a.txt": PLAN,
    "defaultMode-plan#Write {root}/dm-w.txt": PLAN,
    "defaultMode-plan#Edit {root}/a.txt": PLAN,
    "mode-bypassPermissions#Read {home}/secret.txt": OUTSIDE_TOOL,
    "mode-bypassPermissions#Read {side}/s.txt": OUTSIDE_TOOL,
    "mode-bypassPermissions#Write {side}/new-out.txt": OUTSIDE_TOOL,
    "additional-abs-default#Read {side}/s.txt": OUTSIDE_TOOL,
    "additional-abs-acceptEdits#Read {side}/s.txt": OUTSIDE_TOOL,
    "additional-abs-acceptEdits#Write {side}/w.txt": OUTSIDE_TOOL,
    "additional-rel#Read {side}/s.txt": OUTSIDE_TOOL,
    **{f"hook-answers-{m}#Write {{home}}/hook-allow-out.txt": OUTSIDE_TOOL
       for m in ("default", "acceptEdits", "bypassPermissions", "dontAsk")},
    "ask-rules#cat notes.md": ASK_RULES,
    "ask-rules#echo x > docs/e.md": ASK_RULES,
    "hook-answers-dontAsk#touch hook-ask-1.txt": HOOK_ASK,
    "hook-answers-dontAsk#Write {root}/hook-ask-w.txt": HOOK_ASK,
}  # fmt: skip


@pytest.mark.slow
def test_speculate_is_never_looser_than_claude_code(tmp_path: Path) -> None:
    binary = ClaudeCode.locate()
    if isinstance(binary, str):
        pytest.skip(binary)
    result = run(configurations(), tmp_path, binary)
    print("\n" + result.report(INTENDED_STRICTER))  # pytest -s shows it: the figure in docs/claude-code.md
    compared = [r for r in result.records if r.verdict != "incomparable"]
    assert len(compared) >= 500
    looser = [r.key for r in result.records if r.verdict == "looser"]
    assert looser == [], f"{len(looser)} calls where speculate is looser: {looser[:20]}"
    unlisted = [r.key for r in result.records if r.verdict == "stricter" and r.key not in INTENDED_STRICTER]
    assert unlisted == [], f"{len(unlisted)} stricter calls not in INTENDED_STRICTER: {unlisted[:20]}"
    stale = sorted(INTENDED_STRICTER.keys() - {r.key for r in result.records if r.verdict == "stricter"})
    assert stale == [], f"listed as stricter but no longer are: {stale}"
