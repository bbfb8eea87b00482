"""The line a person sees for a run is summarised when read, and is the one an eager reader
of every line would show (the daemon no longer summarises each line the agent prints)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentherd.sessions.adapters import PARSERS, make_parser
from agentherd.sessions.adapters.lastline import PENDING_BYTES, PENDING_LINES, LastLine

SHOWN_CHARS = 400

line_kinds = st.one_of(
    st.just(b""),
    st.just(b"   "),
    st.just(b"\x1b[0m"),  # an escape only: shows nothing
    st.just(b"progress 50%\rprogress 100%"),
    st.binary(max_size=60),
    st.text(max_size=40).map(lambda t: t.encode()),
    st.text(max_size=40).map(
        lambda t: json.dumps(
            {"type": "assistant", "message": {"content": [{"type": "text", "text": t}]}}
        ).encode()
    ),
    st.just(b'{"type":"result","is_error":false,"result":"done","num_turns":1}'),
    st.just(b"x" * (PENDING_BYTES // 3)),
)
batches = st.lists(st.lists(line_kinds, max_size=PENDING_LINES + 4), max_size=12)


@settings(max_examples=150, deadline=None)
@given(batches=batches, agent=st.sampled_from(sorted(PARSERS)), reads=st.sets(st.integers(0, 12)))
def test_the_lazy_last_line_is_what_an_eager_reader_shows(
    batches: list[list[bytes]], agent: str, reads: set[int]
) -> None:
    eager, lazy = make_parser(agent), make_parser(agent)
    shown = LastLine(lazy.summarize, SHOWN_CHARS)
    expected = ""
    for index, batch in enumerate(batches):
        expected = eager.feed_lines(batch, SHOWN_CHARS) or expected
        shown.offer(batch, lazy.decode_lines(batch))
        if index in reads:  # reading in between changes nothing
            assert shown.text == expected
    assert shown.text == expected
    assert lazy.usage == eager.usage


def test_a_line_is_summarised_only_when_read() -> None:
    summarised: list[bytes] = []

    def summarize(line: bytes, value: object | None, max_chars: int) -> str:
        summarised.append(line)
        return line.decode()

    shown = LastLine(summarize, SHOWN_CHARS, text="before")
    for step in range(PENDING_LINES):
        shown.offer([f"step {step}".encode()], [None])
    assert summarised == []
    assert shown.text == f"step {PENDING_LINES - 1}"
    assert summarised == [f"step {PENDING_LINES - 1}".encode()]
    assert shown.text == f"step {PENDING_LINES - 1}"  # read again: nothing summarised again
    assert len(summarised) == 1


def test_lines_waiting_past_the_bound_are_summarised_at_once() -> None:
    summarised: list[bytes] = []

    def summarize(line: bytes, value: object | None, max_chars: int) -> str:
        summarised.append(line)
        return line.decode().strip()

    shown = LastLine(summarize, SHOWN_CHARS)
    shown.offer([b"kept"] + [b" "] * PENDING_LINES, [None] * (PENDING_LINES + 1))
    assert summarised  # held no longer than the bound
    assert shown.text == "kept"  # the blank lines after it show nothing
