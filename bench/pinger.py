"""Ask a herd daemon's control socket every 10 ms until stdin closes; print each answer's ms.

    python bench/pinger.py path/to/herd.toml

A process of its own: a pinging thread inside the benchmark shared its GIL with the /proc
scans that count agents, which put the benchmark's own waits into the daemon's figure.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from agentherd.supervisor.api.client import Client
from agentherd.supervisor.files.paths import socket_path_for

PING_EVERY_S = 0.01


def main() -> None:
    client = Client(socket_path_for(Path(sys.argv[1]).parent / ".herd"))
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    answers: list[float] = []
    while not done.is_set():
        began = time.perf_counter()
        answered = client.ping()  # a hello round trip; gives up after 2 s
        if answered or answers:  # once up, a ping that failed counts for as long as it took
            answers.append((time.perf_counter() - began) * 1000)
        time.sleep(PING_EVERY_S)
    print(" ".join(f"{ms:.1f}" for ms in answers))


if __name__ == "__main__":
    main()
