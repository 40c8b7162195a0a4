"""The workspaces are projects the scenarios copy and run, not part of this repository's test suite."""

collect_ignore = ["workspaces"]
