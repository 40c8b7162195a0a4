"""The simulator under load and bad input: 200 clients connecting at once are all served (the listen backlog
is sized for it), and a deeply nested JSON body is a 400 naming the bound, not a dead handler; a deeply
nested scenario file and a deeply nested shell command are one-line errors too."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from speculate.shell import classify
from speculate.sim.scenario import ScenarioError
from speculate.sim.scenario_yaml import load_scenario
from speculate.sim.server import SimServer


def _get(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def test_two_hundred_clients_at_once_are_all_served() -> None:
    with SimServer([], time_scale=0.01) as sim:
        start = threading.Barrier(200)
        answers: list[bytes] = []
        errors: list[str] = []

        def one() -> None:
            start.wait()
            try:
                answers.append(
                    _get(sim.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                )
            except OSError as e:  # a reset, or a SYN dropped on a full backlog (a connect timeout)
                errors.append(repr(e))

        threads = [threading.Thread(target=one) for _ in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == [] and len(answers) == 200
    assert all(a.split(b"\r\n", 1)[0].endswith(b"200 OK") for a in answers)


@pytest.mark.parametrize("depth", [200, 100_000])
def test_a_deeply_nested_json_body_is_a_400_naming_the_bound(depth: int) -> None:
    body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": []})[:-1]
    body += ', "metadata": ' + "[" * depth + "]" * depth + "}"
    with SimServer([], time_scale=0.01) as sim:
        raw = body.encode()
        out = _get(
            sim.port,
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n".encode()
            + raw,
        )
        head, _, payload = out.partition(b"\r\n\r\n")
        assert head.split(b"\r\n", 1)[0].endswith(b"400 Bad Request"), head
        err = json.loads(payload)["error"]
        assert err["type"] == "invalid_request_error" and "body: nested" in err["message"]
        assert "128 levels" in err["message"]
        # The server goes on serving.
        assert b"200 OK" in _get(sim.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")


def test_a_deeply_nested_scenario_is_one_error_with_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "deep.yaml"
    p.write_text("name: deep\nturns:\n  - prompt: hi\n    steps: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(p)
    assert str(err.value) == f"{p}:4: nested more than 64 levels deep; not read"


def test_a_deeply_nested_shell_command_is_risky_with_a_reason() -> None:
    c = classify("$(" * 3000 + "ls" + ")" * 3000)
    assert not c.sandboxable and "nested 9003 levels deep" in c.reason and "deeper than 256" in c.reason
    assert classify(" && ".join(["ls"] * 200)).read_only  # a long flat chain is still read
