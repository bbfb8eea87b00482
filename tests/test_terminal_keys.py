"""What the dashboard's Terminal tab sends an agent for the mouse, as an xterm would."""

from __future__ import annotations

from agentherd.tui.dashboard.termdraw import mouse_bytes


def test_mouse_reports_in_sgr_and_in_the_old_encoding() -> None:
    assert mouse_bytes(0, 5, 3, True, sgr=True) == b"\x1b[<0;5;3M"
    assert mouse_bytes(0, 5, 3, False, sgr=True) == b"\x1b[<0;5;3m"
    assert mouse_bytes(65 | 16, 300, 90, True, sgr=True) == b"\x1b[<81;300;90M"  # ctrl+wheel
    assert mouse_bytes(2, 5, 3, True, sgr=False) == b"\x1b[M" + bytes([34, 37, 35])
    assert mouse_bytes(2 | 4, 5, 3, False, sgr=False) == b"\x1b[M" + bytes([39, 37, 35])
    assert mouse_bytes(0, 224, 3, True, sgr=False) is None  # past what the old one can say
