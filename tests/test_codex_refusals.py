"""A Codex command the sandbox refused is found in the thread's rollout, and nothing else is.

The fixtures are what codex-cli 0.171.0 wrote, run offline against tests/model_servers.py
(see fixtures/agents/README.md): one thread under ``--sandbox workspace-write`` (a refused
commit, a failing test, a rejected escalation; then, resumed, only ordinary failures) and one
under ``danger-full-access`` (failures whose output reads like a refusal).
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from agentherd.sessions.adapters import CodexParser
from agentherd.sessions.adapters.codex_refusals import (
    RunRefusals,
    SandboxPolicy,
    policy_of,
    refused_command,
)
from agentherd.sessions.adapters.codex_rollout import read_run_refusals, rollout_paths
from agentherd.sessions.times import parse_iso

REAL = Path(__file__).parent / "fixtures" / "agents" / "real"
SANDBOX_ROLLOUT = REAL / "codex-sandbox-rollout.jsonl"
FULL_ACCESS_ROLLOUT = REAL / "codex-full-access-rollout.jsonl"
SANDBOX_THREAD = "01a23528-1cc6-7e61-9e06-8a83ef3f36dd"
REPO = "/tmp/i10-codex-refusal/fx/ws/repo"
"""The worktree the sandboxed thread ran in (its profile names it)."""


def at(text: str) -> datetime:
    moment = parse_iso(text)
    assert moment is not None
    return moment


REFUSED_RUN_STARTED = at("2026-12-02T05:09:10.718Z")
ORDINARY_RUN_STARTED = at("2026-12-02T05:09:16.447Z")
"""When herd would have started the resumed run (the same thread, appended to its rollout)."""
FULL_ACCESS_RUN_STARTED = at("2026-12-02T05:09:18.596Z")


def stdout_parser(name: str) -> CodexParser:
    """A Codex parser after a captured stdout."""
    parser = CodexParser()
    for raw in (REAL / name).read_bytes().splitlines():
        parser.feed_line(raw)
    return parser


def sandbox() -> SandboxPolicy:
    """The workspace-write profile of the captured thread, as its turn_context gave it."""
    refusals = RunRefusals(REFUSED_RUN_STARTED)
    for line in SANDBOX_ROLLOUT.read_text().splitlines():
        refusals.take(json.loads(line))
    assert refusals.policy is not None
    return refusals.policy


def test_a_refused_commit_stdout_never_printed_is_read_from_the_rollout() -> None:
    parser = stdout_parser("codex-sandbox-refused.jsonl")
    # Codex printed no item for the commit (nor for the escalation it rejected): from stdout
    # alone the run looks done.
    assert parser.outcome is not None and parser.outcome.kind == "success"
    refused = read_run_refusals([SANDBOX_ROLLOUT], REFUSED_RUN_STARTED)
    # The commit hit the read-only .git; the escalated `touch` was rejected unrun. The failing
    # test between them (exit 1) is not a refusal.
    assert refused == ["git", "touch"]
    assert parser.take_rollout_refusals(refused)
    assert parser.outcome.kind == "permission-denied"
    assert parser.outcome.permission_denials == ("git", "touch")
    assert parser.outcome.message == "I could not commit."


def test_ordinary_failures_in_a_sandboxed_run_are_not_refusals() -> None:
    # The resumed run of the same thread: a failing test, an EROFS error a test raised about a
    # file in the worktree, a "Permission denied" inside the worktree.
    parser = stdout_parser("codex-sandbox-ordinary-failures.jsonl")
    # Stdout's guess (any failed command whose output says "Read-only file system") is wrong.
    assert parser.outcome is not None and parser.outcome.kind == "permission-denied"
    refused = read_run_refusals([SANDBOX_ROLLOUT], ORDINARY_RUN_STARTED)
    assert refused == []  # and the earlier run's refused commit, in the same file, is not its
    assert parser.take_rollout_refusals(refused)
    assert parser.outcome.kind == "success"
    assert parser.outcome.permission_denials == ()


def test_without_a_sandbox_nothing_is_a_refusal() -> None:
    parser = stdout_parser("codex-full-access-failures.jsonl")
    assert parser.outcome is not None and parser.outcome.kind == "permission-denied"
    refused = read_run_refusals([FULL_ACCESS_ROLLOUT], FULL_ACCESS_RUN_STARTED)
    assert refused == []  # danger-full-access: profile "disabled"
    assert parser.take_rollout_refusals(refused)
    assert parser.outcome.kind == "success"


def test_an_unknown_sandbox_leaves_stdouts_reading() -> None:
    parser = stdout_parser("codex-sandbox-ordinary-failures.jsonl")
    # After the last line: no turn of this run is in the file (it never began its turn).
    assert read_run_refusals([SANDBOX_ROLLOUT], at("2026-12-02T06:00:00Z")) is None
    assert read_run_refusals([], REFUSED_RUN_STARTED) is None
    assert not parser.take_rollout_refusals(None)
    assert parser.outcome is not None and parser.outcome.kind == "permission-denied"
    assert policy_of({"cwd": REPO, "permission_profile": {"type": "external"}}) is None
    assert policy_of({"cwd": "relative", "permission_profile": {"type": "disabled"}}) is None


def test_commands_codex_declined_on_stdout_stay_refused() -> None:
    parser = stdout_parser("codex-sandbox-ordinary-failures.jsonl")
    item = {"id": "x", "type": "command_execution", "command": "rm -rf /", "status": "declined"}
    parser._on_item(item)
    assert parser.take_rollout_refusals([])
    assert parser.outcome is not None and parser.outcome.permission_denials == ("rm",)


def test_the_rollout_is_found_under_codex_home(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "2026" / "12" / "02"
    folder.mkdir(parents=True)
    shutil.copy(SANDBOX_ROLLOUT, folder / f"rollout-2026-12-02T05-09-10-{SANDBOX_THREAD}.jsonl")
    paths = rollout_paths(tmp_path, SANDBOX_THREAD)
    assert read_run_refusals(paths, REFUSED_RUN_STARTED) == ["git", "touch"]


def output(code: int, text: str) -> str:
    """A function_call_output as codex-cli 0.171.0 writes one for a command that ran."""
    return (
        f"Chunk ID: 0a1b2c\nWall time: 0.0000 seconds\nProcess exited with code {code}\n"
        f"Original token count: 9\nOutput:\n{text}"
    )


@pytest.mark.parametrize(
    ("arguments", "text", "name"),
    [
        ({"cmd": "touch x", "workdir": ".git"}, "touch: cannot touch 'x': Read-only ...", None),
        (
            {"cmd": "touch x", "workdir": ".git"},
            "touch: cannot touch 'x': Read-only file system",
            "touch",
        ),
        ({"cmd": "echo x > .git/y"}, "/bin/bash: line 1: .git/y: Read-only file system", "echo"),
        ({"cmd": "touch /usr/x"}, "touch: cannot touch '/usr/x': Read-only file system", "touch"),
        ({"cmd": "npm i"}, "EROFS: read-only file system, open '/usr/lib/node/x'", "npm"),
        (
            {"cmd": "git gc"},
            "error: could not lock config file .git/config: Read-only file system",
            "git",
        ),
        # Writable places: the worktree, /tmp (an EROFS there is no doing of the sandbox).
        ({"cmd": "make"}, "OSError: [Errno 30] Read-only file system: 'build/out'", None),
        ({"cmd": "make"}, "cp: cannot create regular file '/tmp/x': Read-only file system", None),
        ({"cmd": "pytest"}, "FAILED tests/test_x.py::test_add - assert 1 == 2", None),
        ({"cmd": "cat /etc/shadow"}, "cat: /etc/shadow: Permission denied", None),
        ({"cmd": "curl x"}, "curl: (7) socket: Operation not permitted", None),
        # EPERM (macOS's sandbox): only on what the profile carves out of the worktree.
        (
            {"cmd": "git commit"},
            "fatal: Unable to create '.git/index.lock': Operation not permitted",
            "git",
        ),
        ({"cmd": "kill 1"}, "bash: kill: (1) - Operation not permitted", None),
        (
            {"cmd": "chown"},
            "chown: changing ownership of '/usr/bin/x': Operation not permitted",
            None,
        ),
        ({"cmd": "chmod"}, "chmod: changing permissions of 'src/x': Operation not permitted", None),
        ({"cmd": "echo"}, "~/.cache/x: Read-only file system", None),
    ],
)
def test_what_counts_as_a_sandbox_refusal(
    arguments: dict[str, str], text: str, name: str | None
) -> None:
    policy = sandbox()
    assert refused_command(arguments, output(1, text), policy) == name
    # The same words from a command that succeeded, or with no sandbox, are no refusal.
    assert refused_command(arguments, output(0, text), policy) is None
    assert refused_command(arguments, output(1, text), SandboxPolicy(False, REPO)) is None


def test_only_codex_itself_can_say_it_rejected_a_command() -> None:
    policy = sandbox()
    rejected = "approval policy is Never; reject command — you cannot ask for escalated permissions"
    assert refused_command({"cmd": "git push"}, rejected, policy) == "git"
    # A command's output comes after Codex's header: printing the words is not a rejection.
    assert refused_command({"cmd": "cat notes"}, output(1, rejected), policy) is None


def test_the_profile_carves_git_out_of_the_worktree() -> None:
    policy = sandbox()
    assert policy.sandboxed and policy.cwd == REPO
    assert policy.writable(f"{REPO}/src/app.py")
    assert policy.writable("/tmp/scratch")
    assert not policy.writable(f"{REPO}/.git/index.lock")
    assert policy.writable(f"{REPO}/.gitignore")  # a sibling, not inside .git
    assert not policy.writable("/usr/local/bin/x")
    assert policy.carved_out(f"{REPO}/.git/index.lock") and policy.carved_out(f"{REPO}/.git")
    assert not policy.carved_out("/usr/local/bin/x")  # read-only, but not inside a writable root
    assert not policy.carved_out(f"{REPO}/src/app.py")


def test_odd_rollout_entries_are_skipped_never_raised(tmp_path: Path) -> None:
    context = json.loads(
        next(line for line in SANDBOX_ROLLOUT.read_text().splitlines() if "turn_context" in line)
    )
    stamp = "2026-12-02T05:09:11.500Z"
    odd: list[object] = [
        None,
        [],
        {"timestamp": 5, "type": "turn_context", "payload": {}},
        {"timestamp": "not a time", "type": "turn_context", "payload": {}},
        {"timestamp": stamp, "type": "response_item", "payload": "x"},
        {"timestamp": stamp, "type": "response_item", "payload": {"type": "function_call"}},
        {
            "timestamp": stamp,
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "exec_command",
                "call_id": "a",
                "arguments": "[1, 2]",
            },
        },
        {
            "timestamp": stamp,
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "a", "output": {"x": 1}},
        },
        {
            "timestamp": stamp,
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": 7, "output": "approval"},
        },
    ]
    refusals = RunRefusals(REFUSED_RUN_STARTED)
    refusals.take(context)
    for entry in odd:
        refusals.take(entry)
    assert refusals.verdict == []
    # The same in a file: a line that is not JSON, and a 2 MB line, are skipped unread.
    rollout = tmp_path / "rollout.jsonl"
    lines = [json.dumps(context), '{"type": "function_call", oops', "x" * 2_000_000]
    rollout.write_text("\n".join([*lines, *(json.dumps(entry) for entry in odd)]) + "\n")
    assert read_run_refusals([rollout, tmp_path / "missing.jsonl"], REFUSED_RUN_STARTED) == []
    bad = dict(context, payload=dict(context["payload"], permission_profile={"type": "managed"}))
    assert RunRefusals(REFUSED_RUN_STARTED).verdict is None
    refusals = RunRefusals(REFUSED_RUN_STARTED)
    refusals.take(bad)
    assert refusals.verdict is None  # a profile not understood: stdout's reading stands


@pytest.mark.parametrize(
    ("command", "text", "name"),
    [
        # The refused part of a compound command, not its first word.
        (
            "echo 'saving' && git commit -qm 'agent: save'",
            f"fatal: Unable to create '{REPO}/.git/index.lock': Read-only file system",
            "git",
        ),
        ("ls; echo x > .git/y", "/bin/bash: line 1: .git/y: Read-only file system", "echo"),
        ("echo go && touch .git/x", "touch: cannot touch '.git/x': Read-only file system", "touch"),
        (
            "bash -lc 'echo hi && git add -A && git commit -m x'",
            "fatal: Unable to create '.git/index.lock': Read-only file system",
            "git",
        ),
    ],
)
def test_a_refused_compound_command_is_named_by_its_refused_part(
    command: str, text: str, name: str
) -> None:
    assert refused_command({"cmd": command}, output(128, text), sandbox()) == name


def test_a_rejected_compound_command_is_named_by_what_needed_the_escalation() -> None:
    rejected = "approval policy is Never; reject command — you cannot ask for escalated permissions"
    assert refused_command({"cmd": "echo pushing && git push"}, rejected, sandbox()) == "git"
