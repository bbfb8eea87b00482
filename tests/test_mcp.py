"""`herd mcp` driven by the MCP SDK's own client over stdio, against a real daemon."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import psutil
import pytest
from conftest import HERD, SIMAGENT, Herd, script, sim_repo, wait_until
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

T = TypeVar("T")

TOOLS = {
    "herd_list",
    "herd_status",
    "herd_start",
    "herd_wait",
    "herd_events",
    "herd_logs",
    "herd_report",
    "herd_stop",
    "herd_restart",
    "herd_send",
}
SLEEPER = script("import time\nprint('working', flush=True)\ntime.sleep(120)")


def over_mcp(
    herd: Herd,
    talk: Callable[[Client], Awaitable[T]],
    *options: str,
    env: dict[str, str] | None = None,
) -> T:
    """Run `herd mcp` in the herd's folder and talk to it with the SDK's stdio client."""
    params = StdioServerParameters(
        command=HERD,
        args=["-c", str(herd.config_path), "mcp", *options],
        cwd=str(herd.root),
        env=env,
    )

    async def main() -> T:
        async with Client(params) as client:
            return await talk(client)

    return anyio.run(main)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool error (the call must fail as a tool error, not a crash)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(part, "text", "") for part in result.content)


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def worker_fleet(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=2)
    herd.write(
        f"""
        [[session]]
        name = "worker"
        cwd = "{repo}"
        command = {json.dumps([*SIMAGENT, "--delay", "0"])}
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"

        [[session]]
        name = "sleeper"
        command = {SLEEPER}
        restart = "never"
        """
    )


def test_an_orchestrator_starts_a_worker_waits_and_reads_its_report(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()

    async def talk(client: Client) -> dict[str, Any]:
        listed = (await client.list_tools()).tools
        seen: dict[str, Any] = {"tools": {t.name: t for t in listed}}
        seen["list"] = await call(client, "herd_list")
        seen["start"] = await call(client, "herd_start", session="worker")
        handle = seen["start"]["handle"]
        seen["wait"] = await call(client, "herd_wait", target=handle, timeout_s=40)
        seen["status"] = await call(client, "herd_status", target=handle.split("/")[0])
        seen["events"] = await call(client, "herd_events", since=0, limit=1000)
        seen["logs"] = await call(client, "herd_logs", session="worker", lines=5)
        seen["report"] = await call(client, "herd_report", session="worker")
        for what in ("plan", "progress", "checkpoints", "spend"):
            read = await client.read_resource(f"herd://sessions/worker/{what}")
            seen[what] = json.loads(read.contents[0].text)  # type: ignore[union-attr]
        seen["restart"] = await call(client, "herd_restart", session="sleeper")
        seen["stop"] = await call(client, "herd_stop", session="sleeper")
        return seen

    seen = over_mcp(herd, talk)
    tools = seen["tools"]
    assert set(tools) == TOOLS  # no approve, reject or send
    for name, tool in tools.items():
        assert tool.output_schema, name
        destructive = name in ("herd_stop", "herd_restart")
        assert bool(tool.annotations.destructive_hint) is destructive, name
    assert {s["session"] for s in seen["list"]["sessions"]} == {"worker", "sleeper"}
    assert (seen["start"]["handle"], seen["start"]["task_state"]) == ("worker/1", "working")
    waited = seen["wait"]
    assert (waited["state"], waited["ended"], waited["timed_out"]) == ("completed", True, False)
    assert waited["task_state"] == "completed"
    assert seen["status"]["brief"]["plan_passing"] == 2
    assert seen["status"]["status"]["session"] == "worker"
    kinds = [e["kind"] for e in seen["events"]["events"]]
    assert "task-started" in kinds and "completed" in kinds
    assert seen["events"]["next_since"] == seen["events"]["events"][-1]["seq"]
    assert seen["logs"]["lines"] and seen["logs"]["run"] == 1
    assert "worker" in seen["report"]["markdown"]
    assert seen["plan"]["passing"] == 2 and seen["plan"]["items_failing"] == []
    assert len(seen["checkpoints"]["checkpoints"]) >= 2
    assert seen["progress"]["latest"] and "usage" in seen["spend"]
    assert seen["restart"]["handle"].startswith("sleeper/")
    assert seen["stop"]["state"] == "stopped" and seen["stop"]["task_state"] == "cancelled"
    # Every call is in herd's event log, with who asked, as the daemon saw it.
    calls = herd.events(kind="mcp-call")
    tools_called = [e["data"]["tool"] for e in calls]
    assert tools_called[:3] == ["herd_list", "herd_start", "herd_wait"]
    assert "resource:plan" in tools_called and tools_called[-1] == "herd_stop"
    assert {e["data"]["origin"] for e in calls} == {"person"}
    start = calls[1]
    assert start["session"] == "worker" and start["data"]["arguments"] == {"session": "worker"}


def test_bad_arguments_and_unknown_sessions_are_tool_errors(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()

    async def talk(client: Client) -> list[str]:
        said = [
            await refused(client, "herd_start", session="nope"),
            await refused(client, "herd_wait", target="sleeper", timeout_s=99),
            await refused(client, "herd_wait", target="worker/1", until=["asleep"]),
            await refused(client, "herd_wait", target="worker/7", timeout_s=1),
            await refused(client, "herd_logs", session="worker", lines=0),
            await refused(client, "herd_status"),
        ]
        await call(client, "herd_start", session="worker")
        said.append(await refused(client, "herd_status", target="worker/9"))
        with pytest.raises(MCPError) as unreadable:
            await client.read_resource("herd://sessions/nope/plan")
        said.append(str(unreadable.value))
        listed = await call(client, "herd_list")  # the server goes on answering
        assert len(listed["sessions"]) == 2
        return said

    said = over_mcp(herd, talk)
    assert "no session named 'nope'" in said[0], said[0]
    assert "timeout_s" in said[1] and "50" in said[1], said[1]
    assert "until" in said[2] and "asleep" in said[2], said[2]
    assert "never been started" in said[3] or "worker/7" in said[3], said[3]
    assert "lines" in said[4], said[4]
    assert "target" in said[5], said[5]
    assert "no task 'worker/9'" in said[6], said[6]
    assert "no session named 'nope'" in said[7], said[7]


def test_a_wait_that_times_out_returns_the_current_state(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()

    async def talk(client: Client) -> list[dict[str, Any]]:
        handle = (await call(client, "herd_start", session="sleeper"))["handle"]
        running = await call(client, "herd_wait", target=handle, until=["running"], timeout_s=20)
        timed_out = await call(client, "herd_wait", target=handle, timeout_s=0.3)
        await call(client, "herd_stop", session="sleeper")
        ended = await call(client, "herd_wait", target=handle, timeout_s=5)
        return [running, timed_out, ended]

    running, timed_out, ended = over_mcp(herd, talk)
    assert (running["state"], running["timed_out"], running["ended"]) == ("running", False, False)
    assert (timed_out["state"], timed_out["timed_out"]) == ("running", True)
    assert timed_out["task_state"] == "working"
    assert (ended["state"], ended["task_state"], ended["ended"]) == ("stopped", "cancelled", True)


def test_logs_reach_the_model_readable_with_no_control_bytes(herd: Herd) -> None:
    noisy = script(
        r"""
        import sys
        sys.stdout.write('\x1b]0;evil title\x07\x1b[31mred\x1b[0m text\r\n')
        sys.stdout.write('bell\x07 and \x1b[2J clear\n')
        sys.stdout.write('x' * 10000 + '\n')
        """
    )
    herd.write(
        f"""
        [[session]]
        name = "noisy"
        command = {noisy}
        restart = "never"
        """
    )
    herd.start()

    async def talk(client: Client) -> dict[str, Any]:
        handle = (await call(client, "herd_start", session="noisy"))["handle"]
        await call(client, "herd_wait", target=handle, timeout_s=20)
        return await call(client, "herd_logs", session="noisy", lines=10)

    logs = over_mcp(herd, talk)
    text = "\n".join(logs["lines"])
    assert "red text" in text and "clear" in text, text
    assert not [c for c in text if ord(c) < 0x20 and c != "\n" or ord(c) == 0x7F], text
    assert max(len(line) for line in logs["lines"]) <= 2000


@pytest.mark.pidns
def test_a_daemon_killed_during_a_wait_is_a_tool_error_and_the_handle_survives(
    tmp_path: Path,
) -> None:
    herd = Herd(tmp_path)
    herd.write(
        f"""
        [[session]]
        name = "sleeper"
        command = {SLEEPER}
        restart = "never"
        """
    )
    config = str(herd.config_path)

    def daemon_pid() -> int:
        from agentherd.sessions.config import load_config
        from agentherd.supervisor.api.launcher import client_for

        return int(client_for(load_config(herd.config_path)).call("info")["pid"])

    def daemon_events() -> list[dict[str, Any]]:
        from agentherd.sessions.config import load_config
        from agentherd.supervisor.api.launcher import client_for

        client = client_for(load_config(herd.config_path))
        return client.call("events", kinds=["mcp-call"])  # type: ignore[no-any-return]

    async def talk(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        handle = (await call(client, "herd_start", session="sleeper"))["handle"]
        pid = daemon_pid()
        daemon = psutil.Process(pid)
        assert "agentherd.supervisor.main" in " ".join(daemon.cmdline())
        assert config in daemon.cmdline()  # ours: started by this server for this herd.toml
        before = len(daemon.net_connections(kind="unix"))
        asked: list[bool] = []

        def wait_is_in() -> bool:
            """The wait was recorded and its connection is open (seen twice: not the record's)."""
            waits = [e for e in daemon_events() if e["data"]["tool"] == "herd_wait"]
            asked.append(bool(waits) and len(daemon.net_connections(kind="unix")) > before)
            return asked[-2:] == [True, True]

        async def kill_during_the_wait() -> None:
            await anyio.to_thread.run_sync(lambda: wait_until(wait_is_in, what="the wait"))
            os.kill(pid, signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_during_the_wait)
            seen["during"] = await refused(client, "herd_wait", target=handle, timeout_s=40)
        # Gone, or a zombie of the MCP server that started it (reaped at its next start).
        await anyio.to_thread.run_sync(lambda: wait_until(lambda: gone(daemon), what="the kill"))
        # --start-daemon: the next call starts a daemon again, which adopts the running task.
        seen["after"] = await call(client, "herd_wait", target=handle, timeout_s=0.5)
        seen["stop"] = await call(client, "herd_stop", session="sleeper")
        return seen

    try:
        seen = over_mcp(herd, talk, "--start-daemon")
    finally:
        done = herd.cli("down")
        assert done.returncode in (0, 2), done.stderr
    assert "went away" in seen["during"] and "herd up" in seen["during"], seen["during"]
    after = seen["after"]
    assert (after["handle"], after["state"], after["timed_out"]) == ("sleeper/1", "running", True)
    assert seen["stop"]["state"] == "stopped"


def test_an_mcp_server_inside_a_session_acts_with_that_sessions_rights(herd: Herd) -> None:
    out = herd.root / "orchestrator.json"
    orchestrator = f"""
        import json, anyio
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        async def main():
            params = StdioServerParameters(command={HERD!r}, args=["mcp"])
            seen = {{}}
            async with Client(params) as client:
                for name in ("mine", "other"):
                    result = await client.call_tool("herd_start", {{"session": name}})
                    seen[name] = [result.is_error, [getattr(p, "text", "") for p in result.content]]
                listed = await client.call_tool("herd_list", {{}})
                seen["list"] = [s["session"] for s in listed.structured_content["sessions"]]
            open({str(out)!r}, "w").write(json.dumps(seen))

        anyio.run(main)
        """
    herd.write(
        f"""
        [[session]]
        name = "orch"
        command = {script(orchestrator)}
        restart = "never"
        manages = ["mine"]

        [[session]]
        name = "mine"
        cwd = "mine"
        command = {script("print('done')")}
        restart = "never"

        [[session]]
        name = "other"
        cwd = "other"
        command = {script("print('done')")}
        restart = "never"
        """
    )
    for folder in ("mine", "other"):  # sessions sharing a folder would wait on each other
        (herd.root / folder).mkdir()
    herd.start().call("start", name="orch")
    herd.wait_state("orch", "completed", "failed", timeout_s=60)
    log = herd.root / ".herd" / "runs" / "orch" / "1" / "output.log"
    assert out.exists(), log.read_text()
    seen = json.loads(out.read_text())
    assert seen["mine"][0] is False, seen
    assert seen["other"][0] is True and "not for a request from inside session 'orch'" in str(
        seen["other"][1]
    ), seen
    assert sorted(seen["list"]) == ["mine", "orch"]
    calls = herd.events(kind="mcp-call")
    assert {e["data"]["origin"] for e in calls} == {"inside session 'orch'"}
    refused_start = next(e for e in calls if e["data"]["arguments"] == {"session": "other"})
    assert refused_start["session"] is None  # recorded, but not in a session it may not see


def test_herd_mcp_with_a_bad_herd_toml_is_one_line_and_exit_2(herd: Herd) -> None:
    herd.write('[[session]]\nname = "a"\ncommand = ["true"]\nbogus = 1\n')
    done = herd.cli("mcp")
    assert done.returncode == 2, done
    assert "bogus" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""  # nothing an MCP client could take for a message


def test_with_no_daemon_a_call_is_a_tool_error_that_names_herd_up(herd: Herd) -> None:
    worker_fleet(herd)

    async def talk(client: Client) -> str:
        return await refused(client, "herd_list")

    said = over_mcp(herd, talk)
    assert "no herd daemon is running" in said and "herd up" in said, said
    # Inside a session (its run's tag in the environment) --start-daemon starts none either:
    # a daemon started there would live in the run's process tree.
    inside = over_mcp(herd, talk, "--start-daemon", env={"HERD_RUN_TAG": "0" * 32})
    assert "inside a herd session" in inside and "herd up" in inside, inside
    assert not (herd.root / ".herd" / "state.db").exists()  # it started none


def reference_tools() -> dict[str, dict[str, set[str]]]:
    """Each tool in docs/reference.md ("MCP tools"): its input and output table's names."""
    text = (Path(__file__).parent.parent / "docs" / "reference.md").read_text()
    section = text.split("\n## MCP tools\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, dict[str, set[str]]] = {}
    for heading in section.split("\n### ")[1:]:
        if not heading.startswith("`"):
            continue  # Resources
        name, block = heading[1:].split("`", 1)
        tables: dict[str, set[str]] = {"input": set(), "output": set()}
        current = ""
        for line in block.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if line.startswith("| `") and current in tables:
                tables[current].add(cells[0].strip("`"))
            elif line.startswith("| input") or line.startswith("| output"):
                current = cells[0]
        found[name] = tables
    return found


def test_the_reference_lists_every_tool_with_its_input_and_output_fields(tmp_path: Path) -> None:
    from agentherd.sessions.config import load_config
    from agentherd.tui.mcp.server import build

    (tmp_path / "herd.toml").write_text('[[session]]\nname = "a"\ncommand = ["true"]\n')
    server = build(load_config(tmp_path / "herd.toml"), start_daemon=False)
    listed = anyio.run(server.list_tools)
    documented = reference_tools()
    assert set(documented) == {t.name for t in listed} == TOOLS
    for tool in listed:
        assert documented[tool.name]["input"] == set(tool.input_schema["properties"]), tool.name
        assert tool.output_schema is not None
        assert documented[tool.name]["output"] == set(tool.output_schema["properties"]), tool.name


def test_the_daemon_refuses_a_wait_until_a_state_herd_does_not_have(herd: Herd) -> None:
    from agentherd.supervisor.api.protocol import ApiError

    worker_fleet(herd)
    client = herd.start()
    client.call("start", name="sleeper")
    with pytest.raises(ApiError) as refused_wait:
        client.call("wait", target="sleeper", until=["asleep"], timeout_s=1)
    assert refused_wait.value.code == "bad-request"
    assert "'asleep' is not a state" in refused_wait.value.message


def test_an_orchestrator_starts_a_chain_and_waits_on_its_last_handle(herd: Herd) -> None:
    from test_chain import chain_toml, order

    herd.write(chain_toml(herd, gate_a=False))
    herd.start()

    async def talk(client: Client) -> list[dict[str, Any]]:
        started = [await call(client, "herd_start", session=name) for name in "abc"]
        last = started[-1]["handle"]
        return [*started, await call(client, "herd_wait", target=last, timeout_s=40)]

    *started, waited = over_mcp(herd, talk)
    assert [s["handle"] for s in started] == ["a/1", "b/1", "c/1"]
    assert {s["task_state"] for s in started} == {"working"}
    assert (waited["handle"], waited["state"], waited["ended"]) == ("c/1", "completed", True)
    assert order(herd) == ["a", "b", "c"]


def test_a_wait_until_waiting_approval_reads_input_required_and_a_person_answers(
    herd: Herd,
) -> None:
    from test_agent_trust import gated

    herd.write(gated(herd))
    herd.start()

    async def talk(client: Client) -> dict[str, Any]:
        handle = (await call(client, "herd_start", session="gated"))["handle"]
        until = ["waiting-approval"]
        return await call(client, "herd_wait", target=handle, until=until, timeout_s=40)

    held = over_mcp(herd, talk)
    assert (held["state"], held["task_state"]) == ("waiting-approval", "input_required"), held
    assert (held["ended"], held["timed_out"]) == (False, False)
    assert held["reason"] == "plan-tampered", held
    # The tools offer no answer to it: a person gives it.
    answered = herd.cli("reject", "gated")
    assert answered.returncode == 0, answered.stderr
    herd.client.call("stop", name="gated")


def test_herd_send_gives_an_ended_session_its_next_prompt_and_records_only_its_length(
    herd: Herd, tmp_path: Path
) -> None:
    from test_send import block, prompt_of

    herd.write(block(sim_repo(tmp_path / "repo")))
    herd.start().call("start", name="main")
    herd.wait_state("main", "completed", "failed")
    words = "Now write the docs, please."

    async def talk(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        sent = await call(client, "herd_send", session="main", text=words)
        return sent, await call(client, "herd_wait", target=sent["handle"], timeout_s=40)

    sent, waited = over_mcp(herd, talk)
    assert (sent["outcome"], sent["handle"], sent["run"]) == ("started", "main/2", 2), sent
    assert waited["ended"] and waited["handle"] == "main/2", waited
    assert prompt_of(herd, 2) == words
    (queued,) = herd.events("main", "message-queued")
    assert queued["data"]["origin"] == "person"
    (recorded,) = [e for e in herd.events("main", "mcp-call") if e["data"]["tool"] == "herd_send"]
    assert recorded["data"]["arguments"] == {"session": "main", "chars": len(words)}
    assert words not in json.dumps(herd.events(kind="mcp-call"))
