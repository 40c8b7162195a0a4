"""The interactive REPL (prompt-toolkit): ghost-text suggestions, Tab to accept, live speculation status."""
