"""What the dashboard's screens and widgets may ask of the app, and nothing more.

Screens reach the app as `host(self.app)`: typed by this protocol, not by the app's class, so the
app imports the screens and no screen imports the app.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from textual.app import App

from agentherd.sessions.status import SessionStatus


class Dashboard(Protocol):
    """The dashboard app as its screens see it."""

    client: Any
    """The daemon's async client (or the on-disk reader)."""
    read_only: bool
    """No daemon runs here: changing commands are refused."""
    statuses: list[SessionStatus]
    """The newest statuses of the whole fleet."""

    def status_of(self, name: str | None) -> SessionStatus | None:
        """The newest status of session `name`, or None."""
        ...

    def shown_names(self) -> list[str]:
        """The sessions in the fleet view's current order and filter."""
        ...

    def select(self, name: str) -> None:
        """Put the fleet's cursor on session `name`."""
        ...

    def act_on(self, action: str, name: str) -> None:
        """Select session `name`, then act on it."""
        ...

    def restart_from(self, name: str, sha: str) -> None:
        """Restart `name` from checkpoint `sha` (after a confirmation)."""
        ...


def host(app: App[Any]) -> Dashboard:
    """The running app, as its screens see it."""
    return cast(Dashboard, app)
