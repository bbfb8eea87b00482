"""The layers hold at run time: the daemon side loads no UI, the models load no event loop."""

from __future__ import annotations

import subprocess
import sys


def loaded_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_the_supervisor_imports_no_textual() -> None:
    modules = loaded_after_import("agentherd.supervisor.daemon")
    assert not any(m == "textual" or m.startswith("textual.") for m in modules)
    assert not any(m.startswith("agentherd.tui") for m in modules)
    assert "apprise" not in modules, "[notifications] loads Apprise at the first message only"


def test_the_sessions_package_imports_no_event_loop_or_ui() -> None:
    modules = loaded_after_import(
        "agentherd.sessions.config, agentherd.sessions.plan, agentherd.sessions.report, "
        "agentherd.sessions.adapters, agentherd.sessions.progress"
    )
    for forbidden in ("anyio", "textual", "agentherd.supervisor", "subprocess"):
        assert forbidden not in modules, forbidden


def test_the_cli_starts_without_loading_textual() -> None:
    modules = loaded_after_import("agentherd.tui.cli.cli")
    assert "textual" not in modules, "`herd ls` must not pay for the dashboard"
    assert "starlette" not in modules and "uvicorn" not in modules, "nor for `herd web`"
    assert "apprise" not in modules, "nor for notifications"


def test_the_web_view_loads_no_textual() -> None:
    modules = loaded_after_import("agentherd.tui.web.serve")
    assert "starlette" in modules
    assert not any(m == "textual" or m.startswith("textual.") for m in modules)
