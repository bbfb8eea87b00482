"""The cost of a line: per output line of each agent format, the parser's CPU microseconds
against a floor measured the same way (read the bytes and split the lines, no decoding).

    python bench/line_cost.py [--lines 100000] [--rounds 5]

The streams are the captured real ones (tests/fixtures/agents/real and
/work/shared/fixtures/agents/real when it is there), one format per agent named by the file's
first word, repeated into one file of about `--lines` lines. Each round reads that file as the
follower does (64 KiB reads, `LineSplitter`), then once more feeding every chunk's lines to a
fresh parser of the format (`decode_lines`, as `Follower.take_line`), and once more making the
last line's summary of each chunk as the dashboard's last-line cell does. CPU seconds of this
process (`time.process_time`), median of the rounds; the floor and the parser alternate.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from agentherd.sessions.adapters import make_parser
from agentherd.sessions.lines import LineSplitter

BENCH = Path(__file__).resolve().parent
FOLDERS = (
    BENCH.parent / "tests" / "fixtures" / "agents" / "real",
    Path("/work/shared/fixtures/agents/real"),
)
READ_BYTES = 65536
"""What the tailer asks of the log per read (supervisor/files/tailer.py's chunk)."""
FORMATS = ("claude", "codex", "gemini", "opencode", "aider")
SUMMARY_CHARS = 200


def streams() -> dict[str, bytes]:
    """Each format's captured stdout, its files joined (the agent's own files left out)."""
    found: dict[str, dict[str, bytes]] = {}
    for folder in FOLDERS:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            agent = path.name.split("-", 1)[0]
            if agent not in FORMATS or path.name.endswith("-rollout.jsonl"):
                continue
            found.setdefault(agent, {}).setdefault(path.name, path.read_bytes())
    joined = {
        agent: b"".join(data if data.endswith(b"\n") else data + b"\n" for data in files.values())
        for agent, files in found.items()
    }
    joined["plain"] = b"".join(joined.values())  # `plain` reads any agent's lines as text
    return joined


def read_split(path: Path, parser_name: str | None, summaries: bool) -> tuple[float, int]:
    """CPU seconds to read `path` and split it, with the parser fed when named; the lines."""
    parser = make_parser(parser_name) if parser_name else None
    splitter = LineSplitter()
    count = 0
    began = time.process_time()
    with path.open("rb", buffering=0) as stream:
        while chunk := stream.read(READ_BYTES):
            lines = splitter.feed(chunk)
            count += len(lines)
            if parser is not None and lines:
                values = parser.decode_lines(lines)
                if summaries:
                    parser.summarize(lines[-1], values[-1], SUMMARY_CHARS)
    return time.process_time() - began, count


def measure(
    agent: str, data: bytes, lines_wanted: int, rounds: int, folder: Path
) -> dict[str, float]:
    """Microseconds a line: the floor, the parser, the parser with summaries; the ratios."""
    lines_each = max(1, data.count(b"\n"))
    path = folder / f"{agent}.log"
    path.write_bytes(data * max(1, lines_wanted // lines_each))
    floor, parsed, shown = [], [], []
    read_split(path, agent, True)  # warm the page cache and the parser's imports
    for _ in range(rounds):
        seconds, count = read_split(path, None, False)
        floor.append(seconds * 1e6 / count)
        seconds, count = read_split(path, agent, False)
        parsed.append(seconds * 1e6 / count)
        seconds, count = read_split(path, agent, True)
        shown.append(seconds * 1e6 / count)
    result = {
        "bytes_per_line": len(data) / lines_each,
        "floor_us": statistics.median(floor),
        "parser_us": statistics.median(parsed),
        "with_summary_us": statistics.median(shown),
    }
    result["ratio"] = result["parser_us"] / result["floor_us"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000, help="lines per format and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(
        "| format | bytes a line | floor, us a line | parser, us a line | "
        "with the chunk's summary | parser / floor |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="herd-linecost-") as folder:
        for agent, data in streams().items():
            got = measure(agent, data, args.lines, args.rounds, Path(folder))
            print(
                f"| {agent} | {got['bytes_per_line']:.0f} | {got['floor_us']:.2f} | "
                f"{got['parser_us']:.2f} | {got['with_summary_us']:.2f} | {got['ratio']:.0f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
