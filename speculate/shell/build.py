"""Rules for interpreters, build, test and package tools.

Known local tools (test runners, compilers, linters, interpreters) are sandboxable: their effects are
taken to stay in the project and /tmp once the network is cut. Anything that installs, publishes or
fetches is risky.
"""

from __future__ import annotations

from collections.abc import Callable

from speculate.shell.args import Args, Ctx, Rule, is_version_query, split

# Test runners, compilers and linters: sandboxable; output options are checked.
LOCAL = frozenset(
    """
    pytest py.test node deno ruby php lua Rscript julia make gmake cmake ninja meson ctest rustc gcc g++
    cc c++ clang clang++ javac java kotlinc tsc jest vitest mocha eslint prettier ruff mypy pyright
    black isort flake8 pylint coverage rustfmt tsx ts-node swiftc bandit pydocstyle pycodestyle
    pyflakes hypothesis sphinx-build mkdocs doctest
    """.split()
)
_OUTPUT_OPTS = (
    "-o",
    "--output",
    "--outdir",
    "--out-dir",
    "--target-dir",
    "--basetemp",
    "-C",
    "--directory",
    "--cache-dir",
    "--build-dir",
    "-B",
    "--prefix",
)
# Formatters rewrite the files they are given.
_REWRITES_OPERANDS = frozenset({"black", "isort", "rustfmt", "prettier", "ruff"})
_MAKE_RISKY_TARGETS = frozenset(
    {"install", "uninstall", "deploy", "publish", "release", "upload", "dist-upload"}
)


def register(tool: Callable[..., Callable[[Rule], Rule]]) -> None:
    """Add these rules through ``tool`` (the registry decorator of :mod:`speculate.shell.tools`)."""
    tool(*LOCAL)(_local)
    tool("pip", "pip3")(_pip)
    tool("npm")(_npm)
    tool("yarn", "pnpm", "bun")(_yarn)
    tool("cargo")(_cargo)
    tool("go")(_go)


def _local(ctx: Ctx, name: str, args: Args) -> None:
    if is_version_query(args):
        return
    ctx.code(f"{name} runs locally (writes confined to the project and /tmp)")
    words = [a for a in args if a is not None]
    if len(words) != len(args) and name in _REWRITES_OPERANDS:
        ctx.risky(f"{name} with an argument not known before running")
    for k, w in enumerate(words):
        flag, eq, value = w.partition("=")
        if flag in _OUTPUT_OPTS and (eq or k + 1 < len(words)):
            if name in ("make", "gmake") and flag in ("-C", "--directory"):
                continue  # checked below as the directory make writes in
            ctx.write(value if eq else words[k + 1], f"{name} {flag}")
        elif w.startswith("-o") and len(w) > 2 and name in ("gcc", "g++", "cc", "c++", "clang", "clang++"):
            ctx.write(w[2:], f"{name} -o")
    if name in ("make", "gmake"):
        p = split(
            args,
            (
                "-C",
                "--directory",
                "-f",
                "--file",
                "--makefile",
                "-j",
                "--jobs",
                "-I",
                "-o",
                "-W",
                "-l",
                "--load-average",
            ),
        )
        targets = {t for t in p.operands if t is not None and "=" not in t}
        if targets & _MAKE_RISKY_TARGETS:
            ctx.risky(f"make {' '.join(sorted(targets & _MAKE_RISKY_TARGETS))} writes outside the project")
        for d in p.values("-C", "--directory"):
            ctx.write(d, "make -C")
    if name in _REWRITES_OPERANDS:
        p = split(
            words,
            (
                "--config",
                "-l",
                "--line-length",
                "--target-version",
                "--extend-select",
                "--select",
                "--ignore",
                "--exclude",
                "--include",
                "--settings-path",
            ),
        )
        for target in p.operands:
            if target not in ("check", "format", "rule", "."):
                ctx.write(target, name)


def python_rule(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args, ("-c", "-m", "-W", "-X", "-Q"), stop_at_operand=True)
    if not args or is_version_query(args):
        if not args:
            ctx.code(f"{name} runs code from stdin")
        return
    modules = p.values("-m")
    if modules:
        module, rest = modules[0], p.operands
        if module in ("pip", "pip3"):
            _pip(ctx, "pip", rest)
            return
        if module in (
            "ensurepip",
            "http.server",
            "SimpleHTTPServer",
            "smtpd",
            "webbrowser",
            "ftplib",
            "pydoc_data.serve",
            "twine",
        ):
            ctx.risky(f"python -m {module} reaches the network or the system")
        if module in ("venv", "virtualenv"):
            for target in split(rest, ("--prompt",)).operands:
                ctx.write(target, f"python -m {module}")
        if module in ("pytest", "unittest", "mypy", "ruff", "black", "isort", "coverage", "doctest"):
            _local(ctx, module, rest)
    ctx.code(f"{name} runs code locally")


def _pip(ctx: Ctx, name: str, args: Args) -> None:
    p = split(args, ("-r", "-c", "-e", "-t", "--target", "--prefix", "--root"), stop_at_operand=True)
    sub = p.operands[0] if p.operands else None
    if is_version_query(args) or sub in ("list", "show", "freeze", "check", "help", "inspect", "debug"):
        return
    ctx.risky(
        f"pip {sub or ''} installs or changes packages (network, outside the project)".replace("  ", " ")
    )


_NPM_LOCAL = {"test", "t", "tst", "run", "run-script", "start", "stop", "restart", "build", "rebuild"}
_NPM_READ = {"ls", "list", "ll", "la", "root", "prefix", "bin", "help", "config-get", "--version", "-v"}


def _npm(ctx: Ctx, name: str, args: Args) -> None:
    sub = next((a for a in args if a is None or not a.startswith("-")), None)
    if is_version_query(args) or sub in _NPM_READ or (sub == "config" and "get" in args):
        return
    if sub in _NPM_LOCAL:
        ctx.code(f"npm {sub} runs a package script locally")
        return
    ctx.risky(f"npm {sub} may install, fetch or publish packages")


def _yarn(ctx: Ctx, name: str, args: Args) -> None:
    sub = next((a for a in args if a is None or not a.startswith("-")), None)
    if is_version_query(args):
        return
    if sub in _NPM_LOCAL or sub in ("lint", "typecheck", "jest", "vitest", "tsc", "format"):
        ctx.code(f"{name} {sub} runs a package script locally")
        return
    if sub in ("ls", "list", "why", "bin") and name != "bun":
        return
    if name == "bun" and sub is not None and sub.endswith((".js", ".ts", ".mjs", ".cjs", ".tsx")):
        ctx.code("bun runs a local script")
        return
    ctx.risky(f"{name} {sub or 'install'} may install, fetch or publish packages")


_CARGO_LOCAL = {
    "build",
    "b",
    "check",
    "c",
    "test",
    "t",
    "bench",
    "run",
    "r",
    "clippy",
    "doc",
    "d",
    "fmt",
    "fix",
    "clean",
    "metadata",
    "tree",
    "version",
}


def _cargo(ctx: Ctx, name: str, args: Args) -> None:
    sub = next((a for a in args if a is None or not a.startswith("-")), None)
    if is_version_query(args):
        return
    if sub in _CARGO_LOCAL:
        _local(ctx, f"cargo {sub}", [a for a in args if a != sub])
        return
    if sub in ("new", "init"):
        for target in split(args[1:], ("--name", "--vcs", "--edition")).operands:
            ctx.write(target, f"cargo {sub}")
        return
    ctx.risky(f"cargo {sub} may install, fetch or publish crates")


def _go(ctx: Ctx, name: str, args: Args) -> None:
    sub = args[0] if args else None
    if sub in ("version", "help") or (sub == "env" and "-w" not in args and "-u" not in args):
        return
    if sub in ("build", "test", "vet", "run", "fmt", "generate", "clean", "list", "doc", "tool"):
        _local(ctx, f"go {sub}", args[1:])
        return
    ctx.risky(f"go {sub} may fetch or install modules")
