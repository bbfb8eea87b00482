"""A stand-in agent for the benchmarks: quiet, plain lines, or Claude stream-json lines.

    python bench/agent.py MARK quiet|plain|stream-json LINES_PER_S

MARK only tags the command line, so the suite can count a system's agents by it. Lines are
paced with sleep and flushed one by one, as a real agent does.
"""

from __future__ import annotations

import json
import random
import sys
import time

SESSION_ID = "3f6b2c1e-8a4d-4e2b-9c7f-1d2e3a4b5c6d"


def stream_json_line(index: int) -> str:
    """One assistant message of 1-4 KB with usage, the way claude -p --output-format stream-json
    prints them."""
    text = "reading the code and deciding what to change next. " * random.randint(20, 80)
    message = {
        "id": f"msg_{index:08d}",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 1200, "output_tokens": 86},
    }
    line = {"type": "assistant", "message": message, "session_id": SESSION_ID}
    return json.dumps(line)


def main() -> None:
    kind, rate = sys.argv[2], float(sys.argv[3])
    if kind == "quiet" or rate <= 0:
        while True:
            time.sleep(3600)
    if kind == "stream-json":
        init = {"type": "system", "subtype": "init", "session_id": SESSION_ID, "model": "bench"}
        print(json.dumps(init), flush=True)
    gap_s = 1.0 / rate
    next_at = time.monotonic() + random.random() * gap_s  # agents out of phase, as in life
    index = 0
    while True:
        line = stream_json_line(index) if kind == "stream-json" else f"working on step {index}"
        print(line, flush=True)
        index += 1
        next_at += gap_s
        time.sleep(max(0.0, next_at - time.monotonic()))


if __name__ == "__main__":
    main()
