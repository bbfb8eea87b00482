"""The page around every view, and the one way text reaches a page: escaped, with the values
of secrets this server knows of replaced (agent output can print its environment)."""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable

from agentherd.sessions.sanitize import inert

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
"""Environment variables whose value is a secret by their name."""

MIN_SECRET_CHARS = 8
"""Shorter values (`1`, `true`, `main`) would blank ordinary words out of every page."""

HIDDEN = "[hidden]"


class Redactor:
    """Replaces known secret values in text before it is escaped onto a page."""

    def __init__(self, values: Iterable[str]) -> None:
        kept = {v for v in values if len(v) >= MIN_SECRET_CHARS}
        self.values = sorted(kept, key=len, reverse=True)  # a longer secret first

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, HIDDEN)
        return text


def secret_values(session_env: Iterable[dict[str, str]]) -> list[str]:
    """Every value herd.toml's `env` tables set, and this process's secret-named variables."""
    values = [v for env in session_env for v in env.values()]
    values += [v for k, v in os.environ.items() if SECRET_NAME.search(k)]
    return values


class Writer:
    """Escapes text for a page (the only path from agent text to HTML): secrets hidden,
    control bytes shown as text (`^[`), markup characters escaped."""

    def __init__(self, redact: Redactor | None = None) -> None:
        self.redact = redact or Redactor([])

    def __call__(self, text: object) -> str:
        return html.escape(inert(self.redact(str(text))), quote=True)


def style_class(style: str) -> str:
    """A dashboard cell's Rich style (`bold red`) as a CSS class (`s-bold-red`)."""
    return f"s-{style.replace(' ', '-')}" if style else ""


def page(title: str, body: str, live: bool = True) -> str:
    """A whole page: phone-width, its style and its little script from this server only."""
    script = '<script src="/static/web.js" defer></script>' if live else ""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="/static/web.css">{script}</head>\n'
        f"<body>\n{body}\n</body></html>\n"
    )


def section(title: str, inner: str, ident: str = "") -> str:
    """A titled part of a page (one column: a phone reads it top to bottom)."""
    attr = f' id="{ident}"' if ident else ""
    return f"<section{attr}><h2>{html.escape(title)}</h2>\n{inner}\n</section>"


def pre(text: str, ident: str = "", attrs: str = "") -> str:
    """Text already escaped, kept in its lines (wrapped on a narrow screen)."""
    attr = f' id="{ident}"' if ident else ""
    return f"<pre{attr}{attrs}>{text}</pre>"
