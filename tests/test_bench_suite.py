"""The benchmark suite writes its record: every target's row, met or not from the figures, the
notes of the missed ones, and the latency chart (bench/suite.py, bench/benchdoc.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import benchdoc  # noqa: E402
import soak  # noqa: E402
import suite  # noqa: E402

STORM = next(t.target for t in benchdoc.TARGETS if t.key == "storm-quiet")
NOTES = "# notes\n\n## cpu-plain\n\nThe plain reader costs X.\n\n## appendix: Old runs\n\nSee Y.\n"


def figures(herd_cpu: float, peer_cpu: float, start_s: float) -> suite.Figures:
    """A run's figures with every part filled in, as the suite would hand them over."""
    mode = suite.MODES["tiny"]
    got = suite.Figures(
        mode=mode, systems=["herd", "supervisord"], loads=list(mode.loads), sections=[]
    )
    for load in mode.loads:
        for system, cpu in (("herd", herd_cpu), ("supervisord", peer_cpu)):
            cycle = suite.Cycle(
                start_s=start_s,
                cpu_share=cpu,
                rss_mb=50,
                threads=4,
                fds=20,
                verb_wall_ms=70,
                verb_cpu_ms=50,
                ping_max_ms=20,
                stop_s=0.5,
                pings_ms=[3.0, 20.0],
            )
            got.results.add(load.name, system, cycle)
    got.progress_ms, got.commit_ms, got.crash_ms = [10.0] * 20, [20.0] * 18 + [900.0] * 2, [40.0]
    got.dashboard_raw = {"busy": {"key_ms": [15.0, 30.0]}}
    got.soak = soak.Soak(samples=[(0.0, 50.0, 4, 20, 0), (60.0, 53.0, 4, 20, 1)])
    got.soak_load = suite.Load("soak", 3, "plain", 1.0)
    got.facts = dict.fromkeys(
        ("machine", "kernel", "python", "herd", "peer", "load_before", "load_after", "began"), "x"
    )
    return got


def status_of(text: str, figure: str, target: str) -> str:
    """The status cell of the Targets row for `figure` and `target`."""
    rows = [r for r in text.splitlines() if r.startswith(f"| {figure} | {target} |")]
    assert len(rows) == 1, (figure, target, rows)
    return rows[0].rstrip(" |").rsplit("| ", 1)[1]


def test_record_decides_each_target_from_the_figures(tmp_path: Path) -> None:
    """A ratio over the target is not met and gets its note; one under it is met; a p95 over
    the target is not met even when the median is under; a part not run says so."""
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    out, chart = tmp_path / "benchmarks.md", tmp_path / "benchmarks-latency.svg"

    text = benchdoc.write(figures(0.3, 0.5, start_s=1.0), out, chart, notes)

    assert status_of(text, "CPU, herd / supervisord", "<= 0.2") == "**not met**"
    assert "**0.60**" in text
    assert "The plain reader costs X." in text
    assert status_of(text, "spawn storm, quiet", STORM) == "met"
    assert status_of(text, "commit -> checkpoint recorded", "p95 <= 100 ms") == "**not met**"
    assert status_of(text, "progress-file write -> visible in `herd status`", "p95 <= 50 ms") == (
        "met"
    )
    assert status_of(text, "dashboard, idle", "<= 2 % of a core") == "not run"
    soaked = next(t for t in benchdoc.TARGETS if t.key == "memory-soak")
    assert status_of(text, soaked.figure, soaked.target) == "**not met**"  # RSS +6 %
    assert "add a `## commit` section" in text  # a missed target without a note says so
    assert "The plain reader" not in text.split("### CPU, herd / supervisord, <= 0.10")[1]
    assert "## Old runs\n\nSee Y." in text
    assert f"]({chart.name})" in text
    for target in benchdoc.TARGETS:
        status_of(text, target.figure, target.target)

    met = benchdoc.render(figures(0.05, 0.5, start_s=3.0), chart.name, {}, "notes.md")
    assert status_of(met, "CPU, herd / supervisord", "<= 0.2") == "met"
    assert status_of(met, "spawn storm, quiet", STORM) == "**not met**"


def test_record_written_again_from_saved_figures(tmp_path: Path) -> None:
    """`--from-figures`: the figures saved as JSON give the same record (notes edited later)."""
    before = figures(0.3, 0.5, start_s=1.0)
    saved = json.loads(json.dumps(suite.figures_json(before)))
    again = suite.figures_from_json(saved)
    assert benchdoc.render(again, "c.svg", {}, "n") == benchdoc.render(before, "c.svg", {}, "n")


def test_a_figure_worse_than_the_previous_records_beyond_its_spread_is_marked() -> None:
    """Issue 29: the record marks what got worse since the last one, not what moved within
    the rounds' spread."""
    before = figures(0.3, 0.5, start_s=1.0)
    slower = figures(0.3, 0.5, start_s=1.5)
    text = benchdoc.render(slower, "c.svg", {}, "n", previous=before)
    assert "1.50 **worse** (was 1.00)" in text
    assert text.count("**worse**") == len(slower.loads) + 1  # + the sentence that explains it
    assert "**worse** (was" not in benchdoc.render(before, "c.svg", {}, "n", previous=slower)
    spread_wide = figures(0.3, 0.5, start_s=1.5)
    for load in spread_wide.loads:  # a second round at 0.9 s: 1.5 is within 0.9-1.5
        spread_wide.results.add(load.name, "herd", suite.Cycle(start_s=0.9, cpu_share=0.3))
    assert "**worse** (was" not in benchdoc.render(spread_wide, "c.svg", {}, "n", previous=before)
    assert "No previous record" in benchdoc.render(slower, "c.svg", {}, "n")


def test_chart_draws_every_distribution(tmp_path: Path) -> None:
    """The chart is well-formed SVG with a row per latency, a dot per sample."""
    drawn = ET.fromstring(benchdoc.svg(figures(0.3, 0.5, start_s=1.0)))
    labels = [t.text for t in drawn.iter("{http://www.w3.org/2000/svg}text")]
    for label, *_ in benchdoc.CHART_ROWS:
        assert label in labels
    dots = list(drawn.iter("{http://www.w3.org/2000/svg}circle"))
    assert len(dots) == 2 + 20 + 20 + 1 + 2 * 2  # keys, progress, commits, crash, 2 storms


@pytest.mark.slow
@pytest.mark.pidns
@pytest.mark.timeout(600)
def test_suite_runs_end_to_end(tmp_path: Path) -> None:
    """`bench/suite.py --tiny` runs every part against real daemons (and supervisord when it is
    installed) and writes the record with every target's row and the chart beside it."""
    out = tmp_path / "docs" / "benchmarks.md"
    done = subprocess.run(
        [sys.executable, str(BENCH / "suite.py"), "--tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    for target in benchdoc.TARGETS:
        assert status_of(text, target.figure, target.target) != "not run", target.key
    assert "Where a target is not met" in text or "**not met**" not in text
    chart = out.with_name("benchmarks-latency.svg")
    drawn = ET.fromstring(chart.read_text())
    assert len(list(drawn.iter("{http://www.w3.org/2000/svg}circle"))) > 10
    assert "## Targets" in done.stdout
    assert json.loads(out.with_name("benchmarks-figures.json").read_text())["cycles"]


def test_idle_periodic_work_is_decided_from_the_event_loops_wake_ups(tmp_path: Path) -> None:
    """At most one wake-up per quiet session a minute beyond the daemon-wide ones is met; more
    is not; a run without the figure says it was not measured."""
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    target = next(t for t in benchdoc.TARGETS if t.key == "idle-periodic")
    got = figures(0.01, 0.01, start_s=1.0)
    assert target.check(got)[2] == benchdoc.NOT_MEASURED
    agents = next(load.agents for load in got.loads if load.name == "idle")
    for woken, verdict in (
        (agents + benchdoc.DAEMON_WAKEUPS_PER_MIN, benchdoc.MET),
        (2 * agents + benchdoc.DAEMON_WAKEUPS_PER_MIN, benchdoc.NOT_MET),
    ):
        for cycle in got.results.cycles[("idle", "herd")]:
            cycle.wakeups_per_min = woken
        assert target.check(got)[2] == verdict
    text = benchdoc.write(got, tmp_path / "b.md", tmp_path / "b.svg", notes)
    assert "per session" in text
