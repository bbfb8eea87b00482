"""`waiting-input`: an interactive run's agent waits for a person, as its own hooks say.

At launch an interactive run gets a folder `agent/` in its run folder (under `.herd/`, never
the worktree, never the user's settings) holding the file its hooks append to, `signals`, and
for Claude Code the settings file passed by `--settings`. Each hook is `cat >> signals`: the
agent's JSON on stdin, one line, a fork of `sh` and `cat` (milliseconds; a `herd` subcommand
would start Python and need the daemon up, and the agent waits for its hooks). The fleet
watcher sees the file change and the session reads its new lines (sessions/agentsignals.py);
a new daemon reads it from the start, so the state survives the daemon.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path

from agentherd.sessions.agentsignals import (
    PROMPTS,
    TERMINAL,
    TURN_ENDS,
    WAITS,
    WORKS,
    Signal,
    read_signals,
)
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.states import State
from agentherd.supervisor.files import private
from agentherd.supervisor.session import agenthomes
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.stallkeep import StallWatch

SIGNALS_FOLDER = "agent"
SIGNALS_FILE = "signals"
SIGNALS_VAR = "HERD_SIGNALS"
"""The environment variable naming the signals file: a custom command may append to it (an
interactive run's terminal holder does, for what the agent's terminal reports). ptyholder's,
repeated: the holder's module is imported for interactive runs alone (test_waiting_input.py)."""

CLAUDE_HOOKS = (
    "Stop",
    "PermissionRequest",
    "Notification",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
)
"""Claude Code's hook events herd listens to (docs/agents-interactive.md says what each is)."""

READ_MAX_BYTES = 1 << 20
"""At most this much of the signals file is read at once (a newer line wins anyway)."""


def signals_path(run_folder: Path) -> Path:
    """The file an interactive run's hooks append to."""
    return run_folder / SIGNALS_FOLDER / SIGNALS_FILE


def hook_command(signals: Path) -> str:
    """A hook that appends the agent's JSON (stdin) to `signals` as one line."""
    quoted = shlex.quote(str(signals))
    return f"cat >> {quoted}; echo >> {quoted}"


def prepare(
    run_folder: Path, config: SessionConfig, run_env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """Write an interactive run's hooks; (argv to append, environment to add). Claude Code
    takes them by `--settings`; Codex and Gemini CLI from a home of the run's own
    (supervisor/session/agenthomes.py), found from `run_env`."""
    folder = private.make_folder(run_folder / SIGNALS_FOLDER)
    signals = folder / SIGNALS_FILE
    env = {SIGNALS_VAR: str(signals)}
    if config.agent == "codex":
        return [], {**env, **agenthomes.codex(folder, run_env, hook_command(signals))}
    if config.agent == "gemini":
        return [], {**env, **agenthomes.gemini(folder, run_env, hook_command(signals))}
    if config.agent != "claude":
        return [], env
    hook = {"hooks": [{"type": "command", "command": hook_command(signals)}]}
    settings = folder / "claude-settings.json"
    settings.write_text(json.dumps({"hooks": {event: [hook] for event in CLAUDE_HOOKS}}))
    return ["--settings", str(settings)], env


class InputWait:
    """Moves a session between running and waiting-input as its run's signals say."""

    def __init__(self, pen: Pen, run: Callable[[], LiveRun | None], stall: StallWatch) -> None:
        self.pen = pen
        self.record = pen.record
        self.run = run
        self.stall = stall
        self.entered = 0
        """How often this daemon saw the session enter waiting-input (`send --wait` counts)."""
        self._read_run = 0
        self._offset = 0
        self._rest = b""
        self._asking: tuple[str | None] | None = None
        """Whose dialog (a permission prompt, a question) the session waits at: (None,) the
        main thread's, (agent_id,) a subagent's, (TERMINAL,) the terminal's report; None
        when it waits at a turn's end (or this daemon did not see it begin)."""

    async def read(self) -> None:
        """Read the run's new signals and take the moves they ask for, in order."""
        live = self.run()
        if live is None or not live.config.interactive or live.exited.is_set():
            return
        first = live.record.run != self._read_run
        if first:
            self._read_run, self._offset, self._rest = live.record.run, 0, b""
        signals = self._new_signals(signals_path(live.tailer.path.parent))
        if first:
            # The run's history (a new daemon reads it all): only where it stands now counts.
            signals = signals[-1:]
        if not signals:
            return
        async with self.pen.lock:
            for signal in signals:
                if self.run() is live and not live.exited.is_set():
                    self._learn(signal.session_id, live)
                    self._apply(signal, live.record.run)

    def _learn(self, session_id: str | None, live: LiveRun) -> None:
        """Keep the conversation id the agent's hook named: committed at once (a crash is when
        a resume needs it), and the readers of the agent's own files find its spend by it."""
        if session_id is None or session_id == live.parser.reported_session_id:
            return
        live.parser.learn_session_id(session_id)  # a resumed run's check compares it
        if live.parser.session_id != session_id:
            return  # refused: not a safe id (the parser warned)
        if session_id != live.record.agent_session_id:  # a resumed run has it already
            self.record.agent_session_id = live.record.agent_session_id = session_id
            self.pen.commit(run=live.record)

    def _new_signals(self, path: Path) -> list[Signal]:
        """The signals among the whole lines written since the last read, oldest first."""
        try:
            with path.open("rb") as file:
                file.seek(self._offset)
                data = file.read(READ_MAX_BYTES)
        except OSError:
            return []
        self._offset += len(data)
        data = self._rest + data
        whole, _, self._rest = data.rpartition(b"\n")
        return read_signals(whole.decode("utf-8", "replace"))

    def _apply(self, signal: Signal, run: int) -> None:
        """Enter or leave waiting-input (a move the state does not allow is no move)."""
        state = self.record.state
        if signal.verdict == WAITS and state == State.RUNNING:
            self.stall.pause()
            self.entered += 1
            self._asking = None if signal.event in TURN_ENDS else (signal.agent,)
            message = f"{signal.why}: the agent waits for a person ({signal.event})"
            event = self.pen.event("waiting-input", message, run, signal=signal.event)
            self.pen.transition(State.WAITING_INPUT, None, event, by=Trigger.AGENT_WAITS)
        elif signal.verdict == WAITS and signal.event in TURN_ENDS:
            self._asking = None  # the turn ended, and its dialogs with it
        elif signal.verdict == WORKS and state == State.WAITING_INPUT and self._answered(signal):
            self.stall.resume()
            message = f"the agent works again: {signal.why} ({signal.event})"
            event = self.pen.event("working", message, run, signal=signal.event)
            self.pen.transition(State.RUNNING, None, event, by=Trigger.AGENT_WORKS)

    def _answered(self, signal: Signal) -> bool:
        """Whether a works signal ends the wait. A dialog is answered when its own thread
        works again, the terminal says the interface works, or the main thread is given a
        prompt; another thread's work goes on beside an open dialog (a main thread's hook
        that fired as its subagent asked, or another subagent's) and ends nothing."""
        if self._asking is None or signal.agent == TERMINAL:
            return True
        if signal.agent is None and signal.event in PROMPTS:
            return True
        return self._asking == (signal.agent,)
