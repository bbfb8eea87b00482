"""The output reader's fast paths agree with the plain ones on random and real agent streams.

`load_json` scans with one shared decoder instead of `json.loads`; the plain adapter passes
over a batch of text lines in bulk; the line splitter splits a chunk in one call. Each must give
exactly what the line-by-line reading gave: the same values, totals, last line and counts.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentherd.sessions.adapters import PARSERS, make_parser
from agentherd.sessions.adapters.plain import PlainParser
from agentherd.sessions.adapters.summary import load_json
from agentherd.sessions.lines import LineSplitter

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_LINES = [
    line
    for path in sorted(FIXTURES.rglob("*"))
    if path.is_file() and path.suffix in (".jsonl", ".json", ".log", ".txt")
    for line in path.read_bytes().split(b"\n")
]
"""Every line of the real agents' recorded output (and the other fixtures) under tests/."""

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
noise = st.sampled_from([b"", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"x", b"}", b" 1", b"NaN"])
lines = st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    st.builds(
        lambda before, value, after: before + json.dumps(value).encode() + after,
        noise,
        json_values,
        noise,
    ),
    st.sampled_from(FIXTURE_LINES),
    st.sampled_from([b'{"usage": {"input_tokens": 3}, "turns": 1}', b'{"herd": "done"}']),
)
settings_ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def reference_load_json(line: bytes) -> object | None:
    """What `load_json` answered with `json.loads` (before the shared scanner)."""

    def refuse(name: str) -> float:
        raise ValueError(name)

    stripped = line.strip()
    if not stripped or stripped[:1] not in (b"{", b"["):
        return None
    try:
        return json.loads(stripped.decode("utf-8", errors="replace"), parse_constant=refuse)
    except (ValueError, RecursionError):
        return None


def same(a: object, b: object) -> bool:
    """Equal as JSON values, NaN never being one (it is refused) and -0.0 kept apart."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings_
@given(lines)
def test_load_json_answers_as_json_loads(line: bytes) -> None:
    assert same(load_json(line), reference_load_json(line))


def test_load_json_answers_as_json_loads_on_every_fixture_line() -> None:
    assert len(FIXTURE_LINES) > 100
    for line in FIXTURE_LINES:
        assert same(load_json(line), reference_load_json(line)), line


def facts(parser: object) -> tuple[object, ...]:
    """What a person and the budgets read from an adapter."""
    return tuple(
        getattr(parser, name)
        for name in (
            "usage",
            "session_id",
            "outcome",
            "last_text",
            "result_text",
            "skipped_lines",
            "parsed_lines",
            "warnings",
            "rate_limited",
        )
    )


@settings(parent=settings_, max_examples=100)
@given(st.lists(st.lists(lines, max_size=12), max_size=6), st.sampled_from(sorted(PARSERS)))
def test_batches_read_as_lines_one_by_one(batches: list[list[bytes]], agent: str) -> None:
    """Every adapter (the plain one's bulk path included) reads a batch as its lines one by one."""
    batched, single = make_parser(agent), make_parser(agent)
    for batch in batches:
        values = batched.decode_lines(batch)
        one_by_one = [single.decode_lines([line])[0] for line in batch]
        assert [same(a, b) for a, b in zip(values, one_by_one, strict=True)] == [True] * len(batch)
    assert facts(batched) == facts(single)


def test_plain_text_batch_keeps_the_last_non_blank_line() -> None:
    parser = PlainParser()
    values = parser.decode_lines([b"step 1", b"step 2", b"   ", b""])
    assert values == [None] * 4
    assert parser.last_text == "step 2"
    assert parser.skipped_lines == 4
    parser.decode_lines([b"step 3", b'  {"usage": {"input_tokens": 7}}'])
    assert parser.usage.input_tokens == 7
    assert parser.last_text == "step 3"


@settings_
@given(st.lists(st.binary(max_size=40), max_size=10), st.integers(min_value=1, max_value=30))
def test_splitter_chunks_give_the_lines_bytes_one_at_a_time_give(
    chunks: list[bytes], cap: int
) -> None:
    """Fed whole chunks (split in one call when it can) or byte by byte (line by line), the
    splitter hands over the same lines, cut at the same cap, and keeps the same tail."""
    whole, bytewise = LineSplitter(cap), LineSplitter(cap)
    got = [line for chunk in chunks for line in whole.feed(chunk)]
    want = [line for chunk in chunks for byte in chunk for line in bytewise.feed(bytes([byte]))]
    assert got == want
    assert [type(line) for line in got] == [type(line) for line in want]
    assert whole.truncated_lines == bytewise.truncated_lines
    assert whole.flush() == bytewise.flush()
