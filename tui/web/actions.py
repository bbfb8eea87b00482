"""What a person may do from a page (only with `--allow-actions`): stop, restart, approve,
reject. Each asks first on a page of its own, whose form carries a signed, expiring token for
that one action on that one session (a site that cannot read the page cannot forge it)."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from agentherd.sessions.states import TERMINAL_STATES, State
from agentherd.sessions.status import SessionStatus
from agentherd.tui.render import plan_text, state_text
from agentherd.tui.spend import usage_money
from agentherd.tui.web.layout import Writer, page

CONFIRM_TTL_S = 600.0
"""A confirmation page's form works for ten minutes: long enough to read, short for a leak."""


@dataclass(frozen=True)
class Action:
    """One action: the button's label, what it does, and when a page offers it."""

    label: str
    does: str
    offered: Callable[[SessionStatus], bool]


def _live(status: SessionStatus) -> bool:
    return status.state not in TERMINAL_STATES and status.state != State.IDLE


def _waiting(status: SessionStatus) -> bool:
    return status.state == State.WAITING_APPROVAL or bool(status.plan and status.plan.changed_items)


ACTIONS: dict[str, Action] = {
    "stop": Action("Stop", "ends the task: stop signal, grace period, then SIGKILL", _live),
    "restart": Action("Restart", "stops the task, then begins a new one", lambda _s: True),
    "approve": Action("Approve", "adopts the changed plan as the session's new baseline", _waiting),
    "reject": Action(
        "Reject", "writes the baseline plan back (items passing now stay passing)", _waiting
    ),
}
"""The actions, in the order a page lists them (`herd stop`, `restart`, `approve`, `reject`)."""


def action_href(name: str, verb: str) -> str:
    """`/session/NAME/stop`: the action's confirmation page (GET) and its form's target (POST)."""
    return f"/session/{quote(name, safe='')}/{verb}"


class Signer:
    """Signs (action, session, expiry) with a key that lives as long as this server."""

    def __init__(self, key: bytes, ttl_s: float = CONFIRM_TTL_S) -> None:
        self.key = key
        self.ttl_s = ttl_s
        self.used: dict[str, int] = {}
        """Confirmations already acted on, until they expire: a form sent twice acts once."""

    def _mac(self, verb: str, name: str, expires: int) -> str:
        message = f"{verb}\0{name}\0{expires}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def sign(self, verb: str, name: str) -> str:
        """The token a confirmation form carries."""
        expires = int(time.time() + self.ttl_s)
        return f"{expires}.{self._mac(verb, name, expires)}"

    def check(self, token: str, verb: str, name: str) -> str | None:
        """None when `token` confirms this action now (and never again); else why not."""
        stamp, _, mac = token.partition(".")
        if not stamp.isdigit():
            return "the form carries no confirmation: open the action's page and confirm there"
        if not hmac.compare_digest(mac, self._mac(verb, name, int(stamp))):
            return "the confirmation does not match this action: open its page again"
        now = time.time()
        if int(stamp) < now:
            return "the confirmation expired: open the action's page again"
        self.used = {used: until for used, until in self.used.items() if until >= now}
        if token in self.used:
            return "this confirmation was used already: open the action's page again"
        self.used[token] = int(stamp)
        return None


def evidence(status: SessionStatus) -> list[str]:
    """Where the session stands, as a person deciding on it reads it: state, plan, spend, the
    plan change and the failing check."""
    facts = [
        f"state: {state_text(status)}",
        f"plan: {plan_text(status)} passing",
        f"spend: {usage_money(status.usage)}",
    ]
    if status.plan and status.plan.changed_items:
        facts += [
            f"plan change: item {c.index + 1} {c.change}: {c.description}"
            for c in status.plan.changed_items
        ]
    check = status.checkpoint.verification if status.checkpoint else None
    if check and not check.passed:
        facts.append(f"failing check: {check.error or f'exit {check.exit_code}'}")
    return facts


def confirm_page(status: SessionStatus, verb: str, token: str, esc: Writer) -> str:
    """`Stop api?`: what the action does and where the session stands, then one button."""
    action = ACTIONS[verb]
    name = status.session
    items = "".join(f"<li>{esc(fact)}</li>" for fact in evidence(status))
    body = (
        f'<header><p><a href="/session/{esc(quote(name, safe=""))}">← {esc(name)}</a></p>'
        f"<h1>{esc(action.label)} {esc(name)}?</h1></header>\n<main>"
        f"<p>{esc(action.label)} {esc(action.does)}.</p><ul>{items}</ul>"
        f'<form method="post" action="{esc(action_href(name, verb))}">'
        f'<input type="hidden" name="confirm" value="{esc(token)}">'
        f'<button type="submit">{esc(action.label)} {esc(name)}</button></form></main>'
    )
    return page(f"herd: {action.label.lower()} {name}?", body, live=False)
