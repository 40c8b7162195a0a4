"""The agent's tools (Read, Write, Edit, Glob, Grep, Bash): pydantic inputs, a filesystem view, a shell."""
