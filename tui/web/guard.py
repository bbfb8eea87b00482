"""Every request passes here first: the Host must name this server (DNS rebinding), the
Origin must be its own (cross-site requests), and with a token the browser must hold it.

The token is taken from the address once (`?token=...`), then kept in an HttpOnly,
SameSite=Strict cookie and the address loses it (a redirect), so it stays out of the history
and of any Referer. Compared in constant time. Every answer carries headers that keep the
pages out of frames and other sites' scripts away from them.
"""

from __future__ import annotations

import hashlib
import hmac
import html
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from agentherd.tui.web.bind import Bind

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "herd_web"
"""The cookie that carries proof of the token (a digest of it, not the token itself)."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        b"img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
"""No inline script runs (agent text that slipped through could not act), no frame, no cache."""


def cookie_value(token: str) -> str:
    """What the cookie holds: a digest of the token, so the cookie jar never has the token."""
    return hmac.new(token.encode(), b"herd-web-cookie", hashlib.sha256).hexdigest()


def host_name(header: str) -> str:
    """`example.org` of `example.org:4373`, `::1` of `[::1]:4373`, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}


class Guard:
    """ASGI middleware: refuse what the bind does not allow, then pass the request on."""

    def __init__(self, app: App, bind: Bind) -> None:
        self.app = app
        self.bind = bind
        self.cookie = cookie_value(bind.token) if bind.token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        why = self.refusal(scope, headers)
        if why is not None:
            await _answer(send, why[0], why[1])
            return
        if self.cookie is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.pop("token", None)
            if given is not None:
                await self._take_token(scope, send, given, query)
                return
            held = _cookie(headers).encode("utf-8", "replace")  # bytes: any character compares
            if not hmac.compare_digest(held, self.cookie.encode()):
                await _answer(
                    send,
                    401,
                    "This herd web needs its token: open the address `herd web` printed "
                    "(it ends in ?token=...), once; the browser keeps it after that.",
                )
                return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    def refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, why) when the request must not reach the app, else None."""
        host = headers.get("host", "")
        if host_name(host) not in self.bind.hosts:
            return (
                403,
                f"herd web does not answer to the name {host!r}: open it by this machine's "
                "name or address (a page that renamed itself to reach it is refused)",
            )
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
                return (403, f"a request from another site ({origin}) is refused")
        site = headers.get("sec-fetch-site")
        navigating = scope["method"] in ("GET", "HEAD") and headers.get("sec-fetch-mode") in (
            "navigate",
            None,
        )
        if site in ("cross-site", "same-site") and not navigating:
            return (403, "a request from another site is refused")
        return None

    async def _take_token(
        self, scope: Scope, send: Send, given: str, query: dict[str, str]
    ) -> None:
        """The token from the address: right, keep it in a cookie and drop it from the address."""
        assert self.bind.token is not None and self.cookie is not None
        if not hmac.compare_digest(given.encode(), self.bind.token.encode()):
            await _answer(send, 403, "That token is wrong: open the address `herd web` printed.")
            return
        rest = urlencode(query)
        # The path as the browser sent it (still %-encoded: no line break can reach a header),
        # with one leading slash (`//host` would send the browser to another site).
        path = scope.get("raw_path") or scope.get("path", "/").encode()
        path = b"/" + path.decode("latin-1").lstrip("/").encode("latin-1")
        location = path.decode("latin-1") + (f"?{rest}" if rest else "")
        cookie = f"{COOKIE}={self.cookie}; Path=/; HttpOnly; SameSite=Strict"
        if scope.get("scheme") == "https":
            cookie += "; Secure"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1", "replace")),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _cookie(headers: dict[str, str]) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header is no cookie
        return ""
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else ""


async def _answer(send: Send, status: int, why: str) -> None:
    """A short page saying why the request was refused."""
    body = (
        '<!doctype html><meta charset="utf-8"><meta name="viewport" '
        'content="width=device-width, initial-scale=1"><title>herd web</title>'
        f"<p>{html.escape(why)}</p>"
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
