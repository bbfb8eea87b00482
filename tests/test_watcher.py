"""The fleet watcher on real files and git repos: one inotify watch, callbacks per session."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from conftest import git, make_repo

from agentherd.supervisor.files.watcher import FleetWatcher, WatchKind, WatchTarget
from agentherd.supervisor.git.gitops import git_paths

WAIT_S = 10.0
"""Generous bound for an event to arrive; a healthy watcher takes tens of milliseconds."""


@pytest.fixture
def anyio_backend() -> str:
    """The daemon runs on asyncio."""
    return "asyncio"


class Recorder:
    """An `on_change` callback that remembers calls and lets a test wait for one."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, WatchKind]] = []
        self._changed = anyio.Event()

    def __call__(self, session: str, kind: WatchKind) -> None:
        """Record one call and wake waiters."""
        self.calls.append((session, kind))
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Wait (bounded) until `predicate` holds, re-checking after every call."""
        with anyio.fail_after(WAIT_S):
            while not predicate():
                await self._changed.wait()

    async def wait_for(self, session: str, kind: WatchKind) -> None:
        """Wait (bounded) until `on_change(session, kind)` has been called."""
        await self.wait_until(lambda: (session, kind) in self.calls)

    async def wait_all(self, wanted: set[tuple[str, WatchKind]]) -> None:
        """Wait (bounded) until every pair in `wanted` has been called."""
        await self.wait_until(lambda: wanted <= set(self.calls))


@asynccontextmanager
async def running(watcher: FleetWatcher) -> AsyncIterator[FleetWatcher]:
    """Run `watcher` in a task group for the block; cancel it afterwards."""
    async with anyio.create_task_group() as tg:
        await tg.start(watcher.run)
        yield watcher
        tg.cancel_scope.cancel()


def append(path: Path, text: str = "x\n") -> None:
    """Append to a file in place, as an agent logging progress does."""
    with path.open("a") as f:
        f.write(text)


def replace(path: Path, text: str) -> None:
    """Write a sibling temp file and rename it over `path`, as atomic writers do."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def commit(repo: Path, name: str = "f.txt") -> None:
    """Add one file and commit it."""
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", f"add {name}")


def git_targets(session: str, worktree: Path) -> list[WatchTarget]:
    """The git targets of a session working in `worktree`."""
    return [WatchTarget(session, "git", d) for d in git_paths(worktree).watch_dirs]


@pytest.mark.anyio
async def test_appending_to_progress_file_reports_progress(tmp_path: Path) -> None:
    progress = tmp_path / "progress.md"
    progress.write_text("start\n")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([WatchTarget("s1", "progress", progress)])
    async with running(watcher):
        append(progress)
        await got.wait_for("s1", "progress")
    assert got.calls == [("s1", "progress")]
    assert watcher.batches == 1


@pytest.mark.anyio
async def test_plan_replaced_by_rename_reports_plan_every_time(tmp_path: Path) -> None:
    plan = tmp_path / "plan.md"
    plan.write_text("- [ ] one\n")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([WatchTarget("s1", "plan", plan)])
    async with running(watcher):
        replace(plan, "- [x] one\n")
        await got.wait_for("s1", "plan")
        got.calls.clear()
        replace(plan, "- [x] one\n- [ ] two\n")  # the watch did not go stale with the old inode
        await got.wait_for("s1", "plan")


@pytest.mark.anyio
async def test_commit_in_plain_repo_reports_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets(git_targets("s1", repo))
    async with running(watcher):
        commit(repo)
        await got.wait_for("s1", "git")


@pytest.mark.anyio
async def test_commit_in_linked_worktree_reports_its_session(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    assert git_paths(linked).git_dir != git_paths(repo).git_dir
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([*git_targets("main", repo), *git_targets("wt", linked)])
    async with running(watcher):
        commit(linked)
        await got.wait_for("wt", "git")


@pytest.mark.anyio
async def test_git_lock_files_and_other_files_trigger_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    progress = tmp_path / "progress.md"
    progress.write_text("")
    other = tmp_path / "notes.txt"
    got = Recorder()
    watcher = FleetWatcher(got)
    paths = git_paths(repo)
    watcher.set_targets([*git_targets("s1", repo), WatchTarget("s1", "progress", progress)])
    async with running(watcher):
        (paths.git_dir / "index.lock").write_text("")
        (paths.git_dir / "index.lock").unlink()
        (paths.common_dir / "refs" / "heads" / "main.lock").write_text("")
        (paths.common_dir / "refs" / "heads" / "main.lock").unlink()
        other.write_text("not a target\n")
        append(progress)  # the barrier: inotify delivers in order, so the noise came first
        await got.wait_for("s1", "progress")
    assert got.calls == [("s1", "progress")]


@pytest.mark.anyio
async def test_sibling_file_is_not_reported(tmp_path: Path) -> None:
    runs = tmp_path / "run-1"
    runs.mkdir()
    log, other = runs / "output.log", runs / "stderr.log"
    log.write_text("")
    progress = tmp_path / "progress.md"
    progress.write_text("")
    got = Recorder()
    watcher = FleetWatcher(got)
    # A plan beside the log: a folder of logs alone is watched one change at a time, and any
    # change in it wakes the log's reader (test_a_log_folder_reports_one_change_...).
    plan = runs / "plan.md"
    targets = [WatchTarget("s1", "log", log), WatchTarget("s1", "plan", plan)]
    watcher.set_targets([*targets, WatchTarget("s1", "progress", progress)])
    async with running(watcher):
        append(other)
        append(progress)  # barrier
        await got.wait_for("s1", "progress")
        assert got.calls == [("s1", "progress")]
        append(log)
        await got.wait_for("s1", "log")


@pytest.mark.anyio
async def test_new_session_restarts_the_watch_and_is_heard(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first = WatchTarget("s1", "progress", one / "progress.md")
    second = WatchTarget("s2", "progress", two / "progress.md")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([first])
    async with running(watcher):
        assert watcher.watched_dirs == (str(one.resolve()),)
        watcher.set_targets([first, second])
        await watcher.wait_watching()
        assert watcher.restarts == 1
        assert watcher.starts == 2
        assert got.calls == [("s1", "progress")]  # its folder's changes in the gap, unseen
        got.calls.clear()
        append(second.path)
        await got.wait_for("s2", "progress")
        append(first.path)
        await got.wait_for("s1", "progress")
        watcher.set_targets([second, first])  # same folders: no restart
        assert watcher.restarts == 1


@pytest.mark.anyio
async def test_a_commit_made_while_the_watch_restarts_is_reported(tmp_path: Path) -> None:
    """A run's start restarts the watch (its log folder is new); a commit its agent makes at
    that moment raised its event on the watch that gives way, closed unread: reported anyway
    (it once waited for the daemon's minute-long slow pass, and a moved session's commits
    reached the checkpoint remote a minute late)."""
    repo = make_repo(tmp_path / "repo")
    run = tmp_path / "run-1"
    run.mkdir()
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets(git_targets("s1", repo))
    async with running(watcher):
        watcher.set_targets([*git_targets("s1", repo), WatchTarget("s1", "log", run / "out.log")])
        commit(repo)  # before the loop runs again: the watch that saw it closes with it unread
        await watcher.wait_watching()
        assert watcher.restarts == 1
        await got.wait_for("s1", "git")


@pytest.mark.anyio
async def test_folder_created_later_is_picked_up_by_recheck(tmp_path: Path) -> None:
    later = tmp_path / "later" / "run-1"
    target = WatchTarget("s1", "log", later / "output.log")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([target])
    async with running(watcher):
        assert watcher.watched_dirs == ()
        assert watcher.recheck() is False
        later.mkdir(parents=True)
        assert watcher.recheck() is True
        await watcher.wait_watching()
        assert watcher.watched_dirs == (str(later.resolve()),)
        append(target.path)
        await got.wait_for("s1", "log")


@pytest.mark.anyio
async def test_sessions_sharing_a_folder_get_their_own_callbacks(tmp_path: Path) -> None:
    a, b, shared = tmp_path / "a.md", tmp_path / "b.md", tmp_path / "plan.md"
    for path in (a, b, shared):
        path.write_text("")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets(
        [
            WatchTarget("s1", "progress", a),
            WatchTarget("s2", "progress", b),
            WatchTarget("s1", "plan", shared),
            WatchTarget("s2", "plan", shared),
        ]
    )
    async with running(watcher):
        append(a)
        await got.wait_for("s1", "progress")
        append(b)
        await got.wait_for("s2", "progress")
        assert got.calls == [("s1", "progress"), ("s2", "progress")]
        replace(shared, "- [ ] x\n")
        await got.wait_all({("s1", "plan"), ("s2", "plan")})
    assert watcher.starts == 1


@pytest.mark.anyio
async def test_a_failing_callback_does_not_stop_the_watch(tmp_path: Path) -> None:
    progress = tmp_path / "progress.md"
    progress.write_text("")
    got = Recorder()

    def flaky(session: str, kind: WatchKind) -> None:
        got(session, kind)
        if len(got.calls) == 1:
            raise RuntimeError("callback bug")

    watcher = FleetWatcher(flaky)
    watcher.set_targets([WatchTarget("s1", "progress", progress)])
    async with running(watcher):
        append(progress)
        await got.wait_for("s1", "progress")
        append(progress)
        await got.wait_until(lambda: len(got.calls) == 2)
    assert got.calls == [("s1", "progress")] * 2


@pytest.mark.anyio
async def test_one_watch_serves_fifty_sessions(tmp_path: Path) -> None:
    count = 50
    targets: list[WatchTarget] = []
    for i in range(count):
        session = tmp_path / f"s{i}"
        (session / "run-1").mkdir(parents=True)
        (session / "progress.md").write_text("")
        targets.append(WatchTarget(f"s{i}", "progress", session / "progress.md"))
        targets.append(WatchTarget(f"s{i}", "log", session / "run-1" / "output.log"))
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets(targets)
    async with running(watcher):
        for target in targets:
            append(target.path)
        await got.wait_all({(t.session, t.kind) for t in targets})
        assert len(watcher.watched_dirs) == 2 * count
    assert watcher.starts == 1
    assert watcher.restarts == 0
    assert watcher.failures == 0


@pytest.mark.anyio
async def test_the_watch_holds_no_thread(tmp_path: Path) -> None:
    """The inotify descriptor waits in the event loop: a quiet fleet wakes nothing (a notify
    thread polling its stop event woke 100 times a second)."""
    import threading

    progress = tmp_path / "progress.md"
    progress.write_text("")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([WatchTarget("s1", "progress", progress)])
    threads = {t.ident for t in threading.enumerate()}
    async with running(watcher):
        await watcher.wait_watching()
        append(progress)
        await got.wait_for("s1", "progress")
        assert {t.ident for t in threading.enumerate()} <= threads


@pytest.mark.anyio
async def test_a_watched_folder_deleted_and_made_again_is_watched_anew(tmp_path: Path) -> None:
    """inotify says when a watched folder goes; the next recheck looks only for missing ones."""
    import shutil

    run = tmp_path / "run-1"
    run.mkdir()
    target = WatchTarget("s1", "log", run / "output.log")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([target])
    async with running(watcher):
        shutil.rmtree(run)
        with anyio.fail_after(WAIT_S):
            while watcher.watched_dirs:  # restarted on its own, without the folder
                await anyio.sleep(0.01)
        run.mkdir()
        assert watcher.recheck() is True
        await watcher.wait_watching()
        append(target.path)
        await got.wait_for("s1", "log")
    assert watcher.starts == 2


@pytest.mark.anyio
async def test_a_log_folder_reports_one_change_until_its_reader_arms_it(tmp_path: Path) -> None:
    """A chatty agent's every write is not an event: after one, the log's folder is quiet until
    its reader arms it again (before reading), and then its next write is heard."""
    run = tmp_path / "runs" / "s1" / "1"
    run.mkdir(parents=True)
    log_file = run / "output.log"
    log_file.write_text("")
    marker = tmp_path / "progress.md"
    marker.write_text("")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([WatchTarget("s1", "log", log_file), WatchTarget("s2", "progress", marker)])
    async with running(watcher):
        append(log_file)
        await got.wait_for("s1", "log")
        got.calls.clear()
        append(log_file)  # the watch fired: nothing until armed
        append(marker)  # queued after the log's write: once it is heard, the log's would be too
        await got.wait_for("s2", "progress")
        assert ("s1", "log") not in got.calls
        watcher.arm(log_file)
        watcher.arm(log_file)  # armed already: no second watch
        assert watcher.arms == 1
        append(log_file)
        await got.wait_for("s1", "log")
        got.calls.clear()
        watcher.arm(log_file)
        (run / "exit.json").write_text("{}")  # another file of the run's folder wakes its reader
        await got.wait_for("s1", "log")


@pytest.mark.anyio
async def test_a_log_folder_beside_a_plan_reports_every_change(tmp_path: Path) -> None:
    log_file = tmp_path / "output.log"
    plan = tmp_path / "plan.md"
    log_file.write_text("")
    plan.write_text("")
    got = Recorder()
    watcher = FleetWatcher(got)
    watcher.set_targets([WatchTarget("s1", "log", log_file), WatchTarget("s1", "plan", plan)])
    async with running(watcher):
        append(log_file)
        await got.wait_for("s1", "log")
        got.calls.clear()
        append(log_file)  # never armed: a folder with a plan in it is watched as before
        await got.wait_for("s1", "log")


@pytest.mark.anyio
async def test_a_progress_write_is_handed_on_without_waiting_for_the_batch(tmp_path: Path) -> None:
    """A change to a progress file only ends its batch at once; a plan's waits for a quiet step
    (here 60 s: the test would time out had the progress write waited for one)."""
    progress, plan = tmp_path / "progress.md", tmp_path / "plan.md"
    progress.write_text("start\n")
    plan.write_text("- [ ] one\n")
    got = Recorder()
    watcher = FleetWatcher(got, debounce_ms=120_000, step_ms=60_000)
    watcher.set_targets([WatchTarget("s1", "progress", progress), WatchTarget("s1", "plan", plan)])
    async with running(watcher):
        append(progress)
        await got.wait_for("s1", "progress")
        replace(plan, "- [x] one\n")  # its batch stays open a quiet step long
        await anyio.sleep(0.05)  # let the watch read it (no call may come from it yet)
        append(progress, "more\n")  # handed on while the plan's batch is still open
        await got.wait_until(lambda: got.calls.count(("s1", "progress")) == 2)
    assert got.calls == [("s1", "progress"), ("s1", "progress")]
