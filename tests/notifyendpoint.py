"""A local HTTP endpoint that records what arrives: an ntfy server as far as Apprise can tell."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Arrived:
    """One request as the endpoint got it."""

    path: str
    headers: dict[str, str]
    body: str

    def message(self) -> dict[str, Any]:
        """ntfy's JSON publish body (Apprise posts one per message)."""
        return json.loads(self.body)  # type: ignore[no-any-return]


@dataclass
class Endpoint:
    """The address to point an ntfy:// URL at, and everything that arrived there."""

    port: int
    arrived: list[Arrived] = field(default_factory=list)

    def url(self, topic: str = "herd") -> str:
        return f"ntfy://127.0.0.1:{self.port}/{topic}"


@contextmanager
def endpoint() -> Iterator[Endpoint]:
    """A recording endpoint on 127.0.0.1 for as long as the block runs."""
    found = Endpoint(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length).decode()
            headers = {k.lower(): v for k, v in self.headers.items()}
            found.arrived.append(Arrived(self.path, headers, body))
            reply = b'{"id":"x","event":"message"}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
