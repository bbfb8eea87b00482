"""The Claude decode path does each piece of work once: usage made once per change, the oldest
message id forgotten in order, the last line summarised from the values already decoded, a cut
line made inert as before. What a person and the budgets read stays exactly what it was."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentherd.sessions.adapters import make_parser
from agentherd.sessions.adapters.claude import MAX_TRACKED_MESSAGE_IDS, ClaudeParser
from agentherd.sessions.adapters.lastline import PENDING_LINES, LastLine
from agentherd.sessions.sanitize import ELLIPSIS, inert, inert_line

SESSION = "3f6b2c1e-8a4d-4e2b-9c7f-1d2e3a4b5c6d"


def assistant(message_id: str, output: int = 1, text: str = "hi") -> bytes:
    message = {
        "id": message_id,
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 3, "output_tokens": output},
    }
    return json.dumps({"type": "assistant", "message": message, "session_id": SESSION}).encode()


def test_usage_is_made_once_per_change_and_again_after_each_line() -> None:
    parser = ClaudeParser()
    parser.feed_line(assistant("msg_1"))
    first = parser.usage
    assert parser.usage is first  # asked again (every read of the log): not made again
    parser.feed_line(assistant("msg_2"))
    assert parser.usage.input_tokens == 6 and parser.usage.turns == 2
    parser.feed_line(b"not json")  # a line that changes nothing gives the same figures
    assert parser.usage == parser.usage


def test_usage_is_made_again_after_the_transcript_completes_a_killed_run() -> None:
    parser = ClaudeParser()
    parser.feed_line(assistant("msg_1", output=1, text=""))
    assert parser.usage.output_tokens == 1
    transcript = [
        {
            "type": "assistant",
            "message": {"id": "msg_1", "model": "claude-opus-4-1", "usage": {"output_tokens": 90}},
        }
    ]
    assert parser.recover_from_transcript(transcript, since=None)
    assert parser.usage.output_tokens == 90


def test_past_the_id_bound_the_oldest_ids_are_forgotten_and_count_again() -> None:
    parser = ClaudeParser()
    extra = 5
    for index in range(MAX_TRACKED_MESSAGE_IDS + extra):
        parser.feed_line(assistant(f"msg_{index}", output=2, text=""))
    expected = [f"msg_{i}" for i in range(extra, MAX_TRACKED_MESSAGE_IDS + extra)]
    assert list(parser.message_ids) == expected
    # A repeated copy moves its id to the newest end; a forgotten id counts as a new message.
    parser.feed_line(assistant(f"msg_{extra}", output=2, text=""))
    parser.feed_line(assistant("msg_0", output=2, text=""))
    ids = parser.message_ids
    assert ids[-2:] == (f"msg_{extra}", "msg_0") and len(ids) == MAX_TRACKED_MESSAGE_IDS
    assert ids[0] == f"msg_{extra + 2}"  # msg_{extra + 1} made room for msg_0
    assert parser.usage.turns == MAX_TRACKED_MESSAGE_IDS + extra + 1
    assert parser.usage.output_tokens == 2 * (MAX_TRACKED_MESSAGE_IDS + extra + 1)


def test_lines_past_the_bound_are_summarised_from_the_values_given() -> None:
    seen: list[object | None] = []

    def summarize(line: bytes, value: object | None, max_chars: int) -> str:
        seen.append(value)
        return line.decode()

    shown = LastLine(summarize, 400)
    lines = [b'{"n": %d}' % i for i in range(PENDING_LINES + 1)]
    given_values = [{"given": i} for i in range(len(lines))]  # not what the lines decode to
    shown.offer(lines, given_values)
    assert seen and seen[0] is given_values[-1]  # the adapter's value, not decoded again
    assert shown.text == lines[-1].decode()


def test_an_older_line_is_decoded_again_when_the_newer_ones_show_nothing() -> None:
    seen: list[object | None] = []

    def summarize(line: bytes, value: object | None, max_chars: int) -> str:
        seen.append(value)
        return "" if line.strip() == b"" else line.decode()

    shown = LastLine(summarize, 400)
    shown.offer([b'{"n": 1}'], [{"n": 1}])
    shown.offer([b" "] * PENDING_LINES, [None] * PENDING_LINES)
    assert shown.text == '{"n": 1}'
    assert seen[-1] == {"n": 1}  # decoded again from its line (its value was not kept)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=600), st.integers(min_value=1, max_value=300))
def test_a_cut_line_is_inert_as_before(text: str, max_chars: int) -> None:
    data = text.encode("utf-8", errors="surrogatepass")
    limit_chars = max(max_chars, 1)
    prefix = data[: (limit_chars + 2) * 4].decode("utf-8", errors="replace")
    cut = len(data) > (limit_chars + 2) * 4
    if not cut and prefix.endswith("\r"):
        prefix = prefix[:-1]
    if cut or len(prefix) > limit_chars:
        prefix = prefix[: limit_chars - 1] + ELLIPSIS
    assert inert_line(data, max_chars) == inert(prefix)  # the ellipsis added after, not before


def test_amp_reads_the_same_lines_to_the_same_figures_but_cost() -> None:
    lines = [assistant(f"msg_{i}", output=5, text="x" * 40) for i in range(3)]
    claude, amp = make_parser("claude"), make_parser("amp")
    for parser in (claude, amp):
        parser.feed_lines(lines, 400)
    assert claude.usage.output_tokens == amp.usage.output_tokens == 30
    assert claude.usage.cost_usd is not None and amp.usage.cost_usd is None
