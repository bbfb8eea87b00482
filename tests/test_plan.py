"""Tests of the plan parser and of the plan diff against its baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentherd.sessions.plan import (
    Plan,
    PlanChange,
    PlanError,
    diff_plan,
    parse_plan,
)

FIXTURE_DIRS = (
    Path(__file__).parent / "fixtures" / "agents",
    Path("/work/shared/fixtures/agents"),
)


def fixture(name: str) -> bytes:
    """Return a fixture file's bytes, or skip when the fixtures are not on this machine."""
    for folder in FIXTURE_DIRS:
        if (folder / name).is_file():
            return (folder / name).read_bytes()
    pytest.skip(f"fixture {name} not found")


def harness(*descriptions: str, passing: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """Build a harness-shaped feature list."""
    return [
        {
            "category": "functional",
            "description": description,
            "steps": [f"Step 1: check {description}"],
            "passes": index in passing,
        }
        for index, description in enumerate(descriptions)
    ]


def plan_of(value: Any) -> Plan:
    """Parse a JSON value as a plan file."""
    return parse_plan(json.dumps(value, indent=2).encode())


def changes(baseline: Any, current: Any) -> list[tuple[int, str]]:
    """Return (index, change) of the forbidden changes from baseline to current."""
    diff = diff_plan(plan_of(baseline), plan_of(current))
    return [(change.index, change.change) for change in diff.changed_items]


def test_fixture_feature_list() -> None:
    plan = parse_plan(fixture("feature_list-example.json"))
    assert plan.total == 7
    assert plan.passing == 3
    assert not plan.all_passing
    assert [item.passes for item in plan.items] == [True, True, True] + [False] * 4
    first = plan.items[0]
    assert (
        first.key == first.description == ("User can add a todo by typing text and pressing Enter")
    )
    assert "passes" not in json.loads(first.text)
    assert json.loads(first.text)["category"] == "functional"


def test_fixture_against_itself_has_no_changes() -> None:
    plan = parse_plan(fixture("feature_list-example.json"))
    diff = diff_plan(plan, plan)
    assert diff.to_json() == {"passing": 3, "total": 7, "changed_items": []}
    assert not diff.tampered


def test_plain_list_with_ids_and_status() -> None:
    plan = plan_of(
        [
            {"id": "F1", "title": "login", "status": "passing"},
            {"id": "F2", "title": "logout", "status": "Done"},
            {"id": 3, "title": "signup", "status": "todo"},
            {"id": "F4", "title": "reset", "passes": True},
            {"id": "F5", "title": "audit", "status": True},
            {"id": "F6", "title": "export"},
        ]
    )
    assert [item.key for item in plan.items] == ["F1", "F2", "3", "F4", "F5", "F6"]
    assert [item.description for item in plan.items][:2] == ["login", "logout"]
    assert [item.passes for item in plan.items] == [True, True, False, True, True, False]
    assert "status" not in json.loads(plan.items[0].text)


@pytest.mark.parametrize("wrapper", ["features", "items"])
def test_wrapped_lists(wrapper: str) -> None:
    plan = plan_of({wrapper: harness("a", "b", passing=(1,)), "version": 1})
    assert (plan.passing, plan.total) == (1, 2)


def test_all_passing_and_empty_list() -> None:
    assert plan_of(harness("a", "b", passing=(0, 1))).all_passing
    empty = plan_of([])
    assert (empty.total, empty.passing, empty.all_passing) == (0, 0, False)


def test_invalid_json_message() -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan(b'[\n  {"description": "a",\n    "passes": false\n    "steps": []}\n]')
    assert str(caught.value) == "not JSON: Expecting ',' delimiter at line 4 column 5"
    assert "\n" not in str(caught.value)


def test_half_written_file_is_refused() -> None:
    data = json.dumps(harness("a", "b"), indent=2).encode()
    with pytest.raises(PlanError, match="^not JSON: "):
        parse_plan(data[: len(data) // 2])


def test_wrong_shapes() -> None:
    with pytest.raises(PlanError, match="got an object with keys 'name', 'version'"):
        plan_of({"name": "x", "version": 2})
    with pytest.raises(PlanError, match="expected a list of features, got a string"):
        plan_of("hello")
    with pytest.raises(PlanError, match=r"item 2: expected an object, got a number"):
        plan_of([{"description": "a"}, 5])


def test_item_problems_name_the_item() -> None:
    """Items are counted from 1 in every message, as the Plan tab numbers them."""
    items = harness("a", "b", "c", "d", "e")
    del items[4]["description"]
    with pytest.raises(PlanError, match=r"^item 5: missing 'description'"):
        plan_of(items)
    with pytest.raises(PlanError, match=r"item 1: 'description' must be"):
        plan_of([{"description": ""}])
    with pytest.raises(PlanError, match=r"item 1: 'id' must be"):
        plan_of([{"id": [1], "title": "x"}])


def test_too_large_is_refused_before_parsing() -> None:
    data = b"[" + b" " * (50 * 1024 * 1024) + b"]"
    with pytest.raises(PlanError, match=r"too large: 52428802 bytes, the limit is 8388608"):
        parse_plan(data)


def test_custom_size_limit() -> None:
    with pytest.raises(PlanError, match="too large"):
        parse_plan(b"[]  ", max_bytes=3)


@pytest.mark.parametrize("data", [b"", b"  \n\t "])
def test_empty_file(data: bytes) -> None:
    with pytest.raises(PlanError, match="^empty file"):
        parse_plan(data)


def test_binary_bytes() -> None:
    with pytest.raises(PlanError, match="binary"):
        parse_plan(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(PlanError, match="not UTF-8 text: invalid byte at offset 2"):
        parse_plan(b"[ \xff\xfe ]")


def test_nan_and_deep_nesting_are_refused() -> None:
    with pytest.raises(PlanError, match="not JSON"):
        parse_plan(b'[{"description": "a", "weight": NaN}]')
    with pytest.raises(PlanError, match="not JSON"):
        parse_plan(b"[" * 200_000)


def test_utf8_bom_is_accepted() -> None:
    plan = parse_plan(b"\xef\xbb\xbf" + json.dumps(harness("a")).encode())
    assert plan.total == 1


def test_round_trip_through_json_text() -> None:
    plan = parse_plan(fixture("feature_list-example.json"))
    stored = plan.to_json()
    assert isinstance(stored, str)
    assert Plan.from_json(stored) == plan
    mixed = plan_of([{"id": "F1", "title": "ünï ✓", "status": "done"}])
    assert Plan.from_json(mixed.to_json().encode()) == mixed


def test_from_json_of_garbage_raises_plan_error() -> None:
    for text in ("", "[]", '{"items": [{"key": 1}]}', "{"):
        with pytest.raises(PlanError):
            Plan.from_json(text)


def test_flips_are_not_changes() -> None:
    baseline = plan_of(harness("a", "b", "c", passing=(2,)))
    current = plan_of(harness("a", "b", "c", passing=(0, 1)))
    diff = diff_plan(baseline, current)
    assert diff.changed_items == ()
    assert diff.newly_passing == (0, 1)
    assert diff.regressed == (2,)
    assert (diff.passing, diff.total) == (2, 3)


def test_removed() -> None:
    assert changes(harness("a", "b", "c"), harness("a", "c")) == [(1, "removed")]
    diff = diff_plan(plan_of(harness("a", "b", "c")), plan_of(harness("a", "b")))
    assert diff.changed_items == (PlanChange(2, "removed", "c"),)


def test_added() -> None:
    assert changes(harness("a", "b"), harness("a", "b", "z")) == [(2, "added")]
    assert changes(harness("a", "b"), harness("z", "a", "b")) == [(0, "added")]


def test_reworded_description_without_id() -> None:
    diff = diff_plan(plan_of(harness("a", "b", "c")), plan_of(harness("a", "B!", "c")))
    assert diff.changed_items == (PlanChange(1, "reworded", "b → B!"),)


def test_reworded_steps() -> None:
    current = harness("a", "b")
    current[1]["steps"].append("Step 2: skip this")
    assert changes(harness("a", "b"), current) == [(1, "reworded")]
    current = harness("a", "b")
    current[0]["category"] = "style"
    assert changes(harness("a", "b"), current) == [(0, "reworded")]


def test_reworded_title_with_id_and_status_flip() -> None:
    baseline = [{"id": "F1", "title": "login", "status": "todo"}, {"id": "F2", "title": "out"}]
    current = [{"id": "F1", "title": "log in", "status": "done"}, {"id": "F2", "title": "out"}]
    diff = diff_plan(plan_of(baseline), plan_of(current))
    assert [(c.index, c.change) for c in diff.changed_items] == [(0, "reworded")]
    assert diff.newly_passing == (0,)


def test_swap_of_two_adjacent_items_reports_both() -> None:
    assert changes(harness("a", "b", "c"), harness("b", "a", "c")) == [
        (0, "reordered"),
        (1, "reordered"),
    ]


def test_swap_of_two_distant_items_reports_both() -> None:
    assert changes(harness("a", "b", "c", "d"), harness("d", "b", "c", "a")) == [
        (0, "reordered"),
        (3, "reordered"),
    ]


def test_one_item_moved_to_the_end() -> None:
    diff = diff_plan(plan_of(harness("a", "b", "c", "d")), plan_of(harness("b", "c", "d", "a")))
    assert diff.changed_items == (PlanChange(3, "reordered", "a"),)


def test_one_item_moved_to_the_front() -> None:
    assert changes(harness("a", "b", "c", "d"), harness("d", "a", "b", "c")) == [(0, "reordered")]


def test_removal_alone_is_not_a_reorder() -> None:
    assert changes(harness("a", "b", "c", "d"), harness("a", "c", "d")) == [(1, "removed")]


def test_several_kinds_at_once() -> None:
    found = changes(harness("a", "b", "c", "d"), harness("b", "a", "d", "e", "f"))
    assert found == [(0, "reordered"), (1, "reordered"), (2, "removed"), (3, "added"), (4, "added")]


def test_duplicate_descriptions_match_one_to_one() -> None:
    assert changes(harness("a", "a", "b"), harness("a", "a", "b")) == []
    assert changes(harness("a", "a", "b"), harness("a", "b")) == [(1, "removed")]


def test_diff_to_json_is_the_contract_object() -> None:
    diff = diff_plan(plan_of(harness("a", "b", passing=(0,))), plan_of(harness("a", passing=(0,))))
    assert diff.to_json() == {
        "passing": 1,
        "total": 1,
        "changed_items": [{"index": 1, "change": "removed", "description": "b"}],
    }


def test_large_plan_diff_is_quick() -> None:
    descriptions = [f"feature {number}" for number in range(5000)]
    baseline = plan_of(harness(*descriptions))
    moved = descriptions[1:] + descriptions[:1]
    diff = diff_plan(baseline, plan_of(harness(*moved)))
    assert [(c.index, c.change) for c in diff.changed_items] == [(4999, "reordered")]


def test_restore_plan_brings_the_baseline_back_with_todays_progress() -> None:
    from agentherd.sessions.plan import restore_plan

    baseline = json.dumps(
        [
            {
                "category": "functional",
                "description": "add a todo",
                "steps": ["a"],
                "passes": False,
            },
            {
                "category": "functional",
                "description": "edit a todo",
                "steps": ["b"],
                "passes": False,
            },
            {"category": "style", "description": "dark mode", "steps": ["c"], "passes": False},
        ]
    ).encode()
    tampered = parse_plan(
        json.dumps(
            [
                {
                    "category": "functional",
                    "description": "add a todo",
                    "steps": ["a"],
                    "passes": True,
                },
                {
                    "category": "functional",
                    "description": "edit (easier)",
                    "steps": [],
                    "passes": True,
                },
            ]
        ).encode()
    )
    restored = parse_plan(restore_plan(baseline, tampered))
    assert [i.description for i in restored.items] == ["add a todo", "edit a todo", "dark mode"]
    assert [i.passes for i in restored.items] == [True, False, False]
    assert diff_plan(parse_plan(baseline), restored).changed_items == ()


def test_restore_plan_keeps_a_status_field_shape() -> None:
    from agentherd.sessions.plan import restore_plan

    baseline = json.dumps([{"id": "F1", "title": "one", "status": "todo"}]).encode()
    current = parse_plan(json.dumps([{"id": "F1", "title": "one!", "status": "done"}]).encode())
    restored = json.loads(restore_plan(baseline, current))
    assert restored == [{"id": "F1", "title": "one", "status": "passing"}]
