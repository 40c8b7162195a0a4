"""One instructions file as Claude Code loads it: its text made ready, then its ``@path`` imports.

The text loses its front matter and its top-level HTML comments (:mod:`speculate.instruction_markdown`);
the front matter's ``paths`` is kept (a rules file's scope). A file whose text is then blank is left out
with its imports, as Claude Code does. A file whose extension is not a text file's (``.png``; ``a.md.``,
what ``@a.md.`` names) is not loaded.

Imports: see :func:`speculate.instruction_markdown.import_refs` for where ``@path`` counts. A path is
relative to the importing file's directory, ``~/`` for the home directory, or absolute. Each imported file
follows its importer, depth first. Chains stop at :data:`MAX_DEPTH` imports below a loaded file (Claude
Code's documented "five hops" counts the loaded file: with 2.1.332 a chain CLAUDE.md → one → two → three →
four is loaded and four's own import is not). A missing file is skipped silently; a file already loaded is
not loaded again (so cycles end); an excluded one (``claudeMdExcludes``) is not loaded. A project file's
imports must stay inside the working directory (not the repository: Claude Code 2.1.332 checks the
directory it was started in): Claude Code asks the user before it reads another, and speculate has no such
prompt, so it leaves them out with a note.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from speculate.instruction_markdown import front_matter, import_refs, rule_globs, strip_comments

Scope = Literal["user", "project", "local"]
MAX_DEPTH = 4
# Claude Code's list of text files' extensions; a file with another one (or a bare trailing ".") is skipped.
TEXT_EXTENSIONS = frozenset(
    (
        ".md .txt .text .json .yaml .yml .toml .xml .csv .html .htm .css .scss .sass .less .js .ts .tsx .jsx "
        ".mjs .cjs .mts .cts .py .pyi .pyw .rb .erb .rake .go .rs .java .kt .kts .scala .c .cpp .cc .cxx .h "
        ".hpp .hxx .cs .swift .sh .bash .zsh .fish .ps1 .bat .cmd .env .ini .cfg .conf .config .properties "
        ".sql .graphql .gql .proto .vue .svelte .astro .ejs .hbs .pug .jade .php .pl .pm .lua .r .dart .ex "
        ".exs .erl .hrl .clj .cljs .cljc .edn .hs .lhs .elm .ml .mli .f .f90 .f95 .for .cmake .make "
        ".makefile .gradle .sbt .rst .adoc .asciidoc .org .tex .latex .lock .log .diff .patch"
    ).split()
)


@dataclass(frozen=True)
class Loaded:
    path: Path
    text: str  # front matter and top-level HTML comments taken off
    globs: tuple[str, ...] | None  # the front matter's paths: a rules file's scope (None: everywhere)
    imported_by: Path | None = None


def prepare(raw: str) -> tuple[str, tuple[str, ...] | None, str]:
    """A file's text as sent, its ``paths`` scope, and the text its imports are read from."""
    meta, body = front_matter(raw)
    return strip_comments(body), rule_globs(meta), body


def is_text_file(path: Path) -> bool:
    """Claude Code's test before it loads a file: no extension, or a text file's (compared in lower case)."""
    ext = os.path.splitext(path.name)[1]  # as node's extname: "a.md." has ".", ".env" none
    return not ext or ext.lower() in TEXT_EXTENSIONS


def resolve(ref: str, base: Path) -> Path:
    if ref == "~" or ref.startswith("~/"):
        return Path.home() / ref[2:]
    return Path(os.path.normpath(base / ref))


def under(path: Path, top: Path) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(top)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def expand(
    path: Path,
    raw: str,
    *,
    read: Callable[[Path], str | None],
    seen: set[str],
    inside: Path | None,
    notes: list[str],
    excluded: Callable[[Path], bool] = lambda _p: False,
    depth: int = 0,
    by: Path | None = None,
) -> list[Loaded]:
    """``path`` (whose text is ``raw``), then what it imports, depth first, each not in ``seen`` (realpaths,
    updated) nor ``excluded``. ``inside``: imports must stay under it (None: anywhere)."""
    real = os.path.realpath(path)
    if real in seen or excluded(path) or not is_text_file(path):
        return []
    seen.add(real)
    text, globs, body = prepare(raw)
    if not text.strip():
        return []
    out = [Loaded(path, text, globs, by)]
    if depth >= MAX_DEPTH:
        return out
    for ref in import_refs(body) if "@" in body else []:
        target = resolve(ref, path.parent)
        if not is_text_file(target) or (imported := read(target)) is None:
            continue
        if inside is not None and not under(target, inside):
            notes.append(
                f"{path}: @{ref} is outside the working directory: not imported (Claude Code asks the user first)"
            )
            continue
        out += expand(
            target,
            imported,
            read=read,
            seen=seen,
            inside=inside,
            notes=notes,
            excluded=excluded,
            depth=depth + 1,
            by=path,
        )
    return out
