"""A notification's approval link: `/session/NAME/gate?link=TOKEN` shows the plan change, the
failing check and the spend, then Approve and Reject. The daemon signed the link and checks it;
the answer spends it (each link works once) and the event log records who answered from where.
"""

from __future__ import annotations

from urllib.parse import quote

from agentherd.sessions.status import SessionStatus
from agentherd.tui.web.actions import ACTIONS, Signer, action_href, evidence
from agentherd.tui.web.layout import Writer, page

GATE_VERBS = ("approve", "reject")


def gate_href(name: str) -> str:
    """`/session/NAME/gate`: where a notification's approval link leads."""
    return f"/session/{quote(name, safe='')}/gate"


def gate_page(status: SessionStatus, link: str, signer: Signer, esc: Writer) -> str:
    """The evidence, then one form per answer, each carrying the link and a confirmation."""
    name = status.session
    items = "".join(f"<li>{esc(fact)}</li>" for fact in evidence(status))
    forms = "".join(
        f'<form method="post" action="{esc(action_href(name, verb))}">'
        f'<input type="hidden" name="confirm" value="{esc(signer.sign(verb, name))}">'
        f'<input type="hidden" name="link" value="{esc(link)}">'
        f'<button type="submit">{esc(ACTIONS[verb].label)} {esc(name)}</button>'
        f"<p>{esc(ACTIONS[verb].label)} {esc(ACTIONS[verb].does)}.</p></form>"
        for verb in GATE_VERBS
    )
    body = (
        f'<header><p><a href="/session/{esc(quote(name, safe=""))}">← {esc(name)}</a></p>'
        f"<h1>{esc(name)} waits for your answer</h1></header>\n<main>"
        f"<ul>{items}</ul>{forms}<p>This link works once.</p></main>"
    )
    return page(f"herd: approve {name}?", body, live=False)


def refused_page(why: str, esc: Writer) -> str:
    """Why a link or an answer was refused."""
    return page("herd web", f"<main><p>{esc(why)}</p></main>", live=False)
