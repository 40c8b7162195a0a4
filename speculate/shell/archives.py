"""Rules for archivers and compressors (tar, zip, unzip, gzip, xz, ...): what they create or extract, and
the flags that make them run a program."""

from __future__ import annotations

from collections.abc import Callable

from speculate.shell.args import Args, Ctx, Rule, split, static_args


def register(tool: Callable[..., Callable[[Rule], Rule]]) -> None:
    """Add these rules through ``tool`` (the registry decorator of :mod:`speculate.shell.tools`)."""
    tool("tar", "gtar", "bsdtar")(_tar)
    tool("zip")(_zip)
    tool("unzip")(_unzip)
    tool("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lz4", "brotli", "compress")(
        _compressor
    )


def _tar(ctx: Ctx, name: str, args: Args) -> None:
    words = static_args(ctx, name, args)
    mode: set[str] = set()
    archive: list[str] = []
    directory: list[str] = []
    takes = set("fCTXgKNVLbH")
    k = 0
    if words and not words[0].startswith("-"):  # old style: `tar czf out.tgz dir`
        letters, k, value_from = words[0], 1, 1
        mode |= set(letters)
        for letter in letters:
            if letter in takes and value_from < len(words):
                (archive if letter == "f" else directory if letter == "C" else []).append(words[value_from])
                value_from += 1
        k = value_from
    while k < len(words):
        w = words[k]
        k += 1
        flag, eq, value = w.partition("=")
        if w.startswith("--"):
            long_modes = {
                "--create": "c",
                "--extract": "x",
                "--get": "x",
                "--list": "t",
                "--append": "r",
                "--update": "u",
                "--concatenate": "A",
                "--catenate": "A",
                "--diff": "d",
                "--compare": "d",
                "--delete": "D",
            }
            if flag in long_modes:
                mode.add(long_modes[flag])
            elif flag in ("--file", "--directory"):
                (archive if flag == "--file" else directory).append(
                    value if eq else words[k] if k < len(words) else ""
                )
                k += 0 if eq else 1
            elif flag in (
                "--to-command",
                "--use-compress-program",
                "--rsh-command",
                "--info-script",
                "--new-volume-script",
                "--checkpoint-action",
                "--rmt-command",
            ):
                ctx.risky(f"tar {flag} runs a program")
            elif flag in ("--absolute-names", "--to-stdout"):
                mode.add("P" if flag == "--absolute-names" else "O")
        elif w.startswith("-"):
            for j, letter in enumerate(w[1:], start=1):
                mode.add(letter)
                if letter in takes:
                    value = w[j + 1 :] or (words[k] if k < len(words) else "")
                    k += 0 if w[j + 1 :] else 1
                    (archive if letter == "f" else directory if letter == "C" else []).append(value)
                    break
    if "I" in mode or "F" in mode:
        ctx.risky("tar runs a program (-I / -F)")
    if any(":" in a.split("/", 1)[0] for a in archive):
        ctx.risky("tar archive on a remote host")
    if mode & set("crAuD"):
        targets: Args = [*archive] or [None]  # no -f: the default archive, unknown here
        for target in targets:
            if target != "-":
                ctx.write(target, "tar (archive)")
    if "x" in mode and "O" not in mode:
        if "P" in mode:
            ctx.risky("tar -P extracts to absolute paths")
        for target in directory or ["."]:
            ctx.write(target, "tar extract")


def _zip(ctx: Ctx, name: str, args: Args) -> None:
    words = static_args(ctx, name, args)
    if any(w in ("-TT", "--unzip-command") for w in words):
        ctx.risky("zip -TT runs a program")
    p = split(words, ("-b", "-n", "-t", "-tt", "-x", "-i", "-O", "--out"))
    for target in [*p.operands[:1], *p.values("-O", "--out")]:
        if target != "-":
            ctx.write(target, "zip")


def _unzip(ctx: Ctx, name: str, args: Args) -> None:
    p = split(static_args(ctx, name, args), ("-d", "-x", "-P"))
    if p.has("-l", "-t", "-v", "-Z", "-p", "-z", "-c"):
        return
    ctx.write((p.values("-d") or ["."])[-1], "unzip")


def _compressor(ctx: Ctx, name: str, args: Args) -> None:
    p = split(static_args(ctx, name, args), ("-o", "-S", "--suffix", "-T", "--threads", "-b", "-B"))
    if p.has("-c", "--stdout", "--to-stdout", "-t", "--test", "-l", "--list"):
        return
    for target in [*p.operands, *p.values("-o")]:
        if target != "-":
            ctx.write(target, name)
