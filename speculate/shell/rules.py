"""Per-command rules: what a simple command does with its arguments.

A rule reports through the context (risky / sandbox / write / run ...); a rule that reports nothing
means the command is read-only. Commands with no rule are risky. Tool-specific rules (git, package
managers, find, sed, awk, tar, ...) are found through :mod:`speculate.shell.tools`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from speculate.shell.args import Args, Ctx, Rule, split

# Commands that never write, whatever their arguments (their output goes to stdout).
READ_ONLY = frozenset(
    """
    cat head tail wc grep egrep fgrep zgrep file stat du df pwd echo true false test [ which
    whereis type basename dirname realpath readlink uname whoami id groups diff cmp comm cut tr nl fold
    fmt paste join column rev tac od hexdump strings md5sum sha1sum sha224sum sha256sum sha384sum
    sha512sum shasum cksum b2sum base64 base32 jq locate ps pgrep free uptime seq expr sleep printenv ls
    dir vdir less more zcat bzcat xzcat zless look getconf nproc arch locale tty logname users who cal
    : getopts return exit break continue shift wait jobs set shopt unalias umask man help info
    apropos lsof nm objdump readelf expand unexpand numfmt factor tsort clear tput yes
    dirs unset shellcheck ss netstat lsblk sha1 md5 env_parallel_noop
    """.split()
)

NETWORK = frozenset(
    """
    curl wget ssh scp sftp rsync nc ncat netcat telnet ftp socat ping ping6 dig nslookup host traceroute
    http https aria2c gh aws gcloud az heroku vercel firebase terraform ansible lynx w3m links
    """.split()
)
PRIVILEGE = frozenset("sudo doas su pkexec runuser chroot setpriv".split())
SYSTEM = frozenset(
    """
    docker podman kubectl helm systemctl service launchctl kill pkill killall shutdown reboot halt
    poweroff crontab at batch mount umount mkfs fdisk parted useradd userdel usermod passwd chpasswd
    iptables sysctl modprobe insmod rmmod open xdg-open osascript setsid disown daemon coproc hash
    enable watch screen tmux
    """.split()
)
PACKAGES = frozenset(
    """
    apt apt-get aptitude dpkg yum dnf rpm brew snap flatpak pacman apk zypper port conda mamba micromamba
    pipx npx bunx uvx gem bundle poetry pdm uv tox nox pre-commit composer mvn gradle dotnet
    """.split()
)

_RULES: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            _RULES[name] = fn
        return fn

    return register


def unknown(ctx: Ctx, name: str, args: Args) -> None:
    ctx.risky(f"{name} is not a known command")


def read_only(ctx: Ctx, name: str, args: Args) -> None:
    return None


def lookup(name: str) -> Rule:
    """The rule for a command name (without directory)."""
    found = _RULES.get(name)
    if found is not None:
        return found
    if name in READ_ONLY:
        return read_only
    for group, why in (
        (NETWORK, "reaches the network"),
        (PRIVILEGE, "changes privileges"),
        (SYSTEM, "acts on the system outside the project"),
        (PACKAGES, "installs or resolves packages (network, system-wide)"),
    ):
        if name in group:
            return _fixed_risk(why)
    from speculate.shell import tools  # registers on import; late to keep the modules acyclic

    return tools.lookup(name) or unknown


def _fixed_risk(why: str) -> Rule:
    def risky(ctx: Ctx, name: str, args: Args) -> None:
        ctx.risky(f"{name} {why}")

    return risky


# -- writers whose operands are all written ------------------------------------------------------------

_WRITER_VALUES = {
    "rm": (),
    "rmdir": (),
    "unlink": (),
    "shred": ("-n", "-s", "--iterations", "--size"),
    "mkdir": ("-m", "--mode", "--context"),
    "touch": ("-r", "-t", "-d", "--reference", "--date"),
    "truncate": ("-s", "-r", "--size", "--reference"),
    "tee": (),
    "mv": ("-t", "-S", "--target-directory"),
    "chmod": ("--reference",),
    "chown": ("--reference", "--from"),
    "chgrp": ("--reference",),
}


@rule(*_WRITER_VALUES)
def _writer(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args, _WRITER_VALUES[name])
    operands = p.operands
    if name in ("chmod", "chown", "chgrp") and not p.has("--reference") and operands:
        operands = operands[1:]  # the mode / owner
    if name == "touch":
        for ref in p.values("-r", "--reference"):
            if ref is None:
                ctx.risky("touch -r with a reference not known before running")
    for target in [*operands, *p.values("-t", "--target-directory")] if name == "mv" else operands:
        ctx.write(target, name)


@rule("cp", "install")
def _copy(ctx: Ctx, name: str, args: Args) -> None:
    p = split(
        args, ("-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "--owner", "-g", "--group")
    )
    targets = p.values("-t", "--target-directory")
    if name == "install" and p.has("-d", "--directory"):
        targets += p.operands
    elif not targets:
        targets = p.operands[-1:] if len(p.operands) > 1 else [None]
    for target in targets:
        ctx.write(target, name)


@rule("ln")
def _link(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args, ("-t", "--target-directory", "-S", "--suffix"))
    dirs = p.values("-t", "--target-directory")
    links = dirs or (p.operands[-1:] if len(p.operands) > 1 else ["."])
    for link in links:
        ctx.write(link, "ln")
    sources = p.operands if dirs or len(p.operands) < 2 else p.operands[:-1]
    for src in sources:
        if src is None or src.startswith(("/", "~")):
            ctx.write(src, "ln (link target)")
        else:  # a relative link target is relative to the link's directory
            base = links[0] if dirs else (posixpath.dirname(links[0]) if links[0] else None)
            ctx.write(None if base is None else posixpath.join(base, src), "ln (link target)")


@rule("dd")
def _dd(ctx: Ctx, name: str, args: Args) -> None:
    for arg in args:
        if arg is None:
            ctx.risky("dd with an operand not known before running")
        elif arg.startswith("of="):
            ctx.write(arg[3:], "dd")


@rule("mktemp")
def _mktemp(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args, ("-p", "--tmpdir", "--suffix"))
    if p.has("-u", "--dry-run"):
        return
    base = p.values("-p", "--tmpdir")
    template = p.operands[0] if p.operands else "tmp.XXXXXXXXXX"
    if template is not None and "/" not in template and (base or p.has("-t") or not p.operands):
        template = posixpath.join(base[0] or "/tmp", template) if base else posixpath.join("/tmp", template)
    ctx.write(template, "mktemp")


# -- shell builtins and wrappers -------------------------------------------------------------------


@rule("cd", "pushd")
def _cd(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args)
    ctx.cd(p.operands[0] if p.operands else None)


@rule("popd")
def _popd(ctx: Ctx, name: str, args: Args) -> None:
    ctx.cd(None)


@rule("eval")
def _eval(ctx: Ctx, name: str, args: Args) -> None:
    if any(a is None for a in args):
        ctx.risky("eval of text not known before running")
    ctx.script(" ".join(a for a in args if a is not None), subshell=False)


@rule("source", ".")
def _source(ctx: Ctx, name: str, args: Args) -> None:
    path = args[0] if args else None
    if path is not None and posixpath.basename(path) == "activate" and ctx.locate(path) is None:
        return  # activating a project virtualenv only changes this shell's variables
    ctx.script_file(path, subshell=False)


@rule("bash", "sh", "dash", "zsh", "ksh")
def _shell(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args, ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"), stop_at_operand=True)
    if p.has("-s") or (p.dynamic and not p.operands):
        ctx.risky(f"{name} reads commands not known before running")
    if p.has("-c"):
        text = p.operands[0] if p.operands else None
        if text is None:
            ctx.risky(f"{name} -c with a script not known before running")
        else:
            ctx.script(text, subshell=True)
    elif p.operands:
        ctx.script_file(p.operands[0])
    elif not (p.has("--version") or p.has("--help")):
        ctx.risky(f"{name} reads commands from stdin")


@rule("trap")
def _trap(ctx: Ctx, name: str, args: Args) -> None:
    if not args or args[0] in ("-l", "-p", "-", "--"):
        return
    if args[0] is None:
        ctx.risky("trap with a handler not known before running")
    else:
        ctx.script(args[0], subshell=False)


@rule("alias")
def _alias(ctx: Ctx, name: str, args: Args) -> None:
    if any(a is None or "=" in a for a in args):
        ctx.risky("defines an alias, which changes what later commands run")


@rule("read", "mapfile", "readarray", "printf")
def _sets_variables(ctx: Ctx, name: str, args: Args) -> None:
    """These builtins assign the variables they name; PATH and friends must not be set this way."""
    if name == "printf":
        names = split(args, ("-v",)).values("-v")
    else:
        p = split(args, ("-a", "-d", "-n", "-N", "-p", "-t", "-u", "-i", "-C", "-c", "-O", "-s"))
        names = [*p.operands, *p.values("-a")]
    for var in names:
        if var is None:
            ctx.risky(f"{name} assigns a variable whose name is not known before running")
        else:
            ctx.assign(var)


@rule("export", "declare", "typeset", "local", "readonly")
def _declare(ctx: Ctx, name: str, args: Args) -> None:
    # Reached only for names given as plain words (the parser turns `export X=1` into assignments).
    for arg in args:
        if arg is None:
            ctx.risky(f"{name} with an argument not known before running")
        elif "=" in arg and not arg.startswith("-"):
            ctx.assign(arg.split("=", 1)[0].rstrip("+"))


@rule("command", "builtin", "exec", "time", "nice", "nohup", "stdbuf", "timeout", "ionice", "env")
def _wrapper(ctx: Ctx, name: str, args: Args) -> None:
    values = {
        "time": ("-o", "-f", "--output", "--format"),
        "nice": ("-n", "--adjustment"),
        "stdbuf": ("-i", "-o", "-e", "--input", "--output", "--error"),
        "timeout": ("-s", "-k", "--signal", "--kill-after"),
        "ionice": ("-c", "-n", "--class", "--classdata"),
        "env": ("-u", "-C", "--unset", "--chdir", "-S", "--split-string"),
    }.get(name, ())
    p = split(args, values, stop_at_operand=True)
    rest = p.operands
    if name == "command" and p.has("-v", "-V"):
        return
    if name == "time":
        for out in p.values("-o", "--output"):
            ctx.write(out, "time -o")
    if name == "ionice" and p.has("-p", "-P", "-u"):
        ctx.risky("ionice changes another process")
    if name == "nohup":
        ctx.write("nohup.out", "nohup")
    if name == "timeout":
        rest = rest[1:]  # the duration
    if name != "env":
        ctx.run(rest)  # `builtin cd` / `command cd` change this shell's directory: no scope
        return
    if p.has("-S", "--split-string"):
        ctx.risky("env -S splits a string into a command")
    while rest and rest[0] is not None and "=" in rest[0]:
        ctx.assign(rest[0].split("=", 1)[0])
        rest = rest[1:]
    dirs = p.values("-C", "--chdir")
    with ctx.cwd(dirs[-1] if dirs else "."):
        ctx.run(rest)


@rule("xargs")
def _xargs(ctx: Ctx, name: str, args: Args) -> None:
    p = split(
        args,
        (
            "-I",
            "-L",
            "-n",
            "-P",
            "-d",
            "-E",
            "-s",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-lines",
            "--eof",
            "--max-chars",
            "--replace",
        ),
        stop_at_operand=True,
    )
    command = p.operands or ["echo"]
    replace = [v for f, v in p.opts if f in ("-I", "--replace", "-i")]
    if replace:
        token = replace[0] or "{}"
        ctx.run([None if a is None or token in a else a for a in command])
    else:
        ctx.run([*command, None])  # items from stdin are not known before running


@rule("date")
def _date(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args, ("-d", "--date", "-r", "--reference", "-f", "--file", "-I"))
    if p.has("-s", "--set") or any(op is None or not op.startswith("+") for op in p.operands):
        ctx.risky("date may set the system clock")


@rule("hostname")
def _hostname(ctx: Ctx, name: str, args: Args) -> None:
    if split(args).operands or any(a in ("-F", "--file", "-b", "--boot") for a in args):
        ctx.risky("hostname sets the host name")


@rule("python", "python2", "python3", "pypy", "pypy3", *(f"python3.{m}" for m in range(6, 16)))
def _python(ctx: Ctx, name: str, args: Args) -> None:
    from speculate.shell.build import python_rule

    python_rule(ctx, name, args)
