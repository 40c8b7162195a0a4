"""Shell command classification for the speculation engine and the permission gate.

Owns the answer to "what may this Bash command do?": :func:`classify` parses a command line with
tree-sitter-bash, walks every part (pipelines, lists, subshells, substitutions, heredocs, redirections,
function bodies, literal ``bash -c`` / ``eval`` strings) and applies per-command rules for writing flags
(``sed -i``, ``find -delete``/``-exec``, ``sort -o``, git's writing subcommands, ...). Unparseable input,
unknown commands, network, privilege and package tools are risky. ``check_bash_main`` backs
``speculate check-bash "CMD"``.
"""

from speculate.shell.classify import Classification, classify
from speculate.shell.cli import check_bash_main

__all__ = ["Classification", "check_bash_main", "classify"]
