"""HERD_TRACEMALLOC: the daemon's memory snapshots for a soak, and the diff that reads them."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import anyio
import pytest

from agentherd.supervisor import memtrace

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_snapshots_are_written_each_period_and_tracing_stops_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(memtrace.ENV_EVERY_S, "0.01")
    folder = tmp_path / "trace"
    grown: list[bytes] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(memtrace.run, str(folder))
            with anyio.fail_after(60):
                while not (folder / "snap-1.pickle").exists():
                    grown.append(b"x" * 100_000)  # something for the diff to find
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert not tracemalloc.is_tracing()
    diff = subprocess.run(
        [
            sys.executable,
            str(BENCH / "memdiff.py"),
            str(folder / "snap-0.pickle"),
            str(folder / "snap-1.pickle"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert diff.stdout.startswith("net growth +")
    assert "test_memtrace.py" in diff.stdout


def test_off_unless_the_variable_names_a_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(memtrace.ENV_DIR, raising=False)
    assert memtrace.wanted() is None
    monkeypatch.setenv(memtrace.ENV_DIR, "/tmp/x")
    assert memtrace.wanted() == "/tmp/x"
