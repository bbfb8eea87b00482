"""The dashboard's snapshot feed: failures come out as the one error the banner names."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentherd.supervisor.api.client import AsyncClient
from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.dashboard.fleetfeed import _relay


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_no_daemon_is_a_plain_api_error_so_the_feed_keeps_retrying(tmp_path: Path) -> None:
    """An exception group here would escape follow_snapshots' handlers and end the retries.

    (The feed moved from feeds.py to fleetfeed.py when it began to take changes.)"""
    with pytest.raises(ApiError):
        await _relay(AsyncClient(tmp_path / "none.sock"), lambda message: True, changes=True)
