"""An MCP server over stdio that also prints debug lines to stdout ("debug: tick N", one a millisecond), as a
server with a stray print does. Written by hand on purpose: the SDK's server moves stray prints to stderr.
It speaks just enough JSON-RPC for a client: initialize, tools/list (one tool, ``lookup``) and tools/call."""

from __future__ import annotations

import json
import sys
import threading
import time

LOCK = threading.Lock()  # whole lines only: a debug line never lands inside a JSON-RPC one


def emit(line: str) -> None:
    with LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def chatter() -> None:
    for n in range(1_000_000):
        emit(f"debug: tick {n}")
        time.sleep(0.001)


def answer(msg: dict[str, object]) -> dict[str, object] | None:
    method, ident = msg.get("method"), msg.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        params = msg.get("params") or {}
        result: object = {
            "protocolVersion": params.get("protocolVersion"),  # type: ignore[union-attr]
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "noisy", "version": "1"},
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {
                    "name": "lookup",
                    "description": "Look up a word.",
                    "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}},
                }
            ]
        }
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "a word"}], "isError": False}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


if __name__ == "__main__":
    threading.Thread(target=chatter, daemon=True).start()
    for raw in sys.stdin:
        reply = answer(json.loads(raw))
        if reply is not None:
            emit(json.dumps(reply))
