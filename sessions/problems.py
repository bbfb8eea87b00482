"""One thing wrong in herd.toml, as one line a person can act on, and the error that lists them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth a warning) in herd.toml, as one line a person can act on."""

    file: str
    message: str
    session: str | None = None
    field: str | None = None
    warning: bool = False

    def __str__(self) -> str:
        parts = [self.file]
        if self.session is not None:
            parts.append(f'session "{self.session}"')
        if self.field:
            parts.append(self.field)
        line = ": ".join(parts) + ": " + self.message
        return ("warning: " + line) if self.warning else line


class ConfigError(Exception):
    """herd.toml cannot be used; `problems` says why, one line each."""

    def __init__(self, problems: list[Problem], partial: object = None) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems
        self.partial = partial
        """The config of the sessions that were right (a HerdConfig), or None: `herd check`
        looks at their folders and programs too, so every problem shows in one run."""
