"""Answers to an approval gate: who gave them and from where, and the approval links of
notifications (signed by the alert keeper, each good once)."""

from __future__ import annotations

from typing import Any

from agentherd.sessions.status import LinkReply
from agentherd.supervisor.api.protocol import FORBIDDEN, ApiError
from agentherd.supervisor.session.context import Context


def answered(ctx: Context | None, request: dict[str, Any]) -> dict[str, str]:
    """The `by` and `origin` an approve or reject records; a `link` in the request must be a
    good approval link for the session it names (refused otherwise), and is spent: each works
    once."""
    link = request.get("link")
    if isinstance(link, str):
        assert ctx is not None  # the API is served only once the daemon has its context
        why = ctx.alerts.check_link(str(request["name"]), link, use=True)
        if why is not None:
            raise ApiError(FORBIDDEN, why)
    by, origin = request.get("by"), request.get("origin")
    return {
        "by": by if isinstance(by, str) else "a person",
        "origin": origin if isinstance(origin, str) else "the control socket",
    }


def link_reply(ctx: Context | None, name: str, token: str) -> dict[str, Any]:
    """`link_ok`'s reply: whether the link is good now (it is not spent by asking)."""
    assert ctx is not None  # the API is served only once the daemon has its context
    why = ctx.alerts.check_link(name, token, use=False)
    return LinkReply(ok=why is None, why=why).to_json()
