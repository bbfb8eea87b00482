"""The output view's sparse line index (tui/dashboard/line_map.py fed by
tui/dashboard/logfile.py `LineIndex`): every
line's bytes and number exactly as a plain split of the file says, whatever the lines' lengths
and however the file grew; its memory bounded by the log's bytes, not its lines; a region the
log cap punched out reads as the cap's marker with every later line number kept."""

from __future__ import annotations

import errno
import os
from bisect import bisect_right
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentherd.supervisor.files.logcap import punch_hole
from agentherd.tui.dashboard.line_map import BLOCKS_KEPT, LineMap, find_line
from agentherd.tui.dashboard.logfile import CHECKPOINT_BYTES, LineIndex, LineReader
from agentherd.tui.dashboard.run_lines import render_bytes


def split_starts(data: bytes) -> tuple[list[int], int]:
    """Every line start of `data` as a plain split finds them, and the line count."""
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    count = len(starts) - (1 if starts[-1] == len(data) else 0)
    return starts, count


def index_all(path: Path, checkpoint_bytes: int = CHECKPOINT_BYTES, step_bytes: int = 8 << 20):
    """A map of the whole file, indexed in steps of `step_bytes`."""
    index = LineIndex(path, checkpoint_bytes)
    line_map = LineMap(path, checkpoint_bytes)
    while True:
        before = index.indexed_bytes
        line_map.grow(index.step(step_bytes))
        if index.indexed_bytes == before:
            return line_map


lines_strategy = st.lists(
    st.one_of(
        st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")),
        st.integers(min_value=40, max_value=200).map(lambda n: b"L" * n),  # past a block
    ),
    max_size=40,
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=lines_strategy,
    tail=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    chunks=st.lists(st.integers(min_value=1, max_value=90), min_size=1, max_size=8),
    steps=st.integers(min_value=5, max_value=400),
    checkpoint_bytes=st.integers(min_value=1, max_value=64),
)
def test_every_line_start_and_number_match_a_plain_split(
    tmp_path: Path,
    lines: list[bytes],
    tail: bytes,
    chunks: list[int],
    steps: int,
    checkpoint_bytes: int,
) -> None:
    """Empty lines, lines longer than a block, a last line still being written; the file
    written in pieces between indexing steps of any size: each line's start and end, the line
    count and the line holding any byte are those of a plain split, after every step."""
    data = b"".join(line + b"\n" for line in lines) + tail
    path = tmp_path / "out.log"
    path.write_bytes(b"")
    index = LineIndex(path, checkpoint_bytes)
    line_map = LineMap(path, checkpoint_bytes)
    written = 0
    pieces = iter(chunks * (len(data) // max(1, min(chunks)) + 2))
    while True:
        if written < len(data):
            with path.open("ab") as out:
                piece = data[written : written + next(pieces)]
                out.write(piece)
                written += len(piece)
        line_map.grow(index.step(steps))
        seen = data[: line_map.end_bytes]
        starts, count = split_starts(seen)
        assert line_map.line_count == count
        for number in range(count):
            end = starts[number + 1] if number + 1 < len(starts) else len(seen)
            assert (line_map.start_of(number), line_map.end_of(number)) == (starts[number], end)
        for offset in range(len(seen)):
            assert line_map.line_of(offset) == bisect_right(starts, offset, hi=count) - 1
        if written == len(data) and line_map.end_bytes == len(data):
            break
    line_map.close()


def test_two_million_lines_keep_a_checkpoint_per_block_not_a_start_per_line(
    tmp_path: Path,
) -> None:
    """2,000,000 short lines (17 MB): the index holds one checkpoint per CHECKPOINT_BYTES and
    at most BLOCKS_KEPT split blocks, however many lines are read; each line read is exact."""
    total = 2_000_000
    path = tmp_path / "flood.log"
    path.write_bytes(b"".join(b"line %07d\n" % i for i in range(total)))
    size = path.stat().st_size
    line_map = index_all(path)
    assert line_map.line_count == total
    assert len(line_map.offsets) == len(line_map.lines) <= size // CHECKPOINT_BYTES + 2
    reader = LineReader(path)
    for number in range(0, total, 997):
        start, end = line_map.start_of(number), line_map.end_of(number)
        assert reader.read(start, end) == b"line %07d" % number
    assert len(line_map._blocks) <= BLOCKS_KEPT
    kept = len(line_map.offsets) + sum(len(starts) for starts in line_map._blocks.values())
    assert kept <= size // CHECKPOINT_BYTES + 2 + BLOCKS_KEPT * (CHECKPOINT_BYTES // 11 + 1)
    assert kept < total // 40, "a start per line would be 2,000,000"
    reader.close()
    line_map.close()


def test_search_finds_lines_forward_and_back_wrapping_around(tmp_path: Path) -> None:
    """`/` finds the next line holding the word (any case) after the one given, `N` the one
    before, each wrapping around the end, on a copy of the map as the view's thread uses."""
    path = tmp_path / "out.log"
    words = {3: b"Needle", 5_000: b"needle", 40_000: b"NEEDLE"}
    path.write_bytes(
        b"".join(words.get(i, b"hay") + b" %06d xxxxxxxxxxxxxxxxxxxx\n" % i for i in range(50_000))
    )
    line_map = index_all(path, step_bytes=64 << 10)
    assert find_line(line_map.copy(), "needle", 3, 1) == 5_000
    assert find_line(line_map.copy(), "needle", 5_000, 1) == 40_000
    assert find_line(line_map.copy(), "needle", 40_000, 1) == 3
    assert find_line(line_map.copy(), "needle", 3, -1) == 40_000
    assert find_line(line_map.copy(), "needle", 40_000, -1) == 5_000
    assert find_line(line_map.copy(), "absent", 10, 1) is None
    line_map.close()


def punch_or_skip(path: Path, offset: int, length: int) -> None:
    """Punch a hole as the log cap does, or skip where this filesystem cannot."""
    fd = os.open(path, os.O_WRONLY)
    try:
        punch_hole(fd, offset, length)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):
            pytest.skip("no hole punching on this filesystem")
        raise
    finally:
        os.close(fd)


def test_a_punched_region_reads_as_the_cap_marker_and_later_line_numbers_stay(
    tmp_path: Path,
) -> None:
    """A log indexed, then its middle punched out by the log cap (as while the view is open):
    lines that began in the hole each read as the cap's marker, the line cut by the hole's
    start keeps its text, and every line after keeps its number and text; merging the
    punched blocks into a gap leaves fewer checkpoints and the same lines."""
    total = 40_000
    path = tmp_path / "out.log"
    path.write_bytes(b"".join(b"line %06d " % i + b"x" * 89 + b"\n" for i in range(total)))
    line_map = index_all(path, step_bytes=1 << 20)
    assert line_map.line_count == total
    hole_start, hole_end = 64 << 10, 3 << 20  # 4 KiB aligned, as the cap punches
    punch_or_skip(path, hole_start, hole_end - hole_start)
    width = 102
    reader = LineReader(path)

    def shown(number: int) -> str:
        data = reader.read(line_map.start_of(number), line_map.end_of(number))
        return render_bytes(data, raw=True).plain

    def check() -> None:
        assert line_map.line_count == total
        for number in range(0, total, 7):
            start = number * width
            if start < hole_start and start + width <= hole_start:
                assert shown(number) == f"line {number:06d} " + "x" * 89
            elif start < hole_start:
                assert shown(number).startswith(f"line {number:06d} ")  # cut by the hole
            elif start < hole_end:
                assert shown(number).startswith("… (output the log cap removed")
            else:
                assert shown(number) == f"line {number:06d} " + "x" * 89

    check()  # blocks split after the punch: the lost newlines are zeros now
    before = len(line_map.offsets)
    line_map.compact()
    assert len(line_map.offsets) < before - 80
    assert line_map.gaps
    check()
    needle = f"line {total - 3:06d}"
    assert find_line(line_map.copy(), needle, 0, 1) == total - 3
    reader.close()
    line_map.close()


def test_a_log_opened_after_its_middle_was_punched_shows_the_hole_as_one_line(
    tmp_path: Path,
) -> None:
    """Opened after the punch, the hole has no newlines: the line it cut runs through it (one
    line, read from its start only), and the lines after follow as a plain split says."""
    path = tmp_path / "out.log"
    path.write_bytes(b"".join(b"line %06d " % i + b"x" * 89 + b"\n" for i in range(40_000)))
    punch_or_skip(path, 64 << 10, (3 << 20) - (64 << 10))
    starts, count = split_starts(path.read_bytes())
    line_map = index_all(path, step_bytes=1 << 20)
    assert line_map.line_count == count
    for number in range(0, count, 13):
        assert line_map.start_of(number) == starts[number]
    line_map.close()


def test_a_log_cut_back_by_the_cap_starts_the_index_over(tmp_path: Path) -> None:
    """Where holes cannot be punched the cap cuts the log back to its head and appends a
    marker: the next step starts over from byte 0, and the lines then are the file's own."""
    path = tmp_path / "out.log"
    path.write_bytes(b"".join(b"before %06d\n" % i for i in range(20_000)))
    index = LineIndex(path, 1024)
    line_map = LineMap(path, 1024)
    line_map.grow(index.step())
    assert line_map.line_count == 20_000
    assert line_map.start_of(19_999) == 19_999 * 14
    with path.open("r+b") as log:
        log.truncate(4096)
        log.seek(4096)
        log.write(b"\n[herd: 275904 bytes of output dropped here (log_max_bytes)]\nafter 1\n")
    step = index.step()
    assert step.restart
    line_map.grow(step)
    starts, count = split_starts(path.read_bytes())
    assert line_map.line_count == count
    assert [line_map.start_of(n) for n in range(count)] == starts[:count]
    reader = LineReader(path)
    assert reader.read(line_map.start_of(count - 1), line_map.end_of(count - 1)) == b"after 1"
    reader.close()
    line_map.close()
