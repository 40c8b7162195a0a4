"""Walk a tree-sitter-bash parse tree: which simple commands run, and what the shell itself writes.

:class:`Walker` visits every part of a command line (pipelines, lists, subshells, substitutions,
heredocs, function bodies, background jobs) and hands each simple command to the rule context
(:class:`speculate.shell.context.Context`) as resolved words. The shell-level facts are decided here: the
redirections' targets, variable assignments, whether a `cd` surely happened (`a && b`, `a || b`), and
that any construct it does not know is risky.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import lru_cache

import tree_sitter
import tree_sitter_bash

from speculate.shell.args import source, word
from speculate.shell.context import Context, Level

# Search paths that are harmless when every entry is inside the sandbox (checked per assignment).
_PROJECT_SEARCH_PATHS = frozenset({"PYTHONPATH", "NODE_PATH"})
# Node types that only group other nodes; their children are walked in order.
_STRUCTURAL = frozenset(
    {
        "program",
        "list",
        "compound_statement",
        "do_group",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "c_style_for_statement",
        "case_statement",
        "case_item",
        "negated_command",
        "test_command",
        "binary_expression",
        "unary_expression",
        "ternary_expression",
        "postfix_expression",
        "parenthesized_expression",
        "redirected_statement",
        "herestring_redirect",
        "heredoc_redirect",
        "heredoc_body",
        "variable_assignments",
        "unset_command",
        "word",
        "string",
        "raw_string",
        "concatenation",
        "simple_expansion",
        "expansion",
        "arithmetic_expansion",
        "number",
        "ansi_c_string",
        "translated_string",
        "brace_expression",
        "command_name",
        "string_content",
        "variable_name",
        "subscript",
        "special_variable_name",
        "array",
        "regex",
        "extglob_pattern",
        "file_descriptor",
        "test_operator",
        "heredoc_start",
        "heredoc_content",
        "heredoc_end",
        "comment",
    }
)
_SCOPED = frozenset({"subshell", "command_substitution", "process_substitution"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>"})


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def parse(text: str) -> tree_sitter.Tree:
    return _parser().parse(text.encode())


class Walker(Context):
    """The rule context plus the syntax walk over one command line."""

    def script(self, text: str, *, subshell: bool) -> None:
        """Parse and walk a literal script (bash -c, eval, trap); ``subshell`` keeps `cd` local."""
        tree = parse(text)
        with self._deeper(), self._scope() if subshell else nullcontext():
            saved = self.current
            self.visit(tree.root_node)
            self.current = saved

    def visit(self, node: tree_sitter.Node) -> None:
        kind = node.type
        if self.cd_must_succeed and kind not in (
            "command",
            "redirected_statement",
            "list",
            "command_name",
            "word",
            "string",
            "raw_string",
            "concatenation",
        ):
            self.cd_must_succeed = False
            try:
                self.visit(node)
            finally:
                self.cd_must_succeed = True
            return
        if kind == "list" and not node.has_error:
            self._list(node)
            return
        if node.is_missing or kind == "ERROR":
            self.risky(f"cannot parse near {source(node).decode(errors='replace')[:40]!r}")
        if not node.is_named:
            return
        if kind == "command":
            self._command(node)
        elif kind == "file_redirect":
            self._redirect(node)
        elif kind in _SCOPED:
            with self._scope():
                self._children(node)
        elif kind == "pipeline":
            for child in node.named_children:
                with self._scope():
                    self.visit(child)
        elif kind == "variable_assignment":
            self._assignment(node)
        elif kind == "declaration_command":
            if any(
                c.type == "word" and source(c).startswith(b"-") and b"n" in source(c) for c in node.children
            ):
                self.risky("declares a name reference, which can set any variable")
            self._children(node)
        elif kind == "for_statement":
            variable = node.child_by_field_name("variable")
            if variable is not None:
                self.assign(source(variable).decode())
            self._children(node)
        elif kind == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                self.functions[source(name).decode()] = body
            self._children(node)
        elif kind in _STRUCTURAL:
            self._children(node)
        else:
            self.risky(f"unsupported shell construct {kind}")

    def _children(self, node: tree_sitter.Node) -> None:
        children = node.children
        for k, child in enumerate(children):
            if k + 1 < len(children) and children[k + 1].type == "&" and child.is_named:
                self._background(child)
            else:
                self.visit(child)

    def _list(self, node: tree_sitter.Node) -> None:
        """`a && b`: b runs only if a succeeded, so a `cd` in a surely moved; `a || b`: b runs after a failed
        anywhere. Afterwards any of the directories along the way is possible unless success is required."""
        outer = self.cd_must_succeed
        operator = next((c.type for c in node.children if not c.is_named and c.type in ("&&", "||")), "")
        operands = [c for c in node.named_children if c.type != "comment"]
        if operator not in ("&&", "||") or len(operands) != 2:
            self.risky("unexpected command list shape")
        left, right = operands
        before = set(self.cwds)
        try:
            self.cd_must_succeed = operator == "&&"
            self.visit(left)
            if operator == "||":
                self.cwds |= before
                middle = set(self.cwds)
            self.cd_must_succeed = outer
            self.visit(right)
            if operator == "||":
                self.cwds |= middle
            elif not outer:
                self.cwds |= before
        finally:
            self.cd_must_succeed = outer

    def _background(self, node: tree_sitter.Node) -> None:
        """A job left running after the command returns may write after the sandbox is gone."""
        saved = (self.level, self.reason)
        self.level = Level.READ_ONLY
        self.visit(node)
        if self.level > Level.READ_ONLY:
            self.current = source(node).decode(errors="replace")
            self.risky("runs in the background, beyond the end of the command")
        self.level, self.reason = max(saved, (self.level, self.reason))

    def _assignment(self, node: tree_sitter.Node) -> None:
        name = node.child_by_field_name("name")
        if name is not None:
            target = name.named_children[0] if name.type == "subscript" and name.named_children else name
            var = source(target).decode()
            if not (var in _PROJECT_SEARCH_PATHS and self._search_path_inside(node)):
                self.assign(var)
        self._children(node)

    def _search_path_inside(self, node: tree_sitter.Node) -> bool:
        """A literal search path (``PYTHONPATH=src``) whose every entry lies in the project or /tmp only
        makes the command load code from the sandbox, which it may run anyway."""
        value = node.child_by_field_name("value")
        text = word(value) if value is not None else None
        if not text:
            return False
        return all(entry and self.locate(entry) is None for entry in text.split(":"))

    def _command(self, node: tree_sitter.Node) -> None:
        self.current = source(node).decode(errors="replace")
        self.parts.append(self.current)
        # Substitutions and prefix assignments run before the command itself.
        self._children(node)
        self.current = source(node).decode(errors="replace")
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return  # only assignments
        words = [word(name_node.named_children[0] if name_node.named_children else name_node)]
        words += [word(arg) for arg in node.children_by_field_name("argument")]
        self.run(words)

    def _redirect(self, node: tree_sitter.Node) -> None:
        self._children(node)
        self.current = source(node).decode(errors="replace")
        operator = next((c.type for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        if operator not in _WRITE_REDIRECTS or destination is None:
            return
        target = word(destination)
        if operator == ">&" and (destination.type == "number" or target == "-"):
            return  # duplicates a descriptor: 2>&1, >&2
        self.write(target, f"redirection {operator}")
