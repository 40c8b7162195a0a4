"""Rules for tools with writing flags (find, sed, awk, sort, patch, ...), and the registry by command name
they are in with git's, the archivers' (:mod:`speculate.shell.archives`) and the build, test and package
tools' (:mod:`speculate.shell.build`)."""

from __future__ import annotations

from collections.abc import Callable

from speculate.shell import archives, build
from speculate.shell.args import Args, Ctx, Rule, is_version_query, split, static_args
from speculate.shell.git import git_rule
from speculate.shell.scripts import scan_awk, scan_sed

_TOOLS: dict[str, Rule] = {"git": git_rule}


def lookup(name: str) -> Rule | None:
    return _TOOLS.get(name)


def tool(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            _TOOLS[name] = fn
        return fn

    return register


# -- find / fd / rg ----------------------------------------------------------------------------------

_FIND_EXEC = ("-exec", "-execdir", "-ok", "-okdir")
_FIND_FILE_OUT = ("-fprint", "-fprint0", "-fprintf", "-fls")


@tool("find")
def _find(ctx: Ctx, name: str, args: Args) -> None:
    i = 0
    while i < len(args) and (args[i] in ("-H", "-L", "-P") or (args[i] or "").startswith(("-O", "-D"))):
        i += 2 if args[i] == "-D" else 1
    roots: Args = []
    while i < len(args) and ((a := args[i]) is None or not a.startswith(("-", "(", "!", ")", ","))):
        roots.append(args[i])
        i += 1
    if None in roots:
        ctx.risky("find with an argument not known before running (it could be -delete or -exec)")
    roots = roots or ["."]
    expr = args[i:]
    static_args(ctx, "find", expr)
    k = 0
    while k < len(expr):
        token = expr[k]
        k += 1
        if token == "-delete":
            for root in roots:
                ctx.write(root, "find -delete")
        elif token in _FIND_FILE_OUT:
            ctx.write(expr[k] if k < len(expr) else None, f"find {token}")
        elif token in _FIND_EXEC:
            end = k
            while end < len(expr) and expr[end] not in (";", "+"):
                end += 1
            command = expr[k:end]
            k = end + 1
            for root in roots:
                found = None if root is None else root.rstrip("/") + "/_"
                argv: Args = [found if a == "{}" else (None if a and "{}" in a else a) for a in command]
                if token in ("-execdir", "-okdir") and found is not None:
                    # Runs in each file's directory (some depth below the root): `..` could go anywhere.
                    argv = argv[:1] + [_in_dir(a, found) for a in argv[1:]]
                ctx.run(argv)


def _in_dir(arg: str | None, directory: str) -> str | None:
    if arg is None or arg.startswith(("-", "/")) or arg == directory:
        return arg
    return None if ".." in arg.split("/") else f"{directory}/{arg}"


@tool("fd", "fdfind")
def _fd(ctx: Ctx, name: str, args: Args) -> None:
    words = static_args(ctx, name, args)
    for k, a in enumerate(words):
        if a in ("-x", "--exec", "-X", "--exec-batch"):
            ctx.run([None if "{" in w else w for w in words[k + 1 :]] + [None])
            return


@tool("rg")
def _rg(ctx: Ctx, name: str, args: Args) -> None:
    if any(a is None or a == "--pre" or a.startswith("--pre=") for a in args):
        ctx.risky("rg --pre runs a program on every file")


# -- stream editors ------------------------------------------------------------------------------------


@tool("sed", "gsed")
def _sed(ctx: Ctx, name: str, args: Args) -> None:
    words = static_args(ctx, name, args)
    scripts: list[str] = []
    files: list[str] = []
    in_place = sandboxed = False
    k = 0
    while k < len(words):
        w = words[k]
        k += 1
        if w == "--":
            files += words[k:]
            break
        if w.startswith("--"):
            flag, eq, value = w.partition("=")
            if flag == "--in-place":
                in_place = True
            elif flag == "--expression":
                scripts.append(value if eq else (words[k] if k < len(words) else ""))
                k += 0 if eq else 1
            elif flag == "--file":
                ctx.risky("sed -f runs a script file that is not inspected")
            elif flag == "--sandbox":
                sandboxed = True
            elif flag == "--line-length" and not eq:
                k += 1
        elif w.startswith("-") and len(w) > 1:
            for j, letter in enumerate(w[1:], start=1):
                if letter == "i":
                    in_place = True
                    break  # the rest of the bundle is a backup suffix
                if letter in "ef":
                    value = w[j + 1 :] or (words[k] if k < len(words) else "")
                    k += 0 if w[j + 1 :] else 1
                    if letter == "f":
                        ctx.risky("sed -f runs a script file that is not inspected")
                    scripts.append(value)
                    break
                if letter == "l":
                    k += 0 if w[j + 1 :] else 1
                    break
        else:
            files.append(w)
    if not scripts and files:
        scripts.append(files.pop(0))
    for script in scripts:
        effects = scan_sed(script)
        if not effects.understood:
            ctx.risky(f"sed script {script!r} could not be checked for writes or commands")
        if effects.executes and not sandboxed:
            ctx.risky("the sed script runs shell commands (e)")
        for target in [] if sandboxed else effects.writes:
            ctx.write(target, "sed w")
    if in_place:
        for target in files:
            ctx.write(target, "sed -i")


@tool("awk", "gawk", "mawk", "nawk")
def _awk(ctx: Ctx, name: str, args: Args) -> None:
    words = static_args(ctx, name, args)
    p = split(
        words,
        (
            "-F",
            "-v",
            "-f",
            "-i",
            "-e",
            "-E",
            "-l",
            "--source",
            "--include",
            "--load",
            "--file",
            "--field-separator",
            "--assign",
        ),
    )
    if p.values("-f", "--file", "-E", "-l", "--load"):
        ctx.risky(f"{name} runs a program file that is not inspected")
    includes = p.values("-i", "--include")
    if any(inc not in ("inplace", "inplace.awk") for inc in includes):
        ctx.risky(f"{name} -i loads a library that is not inspected")
    programs = [v or "" for v in p.values("-e", "--source")]
    operands = [o or "" for o in p.operands]
    if not programs and operands:
        programs.append(operands.pop(0))
    if not p.has("--sandbox", "-S"):
        for program in programs:
            effects = scan_awk(program)
            if effects.executes:
                ctx.risky(f"the {name} program runs commands (system or pipes)")
            if not effects.understood:
                ctx.risky(f"the {name} program redirects output to a file")
    if includes:
        for target in operands:
            if "=" not in target:
                ctx.write(target, f"{name} -i inplace")


@tool("perl")
def _perl(ctx: Ctx, name: str, args: Args) -> None:
    words = static_args(ctx, name, args)
    if is_version_query(words) or words == ["-v"]:
        return
    ctx.code("perl runs code locally")
    in_place, files, k, code_seen = False, [], 0, False
    while k < len(words):
        w = words[k]
        k += 1
        if w == "--":
            files += words[k:]
            break
        if w.startswith("-") and len(w) > 1:
            for letter in w[1:]:
                if letter == "i":
                    in_place = True
                    break
                if letter in "eE":
                    code_seen = True
                    k += 1 if w.endswith(letter) else 0
                    break
        elif not code_seen:
            code_seen = True  # the script file
        else:
            files.append(w)
    if in_place:
        for target in files:
            ctx.write(target, "perl -i")


# -- commands whose output flags or operands write ----------------------------------------------------


@tool("sort", "shuf", "tree", "iconv")
def _output_flag(ctx: Ctx, name: str, args: Args) -> None:
    flags = {
        "sort": ("-o", "--output"),
        "shuf": ("-o", "--output"),
        "tree": ("-o",),
        "iconv": ("-o", "--output"),
    }[name]
    values = {
        "sort": (
            "-k",
            "-t",
            "-S",
            "-T",
            "--key",
            "--field-separator",
            "--buffer-size",
            "--temporary-directory",
            "--parallel",
            "--batch-size",
            "--files0-from",
        ),
        "shuf": ("-n", "-i", "--head-count", "--input-range", "--random-source"),
        "tree": ("-L", "-P", "-I", "--charset", "--filelimit", "--timefmt", "--sort"),
        "iconv": ("-f", "-t", "--from-code", "--to-code"),
    }[name]
    p = split(static_args(ctx, name, args), (*flags, *values))
    if p.has("--compress-program"):
        ctx.risky("sort --compress-program runs a program")
    for target in p.values(*flags):
        ctx.write(target, f"{name} {flags[0]}")
    for directory in p.values("-T", "--temporary-directory") if name == "sort" else []:
        ctx.write(directory, "sort -T")


@tool("uniq", "xxd")
def _second_operand(ctx: Ctx, name: str, args: Args) -> None:
    values = {
        "uniq": (
            "-f",
            "-s",
            "-w",
            "--skip-fields",
            "--skip-chars",
            "--check-chars",
            "--group",
            "--all-repeated",
        ),
        "xxd": ("-c", "-g", "-l", "-s", "-o", "-n", "-C", "-cols", "-len", "-seek", "-offset", "-name"),
    }
    p = split(static_args(ctx, name, args), values[name])
    if len(p.operands) > 1:
        ctx.write(p.operands[1], name)


@tool("split", "csplit")
def _split_files(ctx: Ctx, name: str, args: Args) -> None:
    p = split(
        static_args(ctx, name, args),
        (
            "-l",
            "-b",
            "-C",
            "-n",
            "-a",
            "-t",
            "-f",
            "--prefix",
            "--lines",
            "--bytes",
            "--line-bytes",
            "--number",
            "--suffix-length",
            "--additional-suffix",
            "--separator",
            "--filter",
        ),
    )
    if p.values("--filter"):
        ctx.risky("split --filter runs a shell command")
    if name == "split":
        ctx.write(p.operands[1] if len(p.operands) > 1 else "x", name)
    else:
        ctx.write((p.values("-f", "--prefix") or ["xx"])[-1], name)


@tool("patch")
def _patch(ctx: Ctx, name: str, args: Args) -> None:
    p = split(
        static_args(ctx, name, args),
        (
            "-p",
            "-d",
            "-o",
            "-i",
            "-r",
            "-B",
            "-z",
            "-F",
            "-D",
            "--directory",
            "--output",
            "--input",
            "--reject-file",
            "--strip",
        ),
    )
    if p.has("--dry-run", "-C", "--check"):
        return
    directory = (p.values("-d", "--directory") or ["."])[-1]
    with ctx.cwd(directory):
        ctx.write(".", "patch")
        for target in [*p.operands[:1], *p.values("-o", "--output", "-r", "--reject-file")]:
            ctx.write(target, "patch")


@tool("yq", "clang-format", "gofmt", "autopep8", "sponge")
def _in_place_flag(ctx: Ctx, name: str, args: Args) -> None:
    words = static_args(ctx, name, args)
    flag = {
        "yq": ("-i", "--inplace"),
        "clang-format": ("-i",),
        "gofmt": ("-w",),
        "autopep8": ("-i", "--in-place"),
        "sponge": (),
    }[name]
    p = split(words, ("-o", "--output-format", "-p", "--input-format", "--style", "-r", "--assume-filename"))
    if name == "sponge" or p.has(*flag):
        for target in p.operands[1:] if name == "yq" else p.operands:
            ctx.write(target, f"{name} {' '.join(flag)}".strip())


build.register(tool)
archives.register(tool)
