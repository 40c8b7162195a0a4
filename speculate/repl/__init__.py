"""The interactive REPL (prompt-toolkit): ghost-text suggestions, Tab to accept, live speculation status.

``app`` the terminal front end, ``plain`` line mode for piped stdin, ``controller`` the trio side (turns,
slash commands, output), ``status`` the toolbar state, ``demo`` the simulator demo's project and scripted
prompts, ``main`` option parsing and wiring (the ``speculate repl`` entry: it imports the rest, nothing here
imports it).
"""
