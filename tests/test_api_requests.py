"""Raw JSON lines on the real daemon's socket: wrong input is `bad-request`, hello comes first."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from conftest import Herd, script

from agentherd.supervisor.api.protocol import HERD_VERSION, PROTOCOL, RawJSON, encode

HELLO = {"op": "hello", "version": HERD_VERSION, "protocol": PROTOCOL}


def exchange(socket_path: Path, *messages: dict[str, Any] | bytes) -> list[dict[str, Any] | None]:
    """Send each message on one connection and read one reply line each (None: closed)."""
    replies: list[dict[str, Any] | None] = []
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(socket_path))
        reader = sock.makefile("rb")
        for message in messages:
            raw = message if isinstance(message, bytes) else json.dumps(message).encode()
            try:
                sock.sendall(raw + b"\n")
                line = reader.readline()
            except (BrokenPipeError, ConnectionResetError):
                line = b""
            replies.append(json.loads(line) if line else None)
    return replies


def start_fleet(herd: Herd) -> Path:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {script("print('hi')")}
        autostart = false
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed", "failed", "backoff", "idle", "stopped", "running")
    assert herd.daemon is not None
    return herd.daemon.socket_path


WRONG_REQUESTS: list[tuple[bytes, str]] = [
    (b'{"op": "events", "since": "x"}', "since"),
    (b'{"op": "events", "since": 1e400}', "since"),
    (b'{"op": "events", "since": -1}', "since"),
    (b'{"op": "events", "since": 1180591620717411303424}', "since"),
    (b'{"op": "events", "limit": -1}', "limit"),
    (b'{"op": "events", "limit": 0}', "limit"),
    (b'{"op": "events", "limit": 1000000}', "limit"),
    (b'{"op": "events", "follow": "yes"}', "follow"),
    (b'{"op": "events", "session": 5}', "session"),
    (b'{"op": "wait", "target": "api", "timeout_s": "x"}', "timeout_s"),
    (b'{"op": "wait", "target": "api", "timeout_s": NaN}', "timeout_s"),
    (b'{"op": "wait", "target": "api", "timeout_s": -1}', "timeout_s"),
    (b'{"op": "wait", "target": ["api"]}', "target"),
    (b'{"op": "wait"}', "target"),
    (b'{"op": "log_info", "name": "api", "run": "../../etc"}', "run"),
    (b'{"op": "log_info", "name": "api", "run": 0}', "run"),
    (b'{"op": "log_info", "name": "api", "run": 1.5}', "run"),
    (b'{"op": "restart", "name": "api", "from": 5}', "from"),
    (b'{"op": "status", "target": ["api"]}', "target"),
    (b'{"op": "status", "target": {"a": 1}}', "target"),
    (b'{"op": "start", "name": 5}', "name"),
    (b'{"op": "start"}', "name"),
    (b'{"op": "stop", "name": "api", "kill": "yes"}', "kill"),
    (b'{"op": "stop", "name": "api", "no_wait": 1}', "no_wait"),
    (b'{"op": "up", "names": "api"}', "names"),
    (b'{"op": "up", "names": [1]}', "names.0"),
    (b'{"op": "ls", "bogus": 1}', "bogus: unknown field"),
    (b'{"op": 5}', "unknown operation 5"),
    (b'{"id": 1}', "unknown operation None"),
    (b'{"op": "nope"}', "unknown operation 'nope'"),
]


def test_wrong_argument_types_are_bad_requests_naming_the_field(herd: Herd) -> None:
    """Case 14: each of these answered `internal` (or, for limit -1, every event)."""
    socket_path = start_fleet(herd)
    wrong = []
    for request, field in WRONG_REQUESTS:
        reply = exchange(socket_path, HELLO, request)[1]
        error = (reply or {}).get("error") or {}
        if not (
            reply
            and reply["ok"] is False
            and error.get("code") == "bad-request"
            and field in error.get("message", "")
        ):
            wrong.append((request, reply))
    assert not wrong, wrong
    assert herd.client.call("status", target="api")["session"] == "api", "the daemon still serves"


def test_a_bad_request_keeps_the_connection_and_says_what_was_got(herd: Herd) -> None:
    socket_path = start_fleet(herd)
    bad, good = exchange(
        socket_path, HELLO, b'{"id": 7, "op": "events", "limit": -1}', {"id": 8, "op": "ls"}
    )[1:]
    assert bad == {
        "id": 7,
        "ok": False,
        "error": {
            "code": "bad-request",
            "message": "events: limit: must be greater than or equal to 1 (got -1)",
        },
    }
    assert good is not None and good["ok"] and good["result"][0]["session"] == "api"


def test_a_connection_must_say_hello_first(herd: Herd) -> None:
    """Case 14: requests without the handshake were served; now they are refused and closed."""
    socket_path = start_fleet(herd)
    refused, after = exchange(socket_path, {"id": 1, "op": "ls"}, {"id": 2, "op": "ls"})
    assert refused is not None and refused["ok"] is False
    assert refused["error"]["code"] == "bad-request"
    assert refused["error"]["message"].startswith('the first message must be {"op": "hello"')
    assert after is None, "the daemon closed the connection"
    greeted = exchange(socket_path, HELLO, {"id": 2, "op": "ls"})
    assert greeted[0] is not None and greeted[0]["result"]["protocol"] == PROTOCOL
    assert greeted[1] is not None and greeted[1]["ok"] is True


def test_the_cli_turns_a_bad_argument_into_exit_2(herd: Herd) -> None:
    start_fleet(herd)
    for args, field in (
        (("logs", "api", "--run", "0"), "run"),
        (("events", "--since", "-1"), "since"),
        (("wait", "api", "--timeout", "nan"), "timeout_s"),
    ):
        result = herd.cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("herd: ") and field in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_a_reply_with_json_text_in_it_reads_as_the_same_reply() -> None:
    """`herd ls` sends each status as pydantic wrote it (RawJSON): the line a client reads is
    the one the plain encoder would have sent."""
    result = [{"session": "a", "cost": 1e-05, "last_line": "é ← \u2028"}, {"fleet": None}]
    plain = encode({"id": 7, "ok": True, "result": result})
    raw = encode({"id": 7, "ok": True, "result": RawJSON(json.dumps(result, ensure_ascii=False))})
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert json.loads(raw) == json.loads(plain)
