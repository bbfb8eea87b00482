"""One writer: a checkpoint or a verdict and its events land in one transaction, or not at all."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.records import Event
from agentherd.supervisor.files.store import Change, Store, Verification

COMMIT = Checkpoint(sha="a" * 40, at=datetime(2026, 12, 1, tzinfo=UTC), subject="feat: login")


def event(kind: str, **data: object) -> Event:
    return Event(at="2026-12-01T00:00:00.000Z", session="api", kind=kind, message=kind, data=data)


def kinds(store: Store) -> list[str]:
    return [e.kind for e in store.events(session="api")]


def test_a_checkpoint_and_its_event_are_one_write_and_a_known_one_writes_nothing(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    change = Change(checkpoint=("api", COMMIT), events=(event("checkpoint"), event("out-of-scope")))
    assert [e.kind for e in store.commit(change)] == ["checkpoint", "out-of-scope"]
    assert [c.sha for c in store.checkpoints("api")] == [COMMIT.sha]
    assert store.commit(change) == []  # seen again (after a full disk): no second event
    assert kinds(store) == ["checkpoint", "out-of-scope"]
    store.close()


def test_a_checkpoint_whose_event_cannot_be_written_is_not_recorded_either(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    unwritable = event("checkpoint", sha=object())  # json.dumps fails inside the transaction
    with pytest.raises(TypeError):
        store.commit(Change(checkpoint=("api", COMMIT), events=(unwritable,)))
    assert store.checkpoints("api") == [] and kinds(store) == []
    store.close()


def test_a_verdict_and_its_event_are_one_write(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.commit(Change(checkpoint=("api", COMMIT), events=(event("checkpoint"),)))
    verdict = Verification(COMMIT.sha, False, {"sha": COMMIT.sha, "passed": False})
    with pytest.raises(TypeError):
        store.commit(
            Change(verification=("api", verdict), events=(event("verify-failed", x=object()),))
        )
    assert store.checkpoints("api")[0].verified is None and kinds(store) == ["checkpoint"]
    store.commit(Change(verification=("api", verdict), events=(event("verify-failed"),)))
    assert store.checkpoints("api")[0].verified is False
    assert store.verifications("api") == {COMMIT.sha: {"sha": COMMIT.sha, "passed": False}}
    assert kinds(store) == ["checkpoint", "verify-failed"]
    store.close()


def test_the_import_contract_keeps_helpers_out_of_the_session() -> None:
    """Observer, recovery, verification and reporting may not import the session supervisor."""
    linter = Path(sys.executable).parent / "lint-imports"
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([str(linter)], cwd=root, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "one writer" in done.stdout
