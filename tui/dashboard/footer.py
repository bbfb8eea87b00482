"""The footer: the selected session's name, then the keys that apply to it, then the rest,
as many whole keys as fit the width."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Label

from agentherd.tui.dashboard.actions import CHANGING_ACTIONS

LEADING_ACTIONS = ("back", "help", "select_cursor", "open", "logs", "quit")
"""Keys shown right after the session's own, in this order: when the width runs out the keys
at the end give way, so Help (which lists every key) is the last to go."""

READ_ONLY_HIDDEN = CHANGING_ACTIONS | {"restart_from"}
"""Keys that can only say "read-only" when no daemon runs: the footer leaves them out."""

KEY_PADDING = 3
"""Columns a key takes besides its key and its word: ` s Stop ` (Textual's FooterKey)."""
NAME_PADDING = 2
"""Columns the session's name takes besides its letters (#footer-session's padding)."""


@runtime_checkable
class FooterSubject(Protocol):
    """What the footer asks the app: the selected session and the words of its keys."""

    read_only: bool
    """No daemon runs: keys that change a session cannot work."""

    def footer_subject(self) -> tuple[str | None, dict[str, str]]:
        """The selected session's name (None: none) and action -> word for the keys that
        apply to it; changing keys not named there are left out."""
        ...


class SessionFooter(Footer):
    """A footer that names the session its keys act on and shows only the keys that apply
    to that session's state (the others still answer, with a notice, when pressed), and of
    those only the whole keys that fit (seen in the demo: `l Ou` at 120 columns)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._shown: tuple[str | None, tuple[tuple[str, str], ...], int] | None = None
        """What the footer shows now: redrawn only when the session, its keys or the width
        change."""
        self._keys: tuple[tuple[str, str, str, bool], ...] | None = None
        """The screen's shown keys when the footer was last asked to redraw for them."""

    def _subject(self) -> tuple[str | None, dict[str, str]]:
        """The session and its keys' words, from the app (none in another app)."""
        app = self.app
        return app.footer_subject() if isinstance(app, FooterSubject) else (None, {})

    def follow(self) -> None:
        """The selection or its state may have changed: redraw when what is shown would."""
        name, words = self._subject()
        shown = (name, tuple(words.items()), self.app.size.width)
        if shown != self._shown and self.is_attached:
            self.call_later(self.recompose)

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Redraw only when the keys to show differ: Textual announces new bindings at every
        focus change, and a tab switch moves the focus but leaves them the same (building every
        key again was a third of the dashboard's CPU per switch at 200 sessions)."""
        keys = tuple(
            (binding.key, binding.action, binding.description, enabled)
            for _, binding, enabled, _ in screen.active_bindings.values()
            if binding.show
        )
        if keys == self._keys:
            return
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._keys = keys  # Textual's footer redraws for these
        super().bindings_changed(screen)

    def on_resize(self, event: Resize) -> None:
        """Another width: as many keys as fit it."""
        self.follow()

    def compose(self) -> ComposeResult:
        """The name, the keys that apply to the session (in their words), the other keys,
        as many as fit; the palette's key on the right."""
        name, words = self._subject()
        width = self.app.size.width
        self._shown = (name, tuple(words.items()), width)
        read_only = isinstance(self.app, FooterSubject) and self.app.read_only
        first: list[Widget] = []
        rest: list[Widget] = []
        palette: list[Widget] = []
        for widget in super().compose():
            # A key's widget (Textual's FooterKey, not public) carries its action and words.
            action = _action(widget)
            if widget.has_class("-command-palette"):
                palette.append(widget)
            elif read_only and action in READ_ONLY_HIDDEN:
                continue
            elif action in CHANGING_ACTIONS:
                if action not in words:
                    continue
                widget.description = words[action]  # type: ignore[attr-defined]
                first.append(widget)
            else:
                rest.append(widget)
        rest.sort(key=_lead)
        # The palette's key is compact: its border and right padding take the key's padding.
        room = width - sum(_width(widget) for widget in palette)
        if name is not None:
            room -= cell_len(name) + NAME_PADDING
            yield Label(name, id="footer-session")
        for widget in [*first, *rest]:
            room -= _width(widget)
            if room < 0:
                break  # whole keys only: the rest are in the help (`?`)
            yield widget
        yield from palette


def _lead(widget: Widget) -> int:
    """Where a key that is not the session's own comes: the leading ones first, in order."""
    action = _action(widget)
    return LEADING_ACTIONS.index(action) if action in LEADING_ACTIONS else len(LEADING_ACTIONS)


def _width(widget: Widget) -> int:
    """The columns a key's widget takes on screen (FooterKey: ` key word `)."""
    key = str(getattr(widget, "key_display", ""))
    word = str(getattr(widget, "description", ""))
    return cell_len(key) + cell_len(word) + KEY_PADDING - (0 if word else 1)


def _action(widget: Widget) -> str:
    """The action of a key's widget, without its namespace ("" for other widgets)."""
    return str(getattr(widget, "action", "")).rpartition(".")[2]
