"""The corpus's configuration tables: sensitive files (``sensitive-files``), path rules and letter case
(``case``), the five modes (``modes``), settings-file keys and trust (``settings``), PreToolUse hooks
(``hooks``).

The sensitive paths are Claude Code 2.1.332's own lists (its binary holds them: shell profiles, git and
package-manager configuration, ``.mcp.json``, ``.claude.json``; the directories ``.git``, ``.vscode``,
``.idea``, ``.claude``, ``.husky``, ``.cargo``, ``.devcontainer``, ``.yarn``, ``.mvn`` and
``.config/git``), a sample of each.
"""

from __future__ import annotations

from .cases import MODES, Call, Config, HookRule, bash, config, edit, read, write

SENSITIVE = [
    ".claude/settings.local.json",
    ".claude/commands/x.md",
    ".claude/agents/x.md",
    ".claude/x.md",
    ".git/hooks/pre-commit",
    ".git/info/attributes",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zshenv",
    ".profile",
    ".mcp.json",
    ".claude.json",
    ".vscode/settings.json",
    ".idea/workspace.xml",
    ".gitconfig",
    ".gitmodules",
    ".husky/pre-commit",
    ".ripgreprc",
    ".envrc",
    ".npmrc",
    ".pre-commit-config.yaml",
    "pyrightconfig.json",
    "bunfig.toml",
    ".cargo/config.toml",
    ".devcontainer/devcontainer.json",
    ".config/git/config",
    "sub/.bashrc",
    "sub/.vscode/settings.json",
]
# Look alike, are not on the lists: written like any file.
NOT_SENSITIVE = ["plain.txt", "src/app.py", ".github/workflows/ci.yml", ".gitignore", "docs/profile.md"]
# The directories exist beforehand, so that a Write or a redirection needs no mkdir.
SENSITIVE_DIRS = {
    f"proj/{d}/.keep": ""
    for d in (
        ".claude/commands",
        ".claude/agents",
        ".vscode",
        ".idea",
        ".husky",
        ".cargo",
        ".devcontainer",
        ".config/git",
        "sub/.vscode",
        "src",
        ".github/workflows",
        "docs",
    )
}
# Existing sensitive files an Edit changes (read first, as Claude Code requires).
EDITED = {
    "proj/.git/description": None,
    "proj/sub/.zshrc": "# zshrc\n",
    "proj/.vscode/extensions.json": "{}\n",
}


def sensitive_files() -> list[Config]:
    c = "sensitive-files"
    paths = SENSITIVE + NOT_SENSITIVE
    writes = [write("{root}/" + p, c) for p in paths]
    edits: list[Call] = []
    for rel in EDITED:
        path = "{root}/" + rel.removeprefix("proj/")
        old = "Unnamed repository" if rel.endswith("description") else "#" if "zshrc" in rel else "{}"
        edits += [read(path, c), edit(path, old, old + "x", c)]  # not a space: Claude Code strips those
    files = {**SENSITIVE_DIRS, **{k: v for k, v in EDITED.items() if v is not None}}
    hook = (HookRule("Write|Edit", "", "allow"),)
    redirect = [bash(f"echo x > {p}", c) for p in paths]
    return [
        config("sensitive-acceptEdits", c, writes + edits, mode="acceptEdits", files=files),
        config("sensitive-edit-allow", c, writes + edits, permissions={"allow": ["Edit(**)"]}, files=files),
        config("sensitive-hook-allow", c, writes + edits, hooks=hook, files=files),
        config("sensitive-bypass", c, writes + edits, mode="bypassPermissions", files=files),
        config(
            "sensitive-bash", c, redirect, permissions={"allow": ["Bash"]}, mode="acceptEdits", files=files
        ),
    ]


def case() -> list[Config]:
    c = "case"
    files = {f"proj/{n}": f"{n}\n" for n in ("private.txt", "PRIVATE.TXT", "Private.txt", "Sub/private.txt")}
    calls = [
        *[read("{root}/" + n, c) for n in ("Private.txt", "private.txt", "PRIVATE.TXT", "Sub/private.txt")],
        *[bash(f"cat {n}", c) for n in ("Private.txt", "private.txt", "PRIVATE.TXT")],
        *[write("{root}/" + n, c) for n in ("NewFile.txt", "newfile.txt", "NEWFILE.TXT", "Docs/newfile.txt")],
        *[bash(f"echo x > {n}", c) for n in ("locked.txt", "LOCKED.TXT")],
        bash("rm B.txt", c),
        bash("Rm b.txt", c),
    ]
    perms = {
        "allow": ["Bash"],
        "deny": ["Read(Private.txt)", "Edit(NewFile.txt)", "Edit(locked.txt)", "Bash(rm:*)"],
    }
    return [config("case-rules", c, calls, permissions=perms, mode="acceptEdits", files=files)]


def bare_rules() -> list[Config]:
    """A rule without a specifier names its own tool (observed: a bare ``Edit`` allow leaves Write asking,
    where ``Edit(**)`` covers it)."""
    c = "modes"
    calls = [write("{root}/new-b.txt", c), edit("{root}/a.txt", "alpha", "ALPHA", c), read("{side}/s.txt", c)]
    return [
        config("bare-allow-Edit", c, calls, permissions={"allow": ["Edit"]}, mode="default"),
        config("bare-ask-Edit", c, calls, permissions={"ask": ["Edit"]}, mode="acceptEdits"),
        config("bare-deny-Edit", c, calls, permissions={"deny": ["Edit"]}, mode="acceptEdits"),
        config("bare-allow-Read", c, calls, permissions={"allow": ["Read"]}, mode="default"),
    ]


def modes() -> list[Config]:
    c = "modes"
    calls = [
        read("{root}/a.txt", c),
        read("{home}/secret.txt", c),
        read("{side}/s.txt", c),
        read("{root}/secret.txt", c),
        write("{root}/new-w.txt", c),
        write("{side}/new-out.txt", c),
        edit("{root}/a.txt", "alpha", "ALPHA", c),
        bash("ls", c),
        bash("cat a.txt", c),
        bash("git status", c),
        bash("touch m1.txt", c),
        bash("echo x > m2.txt", c),
        bash("mkdir m3", c),
        bash("python3 x.py", c),
        bash("cat ~/secret.txt", c),
        bash("rm b.txt", c),
        bash("cat secret.txt", c),
    ]
    perms = {"deny": ["Bash(rm:*)", "Read(secret.txt)"]}
    return [config(f"mode-{m}", c, calls, permissions=perms, mode=m) for m in MODES]


def settings() -> list[Config]:
    c = "settings"
    out = []
    dm_calls = [
        read("{root}/a.txt", c),
        write("{root}/dm-w.txt", c),
        edit("{root}/a.txt", "alpha", "ALPHA", c),
        bash("ls", c),
        bash("touch dm-t.txt", c),
        bash("rm b.txt", c),
    ]
    for dm in MODES:
        perms = {"defaultMode": dm, "deny": ["Bash(rm:*)"]}
        out.append(config(f"defaultMode-{dm}", c, dm_calls, permissions=perms, mode=None))
    out.append(
        config(
            "defaultMode-overridden", c, dm_calls, permissions={"defaultMode": "acceptEdits"}, mode="default"
        )
    )
    out.append(
        config("defaultMode-user", c, dm_calls, user_permissions={"defaultMode": "acceptEdits"}, mode=None)
    )
    extra = [
        read("{side}/s.txt", c),
        bash("cat ../side/s.txt", c),
        bash("ls ../side", c),
        bash("grep sib ../side/s.txt", c),
        write("{side}/w.txt", c),
        bash("touch ../side/t.txt", c),
        read("{home}/secret.txt", c),
        bash("cat ../outside.txt", c),
    ]
    for m in ("default", "acceptEdits"):
        out.append(
            config(f"additional-abs-{m}", c, extra, permissions={"additionalDirectories": ["{side}"]}, mode=m)
        )
    out.append(config("additional-rel", c, extra, permissions={"additionalDirectories": ["../side"]}))
    out.append(config("additional-none", c, extra))
    ask_calls = [
        bash("git status", c),
        bash("git status --short", c),
        bash("ls", c),
        read("{root}/notes.md", c),
        read("{root}/a.txt", c),
        write("{root}/docs/d.md", c),
        write("{root}/other.md", c),
        bash("cat notes.md", c),
        bash("echo x > docs/e.md", c),
    ]
    perms = {
        "allow": ["Bash", "Read", "Edit", "Write"],
        "ask": ["Bash(git status:*)", "Read(notes.md)", "Edit(docs/**)"],
    }
    out.append(
        config(
            "ask-rules", c, ask_calls, permissions=perms, mode="acceptEdits", files={"proj/docs/.keep": ""}
        )
    )
    trust_calls = [
        bash("touch u1.txt", c),
        bash("echo x > u2.txt", c),
        bash("ls", c),
        bash("rm b.txt", c),
        write("{root}/u3.txt", c),
        read("{root}/a.txt", c),
        read("{root}/secret.txt", c),
    ]
    perms = {"allow": ["Bash", "Write", "Edit"], "deny": ["Bash(rm:*)", "Read(secret.txt)"]}
    for trusted in (False, True):
        name = "trusted" if trusted else "untrusted"
        out.append(config(f"{name}-allow", c, trust_calls, permissions=perms, trusted=trusted))
        out.append(config(f"{name}-local", c, trust_calls, local_permissions=perms, trusted=trusted))
    layered = [
        bash("touch s1.txt", c),
        bash("touch s-denied.txt", c),
        bash("touch s-asked.txt", c),
        read("{home}/secret.txt", c),
        bash("cat ~/secret.txt", c),
    ]
    out.append(
        config(
            "layered-files",
            c,
            layered,
            user_permissions={"allow": ["Bash(touch:*)"], "deny": ["Read(~/secret.txt)"]},
            local_permissions={"deny": ["Bash(touch s-denied.txt)"]},
            permissions={"ask": ["Bash(touch s-asked.txt)"]},
        )
    )
    return out


def hooks() -> list[Config]:
    c = "hooks"
    answers = (
        HookRule("Bash", "hook-allow", "allow"),
        HookRule("Bash", "hook-ask", "ask"),
        HookRule("Bash", "hook-deny", "deny"),
        HookRule("Write", "hook-allow", "allow"),
        HookRule("Write", "hook-ask", "ask"),
        HookRule("Write", "hook-deny", "deny"),
    )
    calls = [
        bash("touch hook-allow-1.txt", c),
        bash("touch hook-ask-1.txt", c),
        bash("touch hook-deny-1.txt", c),
        bash("rm hook-allow-b.txt", c),
        bash("touch hook-allow-a.txt && touch other.txt", c),
        bash("ls hook-allow-x", c),
        write("{root}/hook-allow-w.txt", c),
        write("{root}/hook-ask-w.txt", c),
        write("{root}/hook-deny-w.txt", c),
        write("{root}/hook-allow/.bashrc", c),
        write("{home}/hook-allow-out.txt", c),
        bash("touch hook-allow-asked.txt", c),
    ]
    perms = {"deny": ["Bash(rm:*)"], "ask": ["Bash(touch hook-allow-asked.txt)"]}
    files = {"proj/hook-allow-b.txt": "b\n", "proj/hook-allow/.keep": ""}
    out = [
        config(f"hook-answers-{m}", c, calls, permissions=perms, hooks=answers, mode=m, files=files)
        for m in ("default", "acceptEdits", "bypassPermissions", "dontAsk")
    ]
    spaced = (
        HookRule("Edit | Write", "guard", "deny"),
        HookRule("Bash ", "guard", "deny"),
        HookRule(" Read", "guard", "deny"),
    )
    guarded = [
        write("{root}/guard-1.txt", c),
        read("{root}/guard-r.txt", c),
        edit("{root}/guard-r.txt", "g", "G", c),
        bash("touch guard-2.txt", c),
        bash("touch free.txt", c),
    ]
    out.append(
        config(
            "hook-matcher-spaces",
            c,
            guarded,
            hooks=spaced,
            mode="acceptEdits",
            permissions={"allow": ["Bash"]},
            files={"proj/guard-r.txt": "g\n"},
        )
    )
    return out
