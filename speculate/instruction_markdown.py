"""An instructions file's Markdown as Claude Code 2.1.332 reads it: front matter, HTML comments, ``@path`` words.

Claude Code lexes each file with ``marked`` (GFM off) and reads its top-level tokens. Observed with the CLI
against the simulator (docs/claude-code.md, "Instructions"):

- **Front matter** (a ``---`` block at the top) is taken off every file, CLAUDE.md included; its ``paths``
  key scopes a rules file (:mod:`speculate.instruction_rules`). YAML that does not parse is retried with the
  plain values quoted, as Claude Code does, then counts as empty.
- **HTML comments** are removed where a comment *starts a top-level block*: a line beginning with
  ``<!--`` (up to three spaces in; inside a paragraph only at column 0), through the line holding the first
  ``-->`` and the blank lines after it; text after the ``-->`` on that line stays. A comment inside a
  paragraph, a heading, a list, a quote, code or another HTML block is sent as written; an unclosed one
  keeps the rest of the file as it is.
- **Imports** are ``@path`` words in the text: at the start of a text run or after whitespace, up to
  whitespace (``\\ `` escapes a space), cut at ``#``; not in code, code spans or HTML (a comment's
  leftover text counts). Trailing punctuation is **not** taken off: ``@a.md.`` names ``a.md.``, which
  :mod:`speculate.instruction_imports` does not load (its extension is not a text file's).

The block scan below is a line-by-line approximation of marked's block lexer: fences, indented code,
paragraphs, lists and quotes (with lazy continuation lines), headings, rules and other HTML blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

import yaml

_FRONT = re.compile(
    r"^---\s*\n([\s\S]*?)---\s*\n?"
)  # marked's and Claude Code's: the closer need not start a line
_FENCE = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_RULE = re.compile(r" {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_QUOTE = re.compile(r" {0,3}>")
_ITEM = re.compile(r"( {0,3})([*+-]|\d{1,9}[.)])([ \t]+|$)")
_ITEM_IN_PARAGRAPH = re.compile(r" {0,3}(?:[*+-]|1[.)]) ")  # only these interrupt a paragraph
_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|"
    "div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr|html|iframe|"
    "legend|li|link|main|menu|menuitem|meta|nav|noframes|ol|optgroup|option|p|param|search|section|summary|"
    "table|tbody|td|tfoot|th|thead|title|tr|track|ul"
)
# HTML blocks other than comments (CommonMark's kinds 1, 6 and 7, as marked has them); only the first two
# may interrupt a paragraph, and only from column 0.
_HTML_INTERRUPTS = re.compile(rf"<(?:script|pre|style|textarea)[\s>]|</?(?:{_BLOCK_TAGS})(?: |/?>|$)", re.I)
_HTML_ALONE = re.compile(r"</?[a-z][\w-]*(?:\s[^<>]*)?/?>[ \t]*$", re.I)
_COMMENT_TOKEN = re.compile(r"<!--(?:-?>|[\s\S]*?-->)")  # marked's; unclosed: no match (kept)
_COMMENT = re.compile(r"<!--[\s\S]*?-->")  # what Claude Code removes inside a comment token
_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
_PLAIN_VALUE = re.compile(r"^([a-zA-Z_-]+):\s+(\S.*)$")
_YAML_SPECIAL = re.compile(r"[{}[\]*&#!|>%@`]|: ")

Kind = Literal["text", "code", "html", "comment"]


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The front matter's keys (empty when there is none or it does not parse) and the text after it."""
    body = text[1:] if text.startswith("\ufeff") else text
    m = _FRONT.match(body) if body.find("---", 3) >= 0 else None
    if m is None:
        return {}, text
    meta: Any = None
    for attempt in (m.group(1), _quoted(m.group(1))):
        try:
            meta = yaml.safe_load(attempt)
            break
        except yaml.YAMLError:
            continue
    return (meta if isinstance(meta, dict) else {}), body[m.end() :]


def _quoted(block: str) -> str:
    """Claude Code's second try: plain values holding YAML syntax (``paths: **/*.ts``) quoted, leading tabs
    made spaces."""
    out = []
    for line in block.split("\n"):
        m = _PLAIN_VALUE.match(line)
        if m:
            key, value = m.groups()
            quoted = value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1
            if not quoted and not _flow_list(value) and _YAML_SPECIAL.search(value):
                escaped = value.replace("\\", "\\\\").replace('"', '\\"')
                line = f'{key}: "{escaped}"'
        out.append(line)
    return re.sub(r"^\t+", lambda t: "  " * len(t.group()), "\n".join(out), flags=re.M)


def _flow_list(value: str) -> bool:
    if not (value.startswith("[") and value.endswith("]")):
        return False
    try:
        return isinstance(yaml.safe_load(value), list)
    except yaml.YAMLError:
        return False


def rule_globs(meta: dict[str, Any]) -> tuple[str, ...] | None:
    """The ``paths`` of a file's front matter as Claude Code reads them; None: not scoped."""
    raw = meta.get("paths")
    if not raw:
        return None
    patterns = [p[:-3] if p.endswith("/**") else p for p in _split(raw)]
    patterns = [p for p in patterns if p]
    return None if all(p == "**" for p in patterns) else tuple(patterns)


def _split(raw: Any) -> list[str]:
    if isinstance(raw, list):
        return [p for item in raw for p in _split(item)]
    if not isinstance(raw, str):
        return []
    parts, depth, cur = [], 0, ""
    for c in raw:
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    parts.append(cur.strip())
    return [e for p in parts if p for e in _braces(p)]


def _braces(pattern: str, budget: int = 1000) -> list[str]:
    """``{a,b}`` expanded, first group first (Claude Code's order); past ``budget`` results, unexpanded."""
    out, todo = [], [pattern]
    while todo:
        p = todo.pop()
        m = re.match(r"^([^{]*)\{([^}]+)\}(.*)$", p, re.S)
        if m is None:
            out.append(p)
            continue
        alts = [a.strip() for a in m.group(2).split(",")]
        if len(out) + len(todo) + len(alts) > budget:
            return [pattern]
        todo += [m.group(1) + a + m.group(3) for a in reversed(alts)]
    return out


def _indent(line: str) -> int:
    width = 0
    for c in line:
        if c == " ":
            width += 1
        elif c == "\t":
            width += 4 - width % 4
        else:
            break
    return width


def blocks(text: str) -> Iterator[tuple[Kind, str]]:
    """``text`` cut into consecutive pieces, each with what marked makes of it: ``comment`` (a top-level
    comment block), ``code``, ``html`` (another HTML block, or an unclosed comment), ``text`` (the rest)."""
    lines = text.splitlines(keepends=True)
    mode = ""  # the open block: "paragraph", "list", "quote", "code", "html", or "" (none)
    fence = ""
    item_indent = 0
    blank_in_list = False
    pos = i = 0
    while i < len(lines):
        line = lines[i]
        body = line.rstrip("\r\n")
        indent, lead = _indent(body), body.lstrip(" \t")
        kind: Kind = "text"
        if fence:
            kind = "code"
            if re.fullmatch(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*", body):
                fence = ""
        elif not lead:
            mode = mode if mode in ("list", "code") else ""
            blank_in_list = mode == "list"
            kind = "code" if mode == "code" else "text"
        elif mode == "list" and (indent >= item_indent or (not blank_in_list and not _starts_block(body))):
            blank_in_list = False  # inside the item, or a lazy continuation line of it
        elif mode == "list" and _ITEM.match(body) and not _RULE.match(body):
            item_indent, blank_in_list = _item_indent(body), False  # the list's next item
        elif (mode == "code" and indent >= 4) or mode == "html":
            kind = "code" if mode == "code" else "html"
        elif mode == "quote" and (_QUOTE.match(body) or not _starts_block(body)):
            pass
        elif indent <= 3 and lead.startswith("<!--") and (mode != "paragraph" or indent == 0):
            m = _COMMENT_TOKEN.match(text, pos + len(body) - len(lead))
            if m is None:  # unclosed: the rest is one HTML block
                yield "html", text[pos:]
                return
            end = text.find("\n", m.end())
            end = len(text) if end < 0 else end + 1
            while text.startswith("\n", end):
                end += 1
            yield "comment", text[pos:end]
            while i < len(lines) and pos < end:
                pos, i = pos + len(lines[i]), i + 1
            mode = ""
            continue
        elif indent <= 3 and (f := _FENCE.match(body)):
            fence, mode, kind = f.group(1), "", "code"
        elif mode != "paragraph" and indent >= 4:
            mode, kind = "code", "code"
        elif _HEADING.match(body) or _RULE.match(body):
            mode = ""
        elif _QUOTE.match(body):
            mode = "quote"
        elif _ITEM.match(body) and (mode != "paragraph" or _ITEM_IN_PARAGRAPH.match(body)):
            mode, item_indent, blank_in_list = "list", _item_indent(body), False
        elif indent <= 3 and _HTML_INTERRUPTS.match(lead) and (mode != "paragraph" or indent == 0):
            mode, kind = "html", "html"
        elif indent <= 3 and _HTML_ALONE.match(lead) and mode != "paragraph":
            mode, kind = "html", "html"
        else:
            mode = "paragraph"
        yield kind, line
        pos, i = pos + len(line), i + 1


def _item_indent(line: str) -> int:
    m = _ITEM.match(line)
    return len(m.group(1)) + len(m.group(2)) + min(len(m.group(3)), 4) if m and m.group(3) else 2


def _starts_block(body: str) -> bool:
    """Does this line end a paragraph (and so a lazy continuation of a list item or quote)?"""
    indent, lead = _indent(body), body.lstrip(" \t")
    if indent > 3:
        return False
    return bool(
        _FENCE.match(body)
        or _HEADING.match(body)
        or _RULE.match(body)
        or _QUOTE.match(body)
        or _ITEM_IN_PARAGRAPH.match(body)
        or lead.startswith("<!--")
        or (indent == 0 and _HTML_INTERRUPTS.match(body))
    )


def strip_comments(text: str) -> str:
    """``text`` without its top-level HTML comment blocks, as Claude Code sends it."""
    if "<!--" not in text:
        return text
    out = []
    for kind, piece in blocks(text):
        if kind == "comment":
            rest = _COMMENT.sub("", piece)
            piece = rest if rest.strip() else ""
        out.append(piece)
    return "".join(out)


def import_refs(text: str) -> list[str]:
    """The ``@path`` references of ``text`` where Claude Code looks for them, in order, each once, cut at
    ``#``; what is left is a path as written (``~/``, relative or absolute; ``\\ `` made a space)."""
    prose: list[str] = []
    for kind, piece in blocks(text):
        if kind == "comment":
            prose.append(_COMMENT.sub("", piece))
        elif kind == "text":
            prose.append(piece)
        else:
            prose.append("\n")
    flat = _COMMENT.sub(" ", _SPAN.sub(" ", "".join(prose)))
    refs: list[str] = []
    for m in _IMPORT.finditer(flat, 0):
        ref = m.group(1).split("#", 1)[0].replace("\\ ", " ")
        if ref and _is_path(ref) and ref not in refs:
            refs.append(ref)
    return refs


def _is_path(ref: str) -> bool:
    """Claude Code's test of what may name a file: ``./``, ``~/``, an absolute path (not ``/`` alone), or a
    name starting with a letter, digit, ``.``, ``_`` or ``-``."""
    if ref.startswith(("./", "~/")) or (ref.startswith("/") and ref != "/"):
        return True
    return re.match(r"[a-zA-Z0-9._-]", ref) is not None
