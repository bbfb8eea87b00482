"""The command palette's herd commands: "restart api-migration", "show output of docs-site"."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from agentherd.tui.dashboard.host import host

VERBS: tuple[tuple[str, str, str], ...] = (
    ("show output of", "output", "open the session screen on its output"),
    ("open", "open", "open the session screen"),
    ("report of", "report", "the session's report"),
    ("events of", "events", "the session's events and warnings"),
    ("checkpoints of", "checkpoints", "its checkpoints; restart from one"),
    ("spend of", "spend", "its spend over time against each budget limit"),
    ("start", "start", "begin a task"),
    ("stop", "stop", "stop gracefully"),
    ("restart", "restart", "stop gracefully and begin a new task (asks first)"),
    ("kill", "kill", "SIGKILL every process of the run (asks first)"),
    ("pause", "pause", "SIGSTOP the whole run"),
    ("resume", "resume", "SIGCONT the paused run"),
    ("approve plan of", "approve", "adopt the changed plan as the new baseline (asks first)"),
    ("reject plan of", "reject", "write the baseline plan back (asks first)"),
)
"""What the palette offers for each session: the words typed, the action, its help line."""


class SessionCommands(Provider):
    """A command per verb and session, matched fuzzily on "verb name"."""

    def _commands(self) -> list[tuple[str, str, str, str]]:
        """(text, action, session, help) for every session the dashboard knows."""
        app = host(self.app)
        return [
            (f"{verb} {status.session}", action, status.session, help_text)
            for status in app.statuses
            for verb, action, help_text in VERBS
        ]

    async def discover(self) -> Hits:
        """Before typing: the session screen of each session."""
        app = host(self.app)
        for text, action, session, help_text in self._commands():
            if action == "output":
                yield DiscoveryHit(text, partial(app.act_on, action, session), help=help_text)

    async def search(self, query: str) -> Hits:
        """Every command whose text matches what was typed, best first."""
        app = host(self.app)
        matcher = self.matcher(query)
        for text, action, session, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(text),
                    partial(app.act_on, action, session),
                    help=help_text,
                )
