"""docs/architecture.md stays true: the wings it names are the folders on disk, and the house rules
it states (a small supervisor top level, modules readable in one sitting) hold."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
MAX_MODULE_LINES = 500
MAX_TOP_LEVEL_MODULES = 15
SESSION_SUPERVISOR = ROOT / "supervisor" / "session" / "supervisor.py"
MAX_SESSION_SUPERVISOR_LINES = 450
"""It keeps the commands, the lock, the checked transition and the commit; its parts the rest."""


def named_paths() -> set[str]:
    """Every `sessions/...`, `supervisor/...` or `tui/...` path the page names in backticks."""
    found = set()
    prose = re.sub(r"^```.*?^```", "", DOC.read_text(), flags=re.MULTILINE | re.DOTALL)
    for quoted in re.findall(r"`([^`]+)`", prose):  # fenced blocks would pair them off by one
        for part in re.split(r",\s*", quoted):
            if re.fullmatch(r"(sessions|supervisor|tui)/[\w/]*(\.py)?", part):
                found.add(part)
    return found


def wings(top: str) -> set[str]:
    """The sub-packages of `top` as `top/name/`."""
    return {f"{top}/{p.parent.name}/" for p in (ROOT / top).glob("*/__init__.py")}


def test_every_path_the_page_names_exists() -> None:
    paths = named_paths()
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    # a module named beside its folder's first path ("`lifecycle.py`, `states.py`") is in sessions/
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_wing_on_disk_is_on_the_page_and_the_page_names_no_other() -> None:
    text = DOC.read_text()
    for top in ("supervisor", "tui"):
        on_disk = wings(top)
        assert len(on_disk) >= (6 if top == "supervisor" else 2), on_disk
        on_page = set(re.findall(rf"`({top}/\w+/)`", text))
        assert on_disk == on_page, (
            f"{top}: on disk {sorted(on_disk)}, on the page {sorted(on_page)}"
        )


def test_the_supervisors_top_level_is_small() -> None:
    top = sorted(p.name for p in (ROOT / "supervisor").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_no_module_is_over_500_lines() -> None:
    too_long = {
        str(path.relative_to(ROOT)): lines
        for top in ("sessions", "supervisor", "tui")
        for path in (ROOT / top).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


def test_the_session_supervisor_keeps_to_its_commands_lock_transition_and_commit() -> None:
    lines = len(SESSION_SUPERVISOR.read_text().splitlines())
    assert lines <= MAX_SESSION_SUPERVISOR_LINES, (
        f"{SESSION_SUPERVISOR.relative_to(ROOT)} has {lines} lines, over "
        f"{MAX_SESSION_SUPERVISOR_LINES}: move a whole responsibility into a part it owns "
        "(docs/architecture.md, supervisor/session/)"
    )
