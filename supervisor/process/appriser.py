"""Sending a notification through Apprise (ntfy, Slack, Telegram, Discord, email...).

Apprise and what it imports cost a third of a second: it is imported here, lazily, in a worker
thread at the first message, never on the daemon's start path or its event loop.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio

from agentherd.sessions.alerts import Alert

SEND_TIMEOUT_S = 20.0
"""One message's sending gets this long per URL (Apprise's own timeout on each request)."""

KIND_OF_PRIORITY = {
    "min": "info",
    "low": "success",
    "default": "info",
    "high": "warning",
    "max": "failure",
}
"""Services without priorities get Apprise's nearest kind of message."""


def with_extras(url: str, alert: Alert) -> str:
    """`url` with the alert's priority and click-through link where the service takes them
    (ntfy's `priority` and `click`); other URLs unchanged."""
    parts = urlsplit(url)
    if parts.scheme not in ("ntfy", "ntfys"):
        return url
    query = dict(parse_qsl(parts.query))
    query.setdefault("priority", alert.priority)
    if alert.link:
        query.setdefault("click", alert.link)
    return urlunsplit(parts._replace(query=urlencode(query)))


def send_now(urls: list[str], alert: Alert, timeout_s: float = SEND_TIMEOUT_S) -> str | None:
    """Send one alert to every URL (blocking: call it in a worker thread); None when all took
    it, else why not (never the URL itself: it carries a token)."""
    import apprise  # see the module docstring: lazily, in the worker thread

    sender = apprise.Apprise()
    for index, url in enumerate(urls):
        if not sender.add(with_extras(url, alert)):
            return f"URL {index + 1} is not one Apprise understands"
    ok = sender.notify(
        body=alert.text(),
        title=alert.title,
        notify_type=KIND_OF_PRIORITY[alert.priority],
        timeout=timeout_s,
    )
    return None if ok else "a service refused the message or could not be reached"


async def send(urls: list[str], alert: Alert, timeout_s: float = SEND_TIMEOUT_S) -> str | None:
    """`send_now` off the event loop."""
    return await anyio.to_thread.run_sync(send_now, urls, alert, timeout_s, abandon_on_cancel=True)
