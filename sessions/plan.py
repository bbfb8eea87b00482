"""The written plan (a JSON feature list): parse it, and diff it against its baseline.

Indices (in changes, newly_passing and regressed) are 0-based positions in the JSON array;
every message counts items from 1 (``item 4``), as a person reads the Plan tab. An empty
list is a valid plan that is not all passing.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_MAX_PLAN_BYTES = 8 * 1024 * 1024
"""The harness writes ~200 features (tens of KB); 8 MiB leaves room and refuses runaway files."""

PASS_FIELDS = ("passes", "status")
"""Fields that say whether an item passes; the only ones an agent may change."""

PASSING_WORDS = frozenset({"passing", "done", "pass", "passed", "true"})
"""Status strings (case-insensitive) that count as passing."""

WRAPPER_KEYS = ("features", "items")
"""An object with one of these keys wrapping the list is accepted too."""

ChangeKind = Literal["removed", "reworded", "reordered", "added"]

_KIND_ORDER: dict[str, int] = {"removed": 0, "reworded": 1, "reordered": 2, "added": 3}


class PlanError(ValueError):
    """A plan file that cannot be used; the message is one line naming what is wrong."""


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One feature of the plan."""

    key: str
    description: str
    text: str
    passes: bool

    def to_json(self) -> dict[str, Any]:
        """Return the item as a JSON object."""
        return {
            "key": self.key,
            "description": self.description,
            "text": self.text,
            "passes": self.passes,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """A parsed plan: its items in file order."""

    items: tuple[PlanItem, ...]

    @property
    def passing(self) -> int:
        """How many items pass."""
        return sum(1 for item in self.items if item.passes)

    @property
    def total(self) -> int:
        """How many items there are."""
        return len(self.items)

    @property
    def all_passing(self) -> bool:
        """True when there is at least one item and every item passes."""
        return bool(self.items) and all(item.passes for item in self.items)

    def to_json(self) -> str:
        """Return JSON text to store the plan (for example as a baseline in SQLite)."""
        return json.dumps(
            {"items": [item.to_json() for item in self.items]},
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        """Read text written by to_json; raise PlanError when it is not such text."""
        try:
            data = json.loads(text)
            rows = data["items"]
            items = tuple(
                PlanItem(
                    key=str(row["key"]),
                    description=str(row["description"]),
                    text=str(row["text"]),
                    passes=row["passes"] is True,
                )
                for row in rows
            )
        except (ValueError, TypeError, KeyError, RecursionError) as error:
            raise PlanError(f"stored plan is not readable: {error!r}") from None
        return cls(items)


@dataclass(frozen=True, slots=True)
class PlanChange:
    """A change to the plan that the plan rules forbid."""

    index: int
    change: ChangeKind
    description: str

    def to_json(self) -> dict[str, Any]:
        """Return the CONTRACT.md ``changed_items`` element."""
        return {"index": self.index, "change": self.change, "description": self.description}


@dataclass(frozen=True, slots=True)
class PlanDiff:
    """The current plan compared with its baseline."""

    passing: int
    total: int
    changed_items: tuple[PlanChange, ...]
    newly_passing: tuple[int, ...]
    regressed: tuple[int, ...]

    @property
    def tampered(self) -> bool:
        """True when the plan changed in a forbidden way."""
        return bool(self.changed_items)

    def to_json(self) -> dict[str, Any]:
        """Return the CONTRACT.md ``plan`` object."""
        return {
            "passing": self.passing,
            "total": self.total,
            "changed_items": [change.to_json() for change in self.changed_items],
        }


def _kind_of(value: object) -> str:
    """Name a JSON value's type for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _keys_text(obj: dict[str, Any]) -> str:
    """List an object's first keys for a message."""
    keys = [repr(key)[:40] for key in list(obj)[:6]]
    more = ", ..." if len(obj) > 6 else ""
    return ", ".join(keys) + more if keys else "(none)"


def _is_passing(value: object) -> bool:
    """Return True for true or a passing status word."""
    if value is True:
        return True
    return isinstance(value, str) and value.strip().lower() in PASSING_WORDS


def _reject_constant(name: str) -> float:
    """Refuse NaN and Infinity, which are not JSON."""
    raise ValueError(f"invalid constant {name}")


def _decode(data: bytes, max_bytes: int) -> str:
    """Return the file as text, or raise PlanError for size, binary or encoding problems."""
    if len(data) > max_bytes:
        raise PlanError(f"too large: {len(data)} bytes, the limit is {max_bytes} bytes")
    if b"\x00" in data:
        raise PlanError(f"binary data, not JSON text (a NUL byte at offset {data.index(0)})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise PlanError(f"not UTF-8 text: invalid byte at offset {error.start}") from None
    if not text.strip():
        raise PlanError("empty file: expected a JSON list of features")
    return text


def _item_list(value: object) -> list[Any]:
    """Return the list of features from the parsed document, or raise PlanError."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in WRAPPER_KEYS:
            if isinstance(value.get(key), list):
                return list(value[key])
        raise PlanError(f"expected a list of features, got an object with keys {_keys_text(value)}")
    raise PlanError(f"expected a list of features, got {_kind_of(value)}")


def _parse_item(index: int, raw: object) -> PlanItem:
    """Turn one JSON element into a PlanItem, or raise PlanError naming the item."""
    if not isinstance(raw, dict):
        raise PlanError(f"item {index + 1}: expected an object, got {_kind_of(raw)}")
    description = raw.get("description", raw.get("title"))
    if not isinstance(description, str) or not description.strip():
        if "description" in raw or "title" in raw:
            raise PlanError(f"item {index + 1}: 'description' must be a non-empty string")
        raise PlanError(f"item {index + 1}: missing 'description' (or 'title')")
    item_id = raw.get("id")
    if item_id is None:
        key = description
    elif isinstance(item_id, str | int) and not isinstance(item_id, bool):
        key = str(item_id)
    else:
        raise PlanError(f"item {index + 1}: 'id' must be a string or a number")
    if "passes" in raw:
        passes = _is_passing(raw["passes"])
    else:
        passes = _is_passing(raw.get("status"))
    rest = {name: value for name, value in raw.items() if name not in PASS_FIELDS}
    text = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return PlanItem(key=key, description=description, text=text, passes=passes)


def parse_plan(data: bytes, max_bytes: int = DEFAULT_MAX_PLAN_BYTES) -> Plan:
    """Parse a plan file's bytes; raise PlanError with a one-line reason when it is unusable."""
    text = _decode(data, max_bytes)
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise PlanError(
            f"not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except ValueError as error:
        raise PlanError(f"not JSON: {error}") from None
    except RecursionError:
        raise PlanError("not JSON: nested too deeply") from None
    return Plan(tuple(_parse_item(index, raw) for index, raw in enumerate(_item_list(value))))


def _match_keys(plan: Plan) -> list[tuple[str, int]]:
    """Key each item by (key, occurrence) so that duplicate keys still match one to one."""
    seen: Counter[str] = Counter()
    keys: list[tuple[str, int]] = []
    for item in plan.items:
        keys.append((item.key, seen[item.key]))
        seen[item.key] += 1
    return keys


def _longest_increasing(values: list[int]) -> set[int]:
    """Return the positions of one longest strictly increasing subsequence of values."""
    tails: list[int] = []  # tails[k]: position of the smallest tail of a run of length k + 1
    previous: list[int] = [-1] * len(values)
    for position, value in enumerate(values):
        low, high = 0, len(tails)
        while low < high:
            middle = (low + high) // 2
            if values[tails[middle]] < value:
                low = middle + 1
            else:
                high = middle
        previous[position] = tails[low - 1] if low > 0 else -1
        if low == len(tails):
            tails.append(position)
        else:
            tails[low] = position
    kept: set[int] = set()
    position = tails[-1] if tails else -1
    while position >= 0:
        kept.add(position)
        position = previous[position]
    return kept


def _moved_positions(base_order: list[int]) -> set[int]:
    """Positions (in current order) of items that moved relative to the others.

    base_order[p] is the baseline rank of the item now at position p. Items off one longest
    increasing run moved; both items of an adjacent swap are reported, since either moved.
    """
    kept = _longest_increasing(base_order)
    moved = {position for position in range(len(base_order)) if position not in kept}
    for position in range(len(base_order) - 1):
        first, second = base_order[position], base_order[position + 1]
        if first == second + 1 and (position in moved or position + 1 in moved):
            moved.update((position, position + 1))
    return moved


def diff_plan(baseline: Plan, current: Plan) -> PlanDiff:
    """Compare the current plan with its baseline; only flips of ``passes`` are allowed."""
    base_keys = _match_keys(baseline)
    current_keys = _match_keys(current)
    base_at = {key: index for index, key in enumerate(base_keys)}
    current_at = {key: index for index, key in enumerate(current_keys)}
    changes: list[PlanChange] = []

    removed = [index for index, key in enumerate(base_keys) if key not in current_at]
    added = {index for index, key in enumerate(current_keys) if key not in base_at}
    for index in removed:
        if index in added:
            # Without ids a reworded description is a new key at the same place.
            added.discard(index)
            changes.append(
                PlanChange(
                    index, "reworded", _reworded(baseline.items[index], current.items[index])
                )
            )
        else:
            changes.append(PlanChange(index, "removed", baseline.items[index].description))
    changes.extend(PlanChange(index, "added", current.items[index].description) for index in added)

    common = [index for index, key in enumerate(current_keys) if key in base_at]
    base_indices = [base_at[current_keys[index]] for index in common]
    rank_of = {base_index: rank for rank, base_index in enumerate(sorted(base_indices))}
    base_order = [rank_of[base_index] for base_index in base_indices]
    moved = _moved_positions(base_order)
    newly_passing: list[int] = []
    regressed: list[int] = []
    for position, index in enumerate(common):
        before = baseline.items[base_at[current_keys[index]]]
        now = current.items[index]
        if before.text != now.text:
            changes.append(PlanChange(index, "reworded", _reworded(before, now)))
        if position in moved:
            changes.append(PlanChange(index, "reordered", now.description))
        if now.passes and not before.passes:
            newly_passing.append(index)
        elif before.passes and not now.passes:
            regressed.append(index)

    changes.sort(key=lambda change: (change.index, _KIND_ORDER[change.change]))
    return PlanDiff(
        passing=current.passing,
        total=current.total,
        changed_items=tuple(changes),
        newly_passing=tuple(newly_passing),
        regressed=tuple(regressed),
    )


CHANGE_TEXT_CHARS = 80
"""An item's text in a change's words is cut to this many characters (a phone's line)."""


def change_text(index: int, change: str, description: str, chars: int = CHANGE_TEXT_CHARS) -> str:
    """`reworded item 3 "Tax lines..."`: a forbidden change as a person reads it, items counted
    from 1 everywhere (events, notify, the dashboard); JSON keeps its 0-based `index`."""
    text = " ".join(description.split())
    before, arrow, after = text.partition(" → ")
    if arrow and len(text) > chars:  # a rewording: both sides keep their start
        half = max((chars - len(arrow)) // 2, 2)
        text = _cut(before, half) + arrow + _cut(after, half)
    item = f"{change} item {index + 1}"
    return f'{item} "{_cut(text, chars)}"' if text else item


def _cut(text: str, chars: int) -> str:
    """`text` cut to `chars` characters, an ellipsis marking the cut."""
    return text if len(text) <= chars else text[: max(chars - 1, 0)] + "…"


def _reworded(before: PlanItem, now: PlanItem) -> str:
    """Describe a reworded item: its description, or "old → new" when that changed."""
    if before.description == now.description:
        return before.description
    return f"{before.description} → {now.description}"


def restore_plan(baseline_raw: bytes, current: Plan, regress: bool = False) -> bytes:
    """The baseline plan file again, keeping each item's pass state from `current`.

    What `herd reject` writes: the items, their wording and order as first seen, with the
    progress made since (an item passing now, matched by key, stays passing). With `regress`
    (after a reset threw work away) an item `current` has but not passing is marked failing.
    """
    value = json.loads(_decode(baseline_raw, DEFAULT_MAX_PLAN_BYTES))
    items = _item_list(value)
    passing_now = Counter(item.key for item in current.items if item.passes)
    failing_now = Counter(item.key for item in current.items if not item.passes)
    for index, raw in enumerate(items):
        key = _parse_item(index, raw).key
        if passing_now[key] <= 0:
            if regress and failing_now[key] > 0:
                failing_now[key] -= 1
                if "passes" in raw or "status" not in raw:
                    raw["passes"] = False
                else:
                    raw["status"] = "failing"
            continue
        passing_now[key] -= 1
        if "passes" in raw or "status" not in raw:
            raw["passes"] = True
        else:
            raw["status"] = "passing"
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()
