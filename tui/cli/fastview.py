"""The daemon's JSON read as the status models read: `status.plan.passing` on plain dicts, so
the fast path prints a table or a detail without importing pydantic (tui/render.py)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a verb milliseconds of CPU: not imported to run
    from typing import Any


class View(dict[str, "Any"]):
    """A JSON object whose keys read as attributes too; nested objects and lists are views. A
    key the JSON leaves out reads None, as the model reads it (`Wire.omit_if_none`)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends ask for dunders: not fields
            raise AttributeError(name)
        return view(super().get(name))

    def get(self, key: str, default: Any = None) -> Any:
        return view(super().get(key, default))


def view(value: Any) -> Any:
    """`value` with every JSON object in it readable by attribute."""
    if isinstance(value, dict) and not isinstance(value, View):
        return View(value)
    if isinstance(value, list):
        return [view(item) for item in value]
    return value
