"""A real MCP server for the tests, written with the official SDK's MCPServer (v1's FastMCP).

``python server.py`` serves stdio; ``python server.py http PORT`` serves streamable HTTP on 127.0.0.1.
``bump`` appends to the file named by $DEMO_COUNTER: a side effect on the host that a fork must not cause.
``crash`` ends the process during the call, ``crash_soon`` just after answering (a server that dies
mid-session). (noisy_server.py is one that prints to stdout: the SDK's own server redirects stray prints.)
"""

from __future__ import annotations

import base64
import os
import sys
import threading

from mcp.server.mcpserver import Image, MCPServer
from mcp.types import ToolAnnotations

# 1x1 transparent PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
INSTRUCTIONS = "Call lookup before you guess what a word means. " + "Long instructions are cut. " * 100

server = MCPServer("demo", instructions=INSTRUCTIONS)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(word: str) -> str:
    """Look up a word in the demo dictionary."""
    return {"alpha": "the first letter", "gamma": "the third letter"}.get(
        word, f"{word}: not in the dictionary"
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=True))  # says read-only, but writes: only a hint
def bump(times: int = 1) -> str:
    """Count a visit (claims to be read-only)."""
    with open(os.environ["DEMO_COUNTER"], "a") as f:
        f.write("x" * times)
    return f"bumped {times}"


@server.tool(structured_output=False)
def picture() -> list[object]:
    """A tiny picture with a caption."""
    return ["a 1x1 pixel", Image(data=PNG, format="png")]


@server.tool()
def boom() -> str:
    """Always fails."""
    raise ValueError("the demo tool failed on purpose")


@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


@server.tool()
def crash_soon() -> str:
    """End the server process a moment after answering (it dies between calls)."""
    threading.Timer(0.2, os._exit, args=(3,)).start()
    return "bye"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
