"""``--redact``: string literals and paths replaced by stable placeholders, the same way everywhere.

A placeholder is derived from the text it replaces (and an optional key), so the same literal or name gets
the same placeholder in every prompt, answer, tool input, recorded result and file of every imported
session: an Edit's ``old_string`` still occurs in the redacted file, a Read still finds the redacted path, a
prompt still matches the previous turn's suggestion. Paths are replaced component by component, keeping
extensions, conventional names (``src``, ``tests``, ``pyproject.toml``, ...) and a ``test_`` prefix, so
globs and test discovery mostly still work; the project root is kept (the scenario writes it ``{root}``).
What stays: prose outside quotes, identifiers in code, numbers. What breaks: code that names a renamed file
by another spelling (``import shop.pager``), so a redacted project's own commands usually fail; the
importer writes no expectations on commands when it redacts (docs/transcripts.md).

A placeholder has the length of what it replaces (a path component keeps its extension and ``test_``
prefix, the rest of its stem is replaced letter for letter), so a redacted prompt takes as long to type in
the bench's model as the real one. Structure is never redacted: field names, and the values of enum-like
fields (``type``, ``role``, ``name``, ``mode``, ... when they hold an identifier) stay, so a redacted
``toolUseResult`` still reads as the same kind of result. What was replaced is counted (:attr:`Redactor.removed`).

Without ``--redact-key`` a placeholder is an unkeyed hash: someone who guesses a name can confirm it.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

_EXTS = (
    "py|pyi|js|mjs|cjs|ts|tsx|jsx|json|md|rst|txt|toml|yaml|yml|cfg|ini|sh|rs|go|java|kt|c|h|cc|cpp|hpp|"
    "rb|php|html|css|scss|csv|sql|lock|xml|vue|svelte|swift|env|log"
)
_PATH = re.compile(
    r"(?<![\w.@+-])(?:~?/|\.\.?/)?(?:[\w.@+-]+/)+[\w.@+-]*"  # a/b, /a/b, ./a, ~/a, a/
    rf"|(?<![\w./@+-])[\w@+-][\w.@+-]*\.(?:{_EXTS})\b(?![/(])"
)  # a bare file name: x.py
MIN_KNOWN = 3  # shorter literals are replaced only where quoted
_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)+"|(?<!\w)\'(?:[^\'\\\n]|\\.)+\'(?!\w)')
GENERIC = frozenset({
    "src", "lib", "tests", "test", "docs", "doc", "bin", "scripts", "app", "pkg", "cmd", "internal", "include",
    "pyproject.toml", "setup.py", "setup.cfg", "conftest.py", "__init__.py", "__main__.py", "package.json",
    "package-lock.json", "tsconfig.json", "Makefile", "README.md", "README", "LICENSE", "CHANGELOG.md",
    ".gitignore", "Cargo.toml", "go.mod", "requirements.txt", "node_modules", ".git", ".venv", "tmp", "usr",
    "home", "etc", "var", "dev", "proc", "null", "bash", "python", "python3", "node", "npm", "git", "env",
})  # fmt: skip
# Fields whose value names a kind, not content (a tool result's type, a message's role, a tool's name, a
# Grep's output mode): kept when the value is an identifier, so the redacted record keeps its structure.
ENUM_KEYS = frozenset({
    "type", "subtype", "role", "name", "mode", "output_mode", "status", "kind", "media_type", "stop_reason",
})  # fmt: skip
_ENUM_VALUE = re.compile(r"[A-Za-z_][\w.:-]{0,40}")
_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


class Redactor:
    def __init__(self, *, key: str = "", root: str | None = None) -> None:
        self.key = key
        self.root = root.rstrip("/") if root and root != "/" else None
        self.known: re.Pattern[str] | None = None  # literals seen quoted somewhere, matched unquoted too
        self.removed: Counter[str] = Counter()  # what was replaced: literals, path components, characters
        self._made: dict[tuple[str, str], str] = {}  # (kind, original) -> placeholder
        self._taken: dict[str, tuple[str, str]] = {}  # placeholder -> (kind, original): no two share one

    def learn(self, texts: Iterable[str]) -> None:
        """Remember the literals quoted anywhere in ``texts``, so an unquoted occurrence (an Edit's
        ``old_string`` taken from inside a string) gets the same placeholder as the quoted one."""
        inner = {m.group(0)[1:-1] for t in texts for m in _LITERAL.finditer(t)}
        words = sorted((w for w in inner if len(w) >= MIN_KNOWN and "/" not in w), key=len, reverse=True)
        if words:
            self.known = re.compile(
                "|".join(
                    (r"(?<!\w)" if w[0].isalnum() or w[0] == "_" else "")
                    + re.escape(w)
                    + (r"(?!\w)" if w[-1].isalnum() or w[-1] == "_" else "")
                    for w in words
                )
            )

    def _fill(self, kind: str, text: str, n: int) -> str:
        """A placeholder of ``n`` characters (a letter, then letters and digits) derived from ``text``; the
        same text always gets the same one, and two texts never share one (a clash is hashed again)."""
        if (kind, text) in self._made:
            return self._made[(kind, text)]
        for attempt in range(1000):
            digest, out = b"", ""
            while len(digest) < n:
                digest += hashlib.sha256(
                    f"{self.key}\0{kind}\0{attempt}\0{len(digest)}\0{text}".encode()
                ).digest()
            out = "".join(_ALNUM[b % (26 if i == 0 else 36)] for i, b in enumerate(digest[:n]))
            if self._taken.setdefault(out, (kind, text)) == (kind, text):
                break
        self._made[(kind, text)] = out
        return out

    def component(self, name: str) -> str:
        if name in GENERIC or name in ("", ".", "..", "~", "{root}") or name.isdigit():
            return name
        stem, dot, ext = name.rpartition(".")
        if not dot or not stem or not re.fullmatch(r"[A-Za-z0-9]{1,5}", ext):
            stem, ext = name, ""
        prefix = "test_" if stem.startswith("test_") and len(stem) > 5 else ""
        out = prefix + self._fill("name", stem, len(stem) - len(prefix))
        self.removed["path components"] += 1
        self.removed["characters"] += len(stem) - len(prefix)
        return f"{out}.{ext}" if ext else out

    def path(self, path: str) -> str:
        """A path with each component replaced (the project root, when it leads, kept as it is)."""
        if self.root and path.startswith(self.root + "/"):
            return self.root + "/" + self.path(path[len(self.root) + 1 :])
        return "/".join(self.component(c) for c in path.split("/"))

    def _literal(self, m: re.Match[str]) -> str:
        q, inner = m.group(0)[0], m.group(0)[1:-1]
        if "/" in inner and not any(c.isspace() for c in inner):
            return q + self._plain(inner) + q
        return q + self.literal(inner) + q

    def inside_literal(self, text: str) -> bool:
        """Whether ``text`` is exactly a literal seen quoted (so text replacing it is a literal's too)."""
        return self.known is not None and self.known.fullmatch(text) is not None

    def literal(self, inner: str) -> str:
        self.removed["string literals"] += 1
        self.removed["characters"] += len(inner)
        return self._fill("literal", inner, len(inner))

    def _plain(self, text: str) -> str:
        if self.known is not None:
            text = self.known.sub(lambda m: self.literal(m.group(0)), text)
        return _PATH.sub(lambda m: self.path(m.group(0)), text)

    def _piece(self, text: str) -> str:
        out, last = [], 0
        for m in _LITERAL.finditer(text):
            out += [self._plain(text[last : m.start()]), self._literal(m)]
            last = m.end()
        return "".join([*out, self._plain(text[last:])])

    def text(self, text: str) -> str:
        """Literals and paths in ``text`` replaced; occurrences of the project root kept."""
        if not self.root:
            return self._piece(text)
        parts = text.split(self.root)
        return self.root.join([parts[0] and self._piece(parts[0]), *(self._after_root(p) for p in parts[1:])])

    def _after_root(self, piece: str) -> str:
        # "/src/x.py rest": the path part continues the root, then ordinary text.
        m = re.match(r"(/[\w.@+/-]*)", piece)
        if m is None:
            return self._piece(piece)
        return self.path(m.group(1)) + self._piece(piece[m.end() :])

    def value(self, value: Any) -> Any:
        """Every string in a JSON-like value redacted; dictionary keys are field names and an enum-like
        field's identifier is a kind (:data:`ENUM_KEYS`): both kept."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: v if k in ENUM_KEYS and isinstance(v, str) and _ENUM_VALUE.fullmatch(v) else self.value(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value
