"""docs/benchmarks.md and its latency chart, written from one run of bench/suite.py.

Each target of issue 14 is checked against the figures of the run (met / not met); where one
is not met, or cannot be measured, the explanation comes from docs/benchmarks-notes.md, a
hand-written file with one `## KEY` section per target (the keys are `TARGETS`' first field)
and `## appendix: TITLE` sections copied to the end of the record as they are.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from suite import Figures

MET, NOT_MET, NOT_RUN, NOT_MEASURED = "met", "**not met**", "not run", "not measured"

PEER_CPU_FLOOR_S = 0.05
"""The peer's CPU seconds over the window below which a ratio is noise (clock ticks are 10 ms)."""


def pct(values: list[float], fraction: float) -> float:
    """The `fraction` percentile by nearest rank (p95 of 20 values is the 19th)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))]


def dist(values: list[float]) -> str:
    """n, p50, p95 and max of a latency sample, in ms."""
    return (
        f"p50 {statistics.median(values):.0f} ms, p95 {pct(values, 0.95):.0f} ms, "
        f"max {max(values):.0f} ms (n={len(values)})"
    )


def spread(values: list[float], fmt: str) -> str:
    """The median, and the range when the values differ."""
    mid = format(statistics.median(values), fmt)
    if len(values) < 2 or min(values) == max(values):
        return mid
    return f"{mid} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def cycles(f: Figures, load: str, system: str = "herd") -> list[Any]:
    return f.results.cycles.get((load, system), [])


def values(f: Figures, load: str, attr: str, system: str = "herd") -> list[float]:
    return [float(getattr(c, attr)) for c in cycles(f, load, system)]


def load_text(f: Figures, name: str) -> str:
    for load in f.loads:
        if load.name == name:
            rate = f" x {load.lines_per_s:g} lines/s" if load.kind != "quiet" else ""
            return f"{load.agents} {load.kind} agents{rate}"
    return "-"


Verdict = tuple[str, str, str]
"""The load measured, the figure, and the status."""


def cpu_ratio(f: Figures, load: str, limit: float) -> Verdict:
    herd, peer = values(f, load, "cpu_share"), values(f, load, "cpu_share", "supervisord")
    if not herd:
        return "-", "-", NOT_RUN
    figure = f"herd {spread([v * 100 for v in herd], '.1f')} %"
    if not peer:
        return load_text(f, load), figure + " (no peer in this run)", NOT_MEASURED
    if statistics.median(peer) * f.mode.window_s < PEER_CPU_FLOOR_S:
        figure += (
            f", supervisord {spread([v * 100 for v in peer], '.1f')} % (too little to divide by)"
        )
        return load_text(f, load), figure, NOT_MEASURED
    ratio = statistics.median(herd) / max(statistics.median(peer), 1e-9)
    figure = (
        f"herd {spread([v * 100 for v in herd], '.1f')} %, supervisord "
        f"{spread([v * 100 for v in peer], '.1f')} % of a core: **{ratio:.2f}**"
    )
    return load_text(f, load), figure, MET if ratio <= limit else NOT_MET


def idle_cpu(f: Figures) -> Verdict:
    herd = [v * 100 for v in values(f, "idle", "cpu_share")]
    if not herd:
        return "-", "-", NOT_RUN
    peer = [v * 100 for v in values(f, "idle", "cpu_share", "supervisord")]
    figure = f"{spread(herd, '.2f')} % of a core" + (
        f" (supervisord {spread(peer, '.2f')} %)" if peer else ""
    )
    return load_text(f, "idle"), figure, MET if statistics.median(herd) <= 0.5 else NOT_MET


DAEMON_WAKEUPS_PER_MIN = 90
"""The daemon-wide periodic work at rest, per minute, whatever the number of sessions: the
budget pass every second (60), the watch and disk tick every 5 s (12), the quiet logs' shared
poll (1), and some slack for the clock's batching."""


def periodic(f: Figures) -> Verdict:
    """The event loop's wake-ups at rest, per session and minute: met when they are at most
    one per session a minute beyond the daemon-wide DAEMON_WAKEUPS_PER_MIN."""
    woken = values(f, "idle", "wakeups_per_min")
    agents = next((load.agents for load in f.loads if load.name == "idle"), 0)
    if not woken or not agents:
        return "-", "-", NOT_RUN
    if not any(woken):
        return load_text(f, "idle"), "not in this run's figures", NOT_MEASURED
    peer = values(f, "idle", "wakeups_per_min", "supervisord")
    figure = (
        f"event loop woken {spread(woken, '.0f')} times a minute, "
        f"{spread([w / agents for w in woken], '.2f')} per session (at most "
        f"{agents} + {DAEMON_WAKEUPS_PER_MIN} daemon-wide)"
    ) + (f"; supervisord {spread(peer, '.0f')}" if peer else "")
    met = statistics.median(woken) <= agents + DAEMON_WAKEUPS_PER_MIN
    return load_text(f, "idle"), figure, MET if met else NOT_MET


RSS_LIMIT_MB = 40
"""Issue 29's target at 200 quiet agents (issue 14's was 60 MB)."""


def memory(f: Figures) -> Verdict:
    rss = values(f, "idle", "rss_mb")
    if not rss:
        return "-", "-", NOT_RUN
    peer = values(f, "idle", "rss_mb", "supervisord")
    figure = f"{spread(rss, '.0f')} MB RSS" + (
        f" (supervisord {spread(peer, '.0f')})" if peer else ""
    )
    return load_text(f, "idle"), figure, MET if statistics.median(rss) <= RSS_LIMIT_MB else NOT_MET


def threads(f: Figures) -> Verdict:
    """Threads with the most quiet agents against the load with the fewest agents: the same,
    give or take 2 (a busy fleet's readers may hold a few more worker threads)."""
    ran = [load for load in f.loads if cycles(f, load.name)]
    if "idle" not in {load.name for load in ran} or len(ran) < 2:
        return "-", "-", NOT_RUN
    many = next(load for load in ran if load.name == "idle")
    few = min((load for load in ran if load.name != "idle"), key=lambda load: load.agents)
    high = statistics.median(values(f, many.name, "threads"))
    low = statistics.median(values(f, few.name, "threads"))
    listed = ", ".join(
        f"{statistics.median(values(f, load.name, 'threads')):.0f} at {load_text(f, load.name)}"
        for load in ran
    )
    where = f"{many.agents} and {few.agents} agents"
    return where, f"threads: {listed}", MET if high <= low + 2 else NOT_MET


def soak(f: Figures) -> Verdict:
    got, load = f.soak, f.soak_load
    if got is None or load is None:
        return "-", "-", NOT_RUN
    samples = got.samples  # type: ignore[attr-defined]
    first, last = samples[0], samples[-1]
    rss_growth = (last[1] - first[1]) / first[1] * 100
    fd_growth = (last[3] - first[3]) / first[3] * 100 if first[3] else 0.0
    figure = (
        f"RSS {first[1]:.1f} -> {last[1]:.1f} MB ({rss_growth:+.1f} %), open files "
        f"{first[3]} -> {last[3]} ({fd_growth:+.1f} %), threads {first[2]} -> {last[2]}, "
        f"git processes {first[4]} -> {last[4]} (max {max(s[4] for s in samples)})"
    )
    flat = rss_growth < 5 and fd_growth < 5 and last[4] <= first[4] + 2
    where = f"{load.agents} x 1 plain line/s, {last[0] / 60:.1f} min"
    return where, figure, MET if flat else NOT_MET


def storm(f: Figures, load: str) -> Verdict:
    start, ping = values(f, load, "start_s"), values(f, load, "ping_max_ms")
    if not start:
        return "-", "-", NOT_RUN
    peer = values(f, load, "start_s", "supervisord")
    figure = f"all running in {spread(start, '.2f')} s" + (
        f" (supervisord {spread(peer, '.2f')} s)" if peer else ""
    )
    figure += f"; socket's worst answer {spread(ping, '.0f')} ms"
    ok = statistics.median(start) <= 2 and max(ping) <= 50
    return load_text(f, load) + ", no daemon running", figure, MET if ok else NOT_MET


def latency(
    sample: Callable[[Figures], list[float]],
    limit_ms: float,
    where: str,
    peer: Callable[[Figures], list[float]] = lambda f: [],
) -> Callable:
    """A p95 within `limit_ms`, and within the peer's p95 where the peer was measured."""

    def check(f: Figures) -> Verdict:
        got, peer_got = sample(f), peer(f)
        if not got:
            return "-", "-", NOT_RUN
        figure = dist(got) + (f" (supervisord {dist(peer_got)})" if peer_got else "")
        ok = pct(got, 0.95) <= limit_ms and (not peer_got or pct(got, 0.95) <= pct(peer_got, 0.95))
        return where.format(m=f.mode), figure, MET if ok else NOT_MET

    return check


def verb(f: Figures) -> Verdict:
    wall, cpu = values(f, "idle", "verb_wall_ms"), values(f, "idle", "verb_cpu_ms")
    if not wall:
        return "-", "-", NOT_RUN
    figure = f"{spread(wall, '.0f')} ms wall, {spread(cpu, '.0f')} ms CPU"
    peer = values(f, "idle", "verb_wall_ms", "supervisord")
    if peer:
        peer_cpu = values(f, "idle", "verb_cpu_ms", "supervisord")
        figure += f" (supervisorctl {spread(peer, '.0f')} / {spread(peer_cpu, '.0f')})"
    ok = statistics.median(wall) <= 80 and statistics.median(cpu) <= 60
    return load_text(f, "idle"), figure, MET if ok else NOT_MET


def stop(f: Figures) -> Verdict:
    took = values(f, "plain", "stop_s")
    if not took:
        return "-", "-", NOT_RUN
    peer = values(f, "plain", "stop_s", "supervisord")
    figure = f"{spread(took, '.2f')} s" + (
        f" (supervisord {spread(peer, '.2f')} s)" if peer else ""
    )
    where = load_text(f, "plain") + " (they exit at once on SIGTERM)"
    below = not peer or statistics.median(took) <= statistics.median(peer)
    return where, figure, MET if statistics.median(took) <= 2 and below else NOT_MET


def dash_key(f: Figures) -> Verdict:
    keys = f.dashboard_raw.get("busy", {}).get("key_ms", [])
    if not keys:
        return "-", "-", NOT_RUN
    where = f"{f.mode.dash_sessions} busy sessions (restarting, a line a second each)"
    return where, dist(keys), MET if pct(keys, 0.95) <= 50 else NOT_MET


def dash_idle(f: Figures) -> Verdict:
    quiet = f.dashboard.get("quiet")
    if quiet is None:
        return "-", "-", NOT_RUN
    cpu = quiet["cpu_no_keys"]
    where = f"{f.mode.dash_sessions} quiet sessions, no keys"
    return where, f"{cpu:.1f} % of a core", MET if cpu <= 2 else NOT_MET


def flood(f: Figures) -> Verdict:
    got = f.dashboard.get("flood")
    if got is None:
        return "-", "-", NOT_RUN
    grew = got["rss_end_mb"] - got["rss_start_mb"]
    figure = (
        f"loop lag p99 {got['lag_p99_ms']:.0f} ms (p95 {got['lag_p95_ms']:.0f}); dashboard RSS "
        f"{got['rss_start_mb']:.0f} -> {got['rss_end_mb']:.0f} MB over {f.mode.dash_seconds:g} s"
    )
    ok = got["lag_p99_ms"] <= 100 and grew <= 10
    return "one agent, 50,000 lines/s, its output open", figure, MET if ok else NOT_MET


def _all_pings(f: Figures) -> list[float]:
    return [p for load in ("idle", "plain") for c in cycles(f, load) for p in c.pings_ms]


@dataclass(frozen=True)
class Target:
    """One row of the issue's Targets table and how the run's figures decide it."""

    key: str
    figure: str
    target: str
    check: Callable[[Figures], Verdict]


TARGETS = [
    Target("cpu-plain", "CPU, herd / supervisord", "<= 0.2", lambda f: cpu_ratio(f, "plain", 0.2)),
    Target(
        "cpu-stream", "CPU, herd / supervisord", "<= 0.10", lambda f: cpu_ratio(f, "stream", 0.1)
    ),
    Target("idle-cpu", "idle CPU", "<= 0.5 % of a core", idle_cpu),
    Target(
        "idle-periodic",
        "idle: per-session periodic work",
        "at most once a minute (the watcher and the tailers wake on change)",
        periodic,
    ),
    Target("memory-rss", "memory", f"<= {RSS_LIMIT_MB} MB RSS", memory),
    Target("memory-threads", "threads", "independent of the number of agents (within 2)", threads),
    Target(
        "memory-soak",
        "memory over a soak",
        "flat: < 5 % growth of RSS and open files, git processes flat (20 minutes)",
        soak,
    ),
    Target(
        "storm-quiet",
        "spawn storm, quiet",
        "all running within 2 s; the control socket answers within 50 ms throughout",
        lambda f: storm(f, "idle"),
    ),
    Target(
        "storm-busy",
        "spawn storm, busy",
        "all running within 2 s; the control socket answers within 50 ms throughout",
        lambda f: storm(f, "plain"),
    ),
    Target(
        "progress",
        "progress-file write -> visible in `herd status`",
        "p95 <= 50 ms",
        latency(lambda f: f.progress_ms, 50, "{m.latency_sessions} busy sessions"),
    ),
    Target(
        "commit",
        "commit -> checkpoint recorded",
        "p95 <= 100 ms",
        latency(lambda f: f.commit_ms, 100, "{m.latency_sessions} busy sessions"),
    ),
    Target(
        "crash",
        "crash -> relaunch, no backoff",
        "p95 <= 100 ms, and below supervisord's",
        latency(
            lambda f: f.crash_ms,
            100,
            "one crash at a time beside {m.crash_background} busy sessions",
            lambda f: f.crash_peer_ms,
        ),
    ),
    Target("verb", "`herd status s0 --json`", "<= 80 ms wall, <= 60 ms CPU", verb),
    Target(
        "stop",
        "stop everything, `herd down`",
        "<= 2 s beyond the agents' own exit, and below supervisord",
        stop,
    ),
    Target("dashboard-key", "dashboard, key -> screen", "p95 <= 50 ms", dash_key),
    Target("dashboard-idle", "dashboard, idle", "<= 2 % of a core", dash_idle),
    Target("flood", "dashboard on a flood", "event-loop lag p99 <= 100 ms; memory bounded", flood),
]

CHART_ROWS: list[tuple[str, Callable[[Figures], list[float]], float, str]] = [
    (
        "key -> screen",
        lambda f: f.dashboard_raw.get("busy", {}).get("key_ms", []),
        50,
        "{m.dash_sessions} busy sessions",
    ),
    ("progress -> status", lambda f: f.progress_ms, 50, "{m.latency_sessions} busy sessions"),
    ("commit -> checkpoint", lambda f: f.commit_ms, 100, "{m.latency_sessions} busy sessions"),
    ("crash -> relaunch", lambda f: f.crash_ms, 100, "beside {m.crash_background} busy sessions"),
    (
        "crash -> relaunch, supervisord",
        lambda f: f.crash_peer_ms,
        100,
        "beside {m.crash_background} busy programs (autorestart, no git work)",
    ),
    ("socket answer, storm", _all_pings, 50, "every herd cold start of the quiet and plain loads"),
]
"""The chart's rows: a label, the sample, the target (the p95's, or the worst's for the socket),
the load."""


def read_notes(path: Path) -> dict[str, str]:
    """The notes file's `## KEY` sections, by key."""
    if not path.exists():
        return {}
    sections: dict[str, str] = {}
    for block in re.split(r"^## ", path.read_text(), flags=re.M)[1:]:
        key, _, body = block.partition("\n")
        sections[key.strip()] = body.strip()
    return sections


def worse(now: list[float], before: list[float]) -> bool:
    """A figure (lower is better) worse than the previous record's by more than its spread:
    the median rose by more than the wider of the two runs' ranges."""
    if not now or not before:
        return False
    width = max(max(now) - min(now), max(before) - min(before))
    return statistics.median(now) - statistics.median(before) > width


def comparable(f: Figures, previous: Figures | None, load: str) -> bool:
    """The previous record measured this load the same way (mode, agents, rate)."""
    if previous is None or previous.mode.name != f.mode.name:
        return False
    mine = next((x for x in f.loads if x.name == load), None)
    theirs = next((x for x in previous.loads if x.name == load), None)
    return mine is not None and mine == theirs


def side_by_side(f: Figures, previous: Figures | None = None) -> str:
    """One table per load: each figure, each system's median (range), herd / supervisord;
    herd's figure marked **worse** where it is, beyond the spread, against `previous`."""
    from suite import FIGURES

    out = []
    for load in f.loads:
        if not cycles(f, load.name):
            continue
        against = previous if comparable(f, previous, load.name) else None
        out.append(f"\n### {load_text(f, load.name)}\n")
        out.append("| figure | " + " | ".join(f.systems) + " | herd / supervisord |")
        out.append("|---|" + "---|" * (len(f.systems) + 1))
        for label, attr, scale, fmt in FIGURES:
            row, medians = [], {}
            for name in f.systems:
                got = [v * scale for v in values(f, load.name, attr, name)]
                medians[name] = statistics.median(got) if got else 0.0
                cell = spread(got, fmt) if got else "-"
                if name == "herd" and against is not None:
                    was = [v * scale for v in values(against, load.name, attr, name)]
                    if worse(got, was):
                        cell += f" **worse** (was {spread(was, fmt)})"
                row.append(cell)
            peer = medians.get("supervisord")
            ratio = f"{medians['herd'] / peer:.2f}" if peer else "-"
            out.append(f"| {label} | " + " | ".join(row) + f" | {ratio} |")
    return "\n".join(out)


def herd_alone(f: Figures) -> str:
    """The figures without a peer: latencies, the dashboard, the soak."""
    out = ["| figure | load | value |", "|---|---|---|"]
    m = f.mode
    for label, sample, _, where in CHART_ROWS:
        got = sample(f)
        if got:
            out.append(f"| {label} | {where.format(m=m)} | {dist(got)} |")
    if f.watcher:
        out.append(
            f"| the watcher during the latency run | {m.latency_sessions} busy | {f.watcher} |"
        )
    for kind, got in f.dashboard.items():
        if kind == "flood":
            out.append(
                f"| dashboard, flood | 1 x 50,000 lines/s | loop lag p95 {got['lag_p95_ms']:.0f}"
                f" / p99 {got['lag_p99_ms']:.0f} ms; its CPU {got['cpu']:.1f} %; RSS "
                f"{got['rss_start_mb']:.0f} -> {got['rss_end_mb']:.0f} MB |"
            )
            continue
        out.append(
            f"| dashboard, {kind} | {m.dash_sessions} sessions | key p50 {got['key_p50_ms']:.0f}"
            f" / p95 {got['key_p95_ms']:.0f} ms ({got['keys']:.0f} keys; its CPU per key p50 "
            f"{got['key_cpu_p50_ms']:.0f} / p95 {got['key_cpu_p95_ms']:.0f} ms); loop lag p95 "
            f"{got['lag_p95_ms']:.0f} / p99 {got['lag_p99_ms']:.0f} ms; its CPU "
            f"{got['cpu_with_keys']:.1f} % with keys, {got['cpu_no_keys']:.1f} % without; the "
            f"daemon {got['daemon_alone']:.1f} % alone, {got['daemon_no_keys']:.1f} % "
            "with it subscribed |"
        )
    if f.soak is not None and f.soak_load is not None:
        out.append(f"| soak | | {f.soak.summary(f.soak_load)} |")  # type: ignore[attr-defined]
    return "\n".join(out)


def render(
    f: Figures,
    chart_name: str,
    notes: dict[str, str],
    notes_name: str,
    previous: Figures | None = None,
) -> str:
    """The whole markdown record (herd's side-by-side figures against `previous`'s)."""
    facts, m = f.facts, f.mode
    rows, missed = [], []
    for target in TARGETS:
        where, figure, status = target.check(f)
        rows.append(f"| {target.figure} | {target.target} | {where} | {figure} | {status} |")
        if status != MET:
            missed.append((target, status))
    out = [
        "# Benchmarks: herd side by side with supervisord",
        "",
        f"<!-- Written by bench/suite.py --{m.name}; edit {notes_name} instead. -->",
        "",
        f"Written by `bench/suite.py --{m.name}` ({facts['began']}): herd {facts['herd']}; "
        f"peer {facts['peer']}.",
        f"Machine: {facts['machine']}, {facts['kernel']}, Python {facts['python']}; load "
        f"average {facts['load_before']} before the run, {facts['load_after']} after.",
        "",
        "Side by side, each system supervises the same stand-in agents (`bench/agent.py`) "
        f"alternately, {m.rounds} round(s) each: a cold start with no daemon until every agent "
        "runs (herd's control socket pinged every 10 ms by `bench/pinger.py` meanwhile), "
        f"{m.warmup_s:g} s of warm-up, **the supervisor's own CPU seconds** (its process only, "
        f"user + system) over {m.window_s:g} s, its memory, threads and open files, a CLI verb "
        "(`herd status s0 --json` / `supervisorctl status s0`, median of 5), then stop "
        "everything (`herd down` / `supervisorctl shutdown`) until no agent is left. Each "
        "figure is the median (range) of the rounds. Latencies are distributions: p50, p95, "
        "max and the number of samples.",
        "",
        "To reproduce (a fresh checkout; the suite is PID 1 of its own PID namespace and "
        "reaps the daemons `herd up` leaves):",
        "",
        "```",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' supervisor",
        "unshare --pid --fork --mount-proc .venv/bin/python bench/suite.py --short  # minutes",
        "unshare --pid --fork --mount-proc .venv/bin/python bench/suite.py --full   # the record",
        "# --soak-minutes N shortens the soak; --only PART runs one part; --herd base=PATH adds",
        "# another herd build (its `herd` executable) to the side-by-side figures",
        "```",
        "",
        "## Targets (issue 14, tightened by issue 29)",
        "",
        "Status is computed from this run's figures"
        + (
            "; a short run uses smaller loads than the targets name (the load column)."
            if m.name != "full"
            else "."
        ),
        "",
        "| figure | target | load measured | this run | status |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    if missed:
        out += ["## Where a target is not met", ""]
        out.append(
            f"Hand-written (`{notes_name}`): what the profile showed, why, what it would take."
        )
        for target, status in missed:
            note = notes.get(target.key) or (
                f"_No explanation written yet: add a `## {target.key}` section to {notes_name}._"
            )
            out += ["", f"### {target.figure}, {target.target} ({status.strip('*')})", "", note]
        out.append("")
    out += [
        "## Latency distributions",
        "",
        f"![latency distributions]({chart_name})",
        "",
        "Each dot is one sample (log scale); the bar marks p50 to p95, the red line the target.",
        "",
        "## Side by side",
        "",
        compared(previous),
        side_by_side(f, previous),
        "",
        "## herd alone (figures without a peer)",
        "",
        herd_alone(f),
        "",
    ]
    for key, body in notes.items():
        if key.startswith("appendix:"):
            out += [f"## {key.removeprefix('appendix:').strip()}", "", body, ""]
    return "\n".join(out)


def svg(f: Figures) -> str:
    """A strip chart of each latency sample on a log axis, p50-p95 bar, target line."""
    left, right, top, row_h, width = 230, 30, 40, 56, 940  # room for the longest label
    rows = [(label, sample(f), limit) for label, sample, limit, _ in CHART_ROWS]
    height = top + row_h * len(rows) + 40
    lo, hi = 1.0, 10_000.0
    plot_w = width - left - right

    def x(ms: float) -> float:
        clipped = min(max(ms, lo), hi)
        return left + plot_w * (math.log10(clipped) - math.log10(lo)) / math.log10(hi / lo)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">Latency distributions, '
        f"ms (log scale), bench/suite.py --{f.mode.name}</text>",
    ]
    for tick in (1, 10, 50, 100, 1000, 10000):
        tx = x(tick)
        parts.append(
            f'<line x1="{tx:.1f}" y1="{top - 5}" x2="{tx:.1f}" y2="{top + row_h * len(rows)}" '
            'stroke="#ddd"/>'
        )
        parts.append(
            f'<text x="{tx:.1f}" y="{top + row_h * len(rows) + 16}" text-anchor="middle">'
            f"{tick}</text>"
        )
    for index, (label, got, limit) in enumerate(rows):
        mid = top + row_h * index + row_h / 2
        parts.append(
            f'<text x="{left - 10}" y="{mid - 4:.1f}" text-anchor="end">{escape(label)}</text>'
        )
        summary = (
            f"p50 {statistics.median(got):.0f}, p95 {pct(got, 0.95):.0f} (n={len(got)})"
            if got
            else "not run"
        )
        parts.append(
            f'<text x="{left - 10}" y="{mid + 12:.1f}" text-anchor="end" fill="#555" '
            f'font-size="10">{summary}</text>'
        )
        tx = x(limit)
        parts.append(
            f'<line x1="{tx:.1f}" y1="{mid - row_h / 2 + 6:.1f}" x2="{tx:.1f}" '
            f'y2="{mid + row_h / 2 - 6:.1f}" stroke="#d22" stroke-width="2" '
            'stroke-dasharray="4 2"/>'
        )
        if not got:
            continue
        p50, p95 = x(statistics.median(got)), x(pct(got, 0.95))
        parts.append(
            f'<rect x="{p50:.1f}" y="{mid - 4:.1f}" width="{max(p95 - p50, 1.5):.1f}" '
            'height="8" fill="#2a6" opacity="0.45"/>'
        )
        for n, ms in enumerate(got):
            jitter = ((n * 7919) % 17 - 8) * 1.6  # a fixed spread, so dots do not hide each other
            parts.append(
                f'<circle cx="{x(ms):.1f}" cy="{mid + jitter:.1f}" r="2.2" fill="#246" '
                'opacity="0.55"/>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def compared(previous: Figures | None) -> str:
    """What herd's figures are held against."""
    if previous is None:
        return "No previous record to compare with."
    when, version = previous.facts.get("began", "?"), previous.facts.get("herd", "?")
    return (
        f"herd's figures against the previous record ({when}, herd {version}): one worse by "
        "more than the spread (its median rose more than the wider of the two ranges) is "
        "marked **worse**, with the previous figure."
    )


def write(
    f: Figures, out: Path, chart: Path, notes_path: Path, previous: Figures | None = None
) -> str:
    """Write the record and its chart; return the record."""
    out.parent.mkdir(parents=True, exist_ok=True)
    chart.write_text(svg(f))
    try:
        notes_name = str(notes_path.resolve().relative_to(Path(__file__).resolve().parent.parent))
    except ValueError:
        notes_name = str(notes_path)
    text = render(f, chart.name, read_notes(notes_path), notes_name, previous)
    out.write_text(text)
    return text


def for_terminal(text: str) -> str:
    """The record's targets and figures, without the explanations and appendices."""
    keep = ("Targets", "Side by side", "herd alone")
    sections = re.split(r"^(?=## )", text, flags=re.M)
    return "".join(s for s in sections if s.startswith(tuple(f"## {k}" for k in keep)))
