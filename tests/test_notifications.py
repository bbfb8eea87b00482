"""`[notifications]` as a person away from the terminal gets them: through Apprise to a local
ntfy-style endpoint that records what arrives.

An approval gate sends one message with the evidence (why, plan x/y, spend, the last progress
line) and a link to the session's page; a repeat is deduplicated; a second cause within the
cooldown waits and comes as one digest; quiet hours hold everything for one digest after; the
approval link opens the gate page, answers it once, and an expired or forged one is refused.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from conftest import FAST, Herd, wait_until
from notifyendpoint import Endpoint, endpoint
from test_person_in_the_loop import gated
from test_web import browser, herd_web

from agentherd.sessions.notifyconfig import NotificationsConfig
from agentherd.sessions.records import Event
from agentherd.sessions.status import PlanStatus, ProgressStatus, SessionStatus, UsageStatus
from agentherd.supervisor.session.alertkeeper import AlertKeeper

PUBLIC = "http://laptop.example:4373"


def notifying(herd: Herd, ep: Endpoint, monkeypatch: pytest.MonkeyPatch, cooldown: str) -> None:
    """herd.toml gets a [notifications] table whose URL (in the environment) is `ep`."""
    monkeypatch.setenv("HERD_TEST_NTFY", ep.url())
    table = f"""[notifications]
urls_env = ["HERD_TEST_NTFY"]
public_url = "{PUBLIC}"
cooldown = "{cooldown}"

"""
    herd.config_path.write_text(table + herd.config_path.read_text())


def about(ep: Endpoint, cause: str) -> list[dict[str, str]]:
    """The messages that arrived about `cause`."""
    found = [a.message() | {"priority": a.headers.get("x-priority", "")} for a in ep.arrived]
    return [m for m in found if m["title"].endswith(f" {cause}")]


def test_an_approval_gate_sends_one_message_with_the_evidence_and_a_link(
    herd: Herd, monkeypatch: pytest.MonkeyPatch
) -> None:
    with endpoint() as ep:
        gated(herd)
        notifying(herd, ep, monkeypatch, cooldown="0s")
        client = herd.start()
        client.call("start", name="api")
        herd.wait_state("api", "waiting-approval", timeout_s=60)
        [gate] = wait_until(lambda: about(ep, "waiting-approval"), 30, "the gate's message")
        assert gate["title"] == "herd: api waiting-approval" and gate["priority"] == "high"
        text = gate["message"]
        assert "why: plan-tampered (reworded item 2" in text, text
        assert re.search(r"^plan: \d+/\d+ passing$", text, re.M), text
        assert "plan change: item 2 reworded" in text
        assert re.search(r"^spend: ", text, re.M) and re.search(r"^progress: - .+", text, re.M)
        assert re.search(rf"^{PUBLIC}/session/api/gate\?link=\d+\.\d+\.[0-9a-f]{{64}}$", text, re.M)
        token = text.rpartition("link=")[2]
        assert client.call("link_ok", name="api", token=token) == {"ok": True, "why": None}
        assert herd.cli("approve", "api").returncode == 0
        # Answered from the terminal: the link, unused, cannot answer a later gate.
        answered = client.call("link_ok", name="api", token=token)
        assert answered == {
            "ok": False,
            "why": "this approval link's gate was answered already: open the session's page",
        }
        wait_until(lambda: about(ep, "completed"), 60, "the completion's message")
        assert len(about(ep, "waiting-approval")) == 1
    [approved] = herd.events("api", "plan-approved")
    assert approved["data"]["origin"] == "the control socket"


def status_of(name: str, passing: int) -> SessionStatus:
    return SessionStatus(
        session=name,
        plan=PlanStatus(passing=passing, total=4),
        progress=ProgressStatus(latest=["wrote the parser"]),
        usage=UsageStatus(total_tokens=1200, cost_usd=0.42),
    )


@dataclasses.dataclass
class Member:
    passing: int = 1

    def status(self, with_fleet: bool = True) -> SessionStatus:
        return status_of("api", self.passing)


START_S = 999_960.0
"""The fake clock's start, on a minute's boundary as a real clock's minutes are."""


@dataclasses.dataclass
class Clock:
    """A clock the keeper's waits move forward (no real seconds pass), and its local minute."""

    start_minute: int = 12 * 60
    now_s: float = START_S

    def __call__(self) -> float:
        return self.now_s

    def minute_of(self, now: float) -> int:
        return (self.start_minute + int((now - START_S) // 60)) % 1440

    async def sleep(self, seconds: float) -> None:
        self.now_s += seconds
        await anyio.lowlevel.checkpoint()


def event(kind: str, message: str, seq: int) -> Event:
    return Event(seq=seq, at="2026-12-04T00:00:00Z", session="api", kind=kind, message=message)


def keeper_run(
    ep: Endpoint, clock: Clock, steps: list[list[Event]], **table: object
) -> list[Event]:
    """An alert keeper fed `steps` of events (the clock a minute on between them), sending
    through Apprise to `ep`, until nothing is held; returns the daemon events it recorded."""
    config = NotificationsConfig.model_validate({"urls_env": ["HERD_TEST_NTFY"], **table})
    recorded: list[Event] = []

    async def main() -> None:
        async with anyio.create_task_group() as group:
            keeper = AlertKeeper(
                {"api": Member()},
                group,
                clock=clock,
                minute_of=clock.minute_of,
                sleep=clock.sleep,
                record=recorded.append,
            )
            keeper.use(config)
            for events in steps:
                keeper.saw(events)
                await clock.sleep(60)

    anyio.run(main)
    return recorded


def test_a_repeat_is_dropped_and_a_second_cause_in_the_cooldown_waits_for_a_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with endpoint() as ep:
        monkeypatch.setenv("HERD_TEST_NTFY", ep.url())
        clock = Clock()
        gate = event("waiting-approval", "plan-tampered", 1)
        keeper_run(
            ep,
            clock,
            [[gate], [gate], [event("claims-done-but-fails", "verify fails", 2)]],
            cooldown="10m",
        )
        titles = sorted(a.message()["title"] for a in ep.arrived)  # two threads send
        # The gate at once; its repeat never; the second cause after the cooldown, alone.
        assert titles == ["herd: api claims-done-but-fails", "herd: api waiting-approval"]
        assert clock.now_s == START_S + 600, "the second waited out the cooldown"


def test_waiting_input_notifies_again_only_after_the_agent_worked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with endpoint() as ep:
        monkeypatch.setenv("HERD_TEST_NTFY", ep.url())
        waits = event("waiting-input", "a permission prompt", 1)
        works = event("working", "a prompt was given", 2)
        keeper_run(ep, Clock(), [[waits], [waits], [works], [waits]], cooldown="0s")
        titles = [a.message()["title"] for a in ep.arrived]
    assert titles == ["herd: api waiting-input"] * 2, "once per wait, not per repeat"


def test_quiet_hours_hold_messages_and_send_one_digest_when_they_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with endpoint() as ep:
        monkeypatch.setenv("HERD_TEST_NTFY", ep.url())
        clock = Clock(start_minute=23 * 60)  # inside 22:00-07:00
        keeper_run(
            ep,
            clock,
            [[event("waiting-approval", "plan-tampered", 1), event("failed", "crash-loop", 2)]],
            cooldown="0s",
            quiet_hours="22:00-07:00",
            public_url=PUBLIC,
        )
        [digest] = [a.message() for a in ep.arrived]
        assert digest["title"] == "herd: 2 notifications held"
        assert "api: waiting-approval: why: plan-tampered" in digest["message"]
        assert "api: failed: why: crash-loop" in digest["message"]
        assert digest["message"].endswith(f"{PUBLIC}/")
        assert clock.minute_of(clock.now_s) == 7 * 60, "sent as the quiet hours ended"


def test_a_gate_held_through_quiet_hours_links_an_approval_link_made_when_it_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with endpoint() as ep:
        monkeypatch.setenv("HERD_TEST_NTFY", ep.url())
        clock = Clock(start_minute=23 * 60)
        gate = [event("waiting-approval", "plan-tampered", 7)]
        keeper_run(ep, clock, [gate], cooldown="0s", quiet_hours="22:00-07:00", public_url=PUBLIC)
        [held] = ep.arrived
    found = re.search(r"/session/api/gate\?link=7\.(\d+)\.", held.message()["message"])
    assert found, held.message()
    assert int(found.group(1)) >= clock.now_s + 3000, "an hour from its sending, not its event"
    assert held.headers["x-click"].startswith(f"{PUBLIC}/session/api/gate?link=7.")


def test_a_message_that_cannot_go_is_an_event_that_never_shows_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with endpoint() as ep:
        monkeypatch.delenv("HERD_TEST_NTFY", raising=False)
        recorded = keeper_run(ep, Clock(), [[event("failed", "crash-loop", 1)]], cooldown="0s")
        assert ep.arrived == []
    [failed] = recorded
    assert failed.kind == "notification-failed" and failed.session is None
    assert (
        failed.message
        == "'herd: api failed' not sent: HERD_TEST_NTFY not set in the daemon's environment"
    )
    monkeypatch.setenv("HERD_TEST_NTFY", "ntfy://127.0.0.1:9/secret-topic")  # nothing listens
    [refused] = keeper_run(ep, Clock(), [[event("failed", "crash-loop", 1)]], cooldown="0s")
    assert "not sent" in refused.message and "secret-topic" not in refused.message


def gate_link(ep: Endpoint) -> str:
    [gate] = wait_until(lambda: about(ep, "waiting-approval"), 30, "the gate's message")
    found = re.search(rf"{PUBLIC}(/session/api/gate\?link=\S+)", gate["message"])
    assert found, gate["message"]
    return found.group(1)


@pytest.mark.pidns
def test_the_approval_link_opens_the_gate_page_and_answers_it_once(
    herd: Herd, monkeypatch: pytest.MonkeyPatch
) -> None:
    with endpoint() as ep:
        gated(herd)
        notifying(herd, ep, monkeypatch, cooldown="0s")
        herd.start().call("start", name="api")
        herd.wait_state("api", "waiting-approval", timeout_s=60)
        link = gate_link(ep)
        with herd_web(herd, "--allow-actions") as base, browser(base, origin=base) as web:
            page = web.get(link)
            assert page.status_code == 200, page.text
            assert "plan change: item 2 reworded" in page.text and "spend:" in page.text
            assert page.text.index("plan change") < page.text.index("<button")
            confirm = re.search(
                r'action="/session/api/approve".*?name="confirm" value="([^"]+)"', page.text
            )
            assert confirm
            token = link.partition("link=")[2]
            done = web.post(
                "/session/api/approve",
                data={"confirm": confirm.group(1), "link": token},
                headers={"user-agent": "phone-browser/1"},
            )
            assert done.status_code == 303, done.text
            herd.wait_state("api", "running", "completed")
            again = web.get(link)
            assert again.status_code == 403 and "used already" in again.text
    [approved] = herd.events("api", "plan-approved")
    assert approved["data"]["by"] == "herd web, through a notification's approval link"
    assert approved["data"]["origin"] == "127.0.0.1 (phone-browser/1)"


@pytest.mark.pidns
def test_an_expired_or_forged_approval_link_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    herd = Herd(tmp_path, dataclasses.replace(FAST, approval_link_s=0.0))
    try:
        with endpoint() as ep:
            gated(herd)
            notifying(herd, ep, monkeypatch, cooldown="0s")
            herd.start().call("start", name="api")
            herd.wait_state("api", "waiting-approval", timeout_s=60)
            link = gate_link(ep)
            with herd_web(herd, "--allow-actions") as base, browser(base, origin=base) as web:
                expired = web.get(link)
                assert expired.status_code == 403 and "expired" in expired.text
                seq, expires, _mac = link.partition("link=")[2].split(".")
                forged = web.get(f"/session/api/gate?link={seq}.{int(expires) + 3600}.{'0' * 64}")
                assert forged.status_code == 403 and "not one herd signed" in forged.text
            assert herd.status("api")["state"] == "waiting-approval"
    finally:
        herd.down()


def test_herd_check_refuses_a_url_written_where_a_variable_name_belongs(herd: Herd) -> None:
    herd.write("""
        [notifications]
        urls_env = ["ntfy://ntfy.sh/secret-topic"]

        [[session]]
        name = "api"
        command = ["true"]
    """)
    checked = herd.cli("check")
    assert checked.returncode == 2
    [line] = checked.stderr.strip().splitlines() or checked.stdout.strip().splitlines()
    assert line.startswith("herd.toml: notifications.urls_env") and "never URLs" in line, line


def test_herd_check_warns_of_a_variable_unset_where_it_runs(
    herd: Herd, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERD_TEST_NTFY", raising=False)
    herd.write("""
        [notifications]
        urls_env = ["HERD_TEST_NTFY"]

        [[session]]
        name = "api"
        command = ["true"]
    """)
    checked = herd.cli("check")
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.strip() == (
        "warning: herd.toml: notifications.urls_env: HERD_TEST_NTFY is not set here; export it "
        "(an Apprise URL, like ntfys://ntfy.sh/TOPIC) where the daemon starts"
    )
