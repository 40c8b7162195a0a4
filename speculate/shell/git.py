"""The git rule: reading subcommands are read-only, local writes are sandboxable, network is risky."""

from __future__ import annotations

from speculate.shell.args import Args, Ctx, split

READ = frozenset(
    """
    status log diff show blame annotate grep rev-parse ls-files ls-tree cat-file describe shortlog rev-list
    merge-base name-rev show-ref for-each-ref show-branch whatchanged diff-tree diff-files diff-index
    count-objects check-ignore check-attr check-ref-format var help version verify-commit verify-tag
    cherry range-diff get-tar-commit-id fsck
    """.split()
)
WRITE = frozenset(
    """
    add commit checkout switch restore reset rebase merge cherry-pick revert apply am rm mv clean init gc
    prune repack format-patch archive update-index update-ref commit-tree write-tree read-tree mktag
    mktree pack-refs sparse-checkout
    """.split()
)
NETWORK = frozenset(
    """
    push fetch pull clone ls-remote submodule send-email lfs svn p4 daemon instaweb credential
    credential-store credential-cache difftool mergetool maintenance request-pull
    """.split()
)
# Subcommands that are read-only in some forms: (read-only subcommand words, read-only flags).
_MIXED: dict[str, tuple[set[str], set[str]]] = {
    "stash": ({"list", "show"}, set()),
    "notes": ({"list", "show"}, set()),
    "reflog": ({"show", "exists"}, set()),
    "worktree": ({"list"}, set()),
}
_SAFE_CONFIG_PREFIXES = ("color.", "core.quotepath=", "log.", "diff.noprefix=", "diff.mnemonicprefix=")
_GLOBAL_VALUE = ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--exec-path")


def git_rule(ctx: Ctx, name: str, args: Args) -> None:
    if any(a is None for a in args):
        ctx.risky("git with an argument not known before running (it could be a writing flag)")
    words = [a for a in args if a is not None]
    i, dirs = 0, []
    while i < len(words) and words[i].startswith("-"):
        flag, eq, value = words[i].partition("=")
        if flag in _GLOBAL_VALUE and not eq:
            value = words[i + 1] if i + 1 < len(words) else ""
            i += 1
        if flag == "-c" and not value.startswith(_SAFE_CONFIG_PREFIXES):
            ctx.risky(f"git -c {value} may run a configured program")
        elif flag in ("--config-env", "--exec-path") or (flag == "--exec-path" and eq):
            ctx.risky(f"git {flag} changes what git runs")
        elif flag in ("-C", "--git-dir", "--work-tree"):
            dirs.append(value)
        elif flag in ("--version", "--help", "-h"):
            return
        i += 1
    if i == len(words):
        return  # `git` alone prints usage
    sub, rest = words[i], words[i + 1 :]
    effect = _subcommand(ctx, sub, rest)
    if effect == "write":
        for d in dirs:
            ctx.write(d, f"git {sub}")
        with ctx.cwd(dirs[0] if dirs and dirs[0] != "" else "."):
            ctx.write(".", f"git {sub} (repository)")


def _subcommand(ctx: Ctx, sub: str, rest: list[str]) -> str:
    """'read' or 'write'; reports risky itself."""
    if sub in NETWORK:
        if sub == "submodule" and rest[:1] in (["status"], ["summary"], []):
            return "read"
        ctx.risky(f"git {sub} reaches the network or runs external tools")
    outputs = [r.split("=", 1)[1] for r in rest if r.startswith(("--output=", "--output-directory="))]
    outputs += [
        rest[k + 1]
        for k, r in enumerate(rest[:-1])
        if r in ("--output", "-o", "--output-directory")
        and sub in ("diff", "log", "show", "format-patch", "archive")
    ]
    for out in outputs:
        ctx.write(out, f"git {sub} --output")
    if sub in READ:
        if sub == "grep" and any(r in ("-O", "--open-files-in-pager") or r.startswith("-O") for r in rest):
            ctx.risky("git grep -O runs a pager program")
        return "write" if outputs else "read"
    if sub in WRITE:
        if sub == "init" or sub == "clone":
            for target in split(rest, ("-b", "--template", "--separate-git-dir")).operands:
                ctx.write(target, f"git {sub}")
        return "write"
    if sub == "branch":
        return _branch(rest)
    if sub == "tag":
        return _tag(rest)
    if sub == "config":
        return _config(ctx, rest)
    if sub == "remote":
        if rest[:1] in ([], ["-v"], ["--verbose"], ["get-url"]):
            return "read"
        if rest[:1] in (["show"],) and "-n" in rest:
            return "read"
        if rest[:1] in (["add"], ["rename"], ["remove"], ["rm"], ["set-url"], ["set-branches"]):
            return "write"
        ctx.risky(f"git remote {' '.join(rest[:1])} may reach the network")
    if sub == "symbolic-ref":
        return (
            "read" if len([r for r in rest if not r.startswith("-")]) <= 1 and "-d" not in rest else "write"
        )
    if sub == "hash-object":
        return "write" if "-w" in rest else "read"
    if sub == "bisect":
        if rest[:1] == ["run"]:
            ctx.run(list(rest[1:]))
        return "write"
    if sub in _MIXED:
        reads, _ = _MIXED[sub]
        if sub == "worktree" and rest[:1] in (["add"], ["move"]):
            for target in split(rest[1:], ("-b", "-B", "--reason")).operands[: 1 if rest[0] == "add" else 2]:
                ctx.write(target, f"git worktree {rest[0]}")
        if sub == "reflog" and (not rest or rest[0].startswith("-") or rest[0] not in ("expire", "delete")):
            return "read"
        return "read" if rest[:1] and rest[0] in reads else "write"
    ctx.risky(f"git {sub} is not a known git subcommand (it could be an alias)")
    return "write"


_BRANCH_READ_FLAGS = {
    "-a",
    "--all",
    "-r",
    "--remotes",
    "-l",
    "--list",
    "-v",
    "-vv",
    "--verbose",
    "--show-current",
    "--color",
    "--no-color",
    "--column",
    "--no-column",
    "-i",
    "--ignore-case",
    "--omit-empty",
    "-q",
    "--quiet",
}
_BRANCH_VALUE_FLAGS = {
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
    "--sort",
    "--format",
    "--abbrev",
}


def _branch(rest: list[str]) -> str:
    listing, positional, k = False, False, 0
    while k < len(rest):
        r = rest[k]
        flag = r.split("=", 1)[0]
        if r in ("-l", "--list"):
            listing = True
        elif flag in _BRANCH_VALUE_FLAGS:
            listing = True
            if "=" not in r and flag in ("--points-at", "--sort", "--format") and k + 1 < len(rest):
                k += 1
        elif r.startswith("-") and flag not in _BRANCH_READ_FLAGS:
            return "write"
        elif not r.startswith("-"):
            positional = True
        k += 1
    return "write" if positional and not listing else "read"


def _tag(rest: list[str]) -> str:
    flags = [r for r in rest if r.startswith("-")]
    if any(
        f in ("-d", "--delete", "-a", "--annotate", "-s", "--sign", "-u", "-f", "--force", "-m", "-F")
        or f.startswith(("-m", "--message", "--file"))
        for f in flags
    ):
        return "write"
    listing = any(
        f in ("-l", "--list")
        or f.startswith(("-n", "--contains", "--points-at", "--sort", "--merged", "--no-merged", "--format"))
        for f in flags
    )
    return "read" if listing or len(flags) == len(rest) else "write"


_CONFIG_READ = {
    "--get",
    "--get-all",
    "--get-regexp",
    "--get-urlmatch",
    "--list",
    "-l",
    "--get-color",
    "--get-colorbool",
}


def _config(ctx: Ctx, rest: list[str]) -> str:
    flags = [r for r in rest if r.startswith("-")]
    words = [r for r in rest if not r.startswith("-")]
    if "--edit" in flags or "-e" in flags:
        ctx.risky("git config --edit opens an editor")
    reading = (
        bool(_CONFIG_READ.intersection(flags))
        or (words[:1] in (["get"], ["list"]))
        or (
            len(words) == 1
            and not any(
                f
                in (
                    "--unset",
                    "--unset-all",
                    "--remove-section",
                    "--rename-section",
                    "--add",
                    "--replace-all",
                )
                for f in flags
            )
        )
    )
    if reading:
        return "read"
    if any(f in ("--global", "--system") or f.startswith("--file") or f == "-f" for f in flags):
        ctx.risky("git config writes configuration outside the project")
    return "write"
