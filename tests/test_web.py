"""`herd web` as a person uses it: a real daemon, a real `herd web` process, asked over HTTP.

The fleet page lists the sessions in the dashboard's order and its stream shows a state
change; a session page carries its output readable and escaped, with no secret; a foreign
Origin, a renamed Host, a non-loopback bind without a token and a wrong token are refused;
actions need --allow-actions, a confirmation page and its signed token. Each test that starts
`herd web` ends it with Ctrl-C (SIGINT to its own child), so it runs in a private PID namespace.
"""

from __future__ import annotations

import html
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
from conftest import HERD, PY, Herd, script, wait_until
from test_person_in_the_loop import gated

from agentherd.tui.web.logtail import Follower

READ_TIMEOUT_S = 30.0
"""A stream's next event comes within this on a loaded machine, or the test fails."""


@contextmanager
def herd_web(herd: Herd, *args: str) -> Iterator[str]:
    """A real `herd web --port 0 ARGS` in the herd's folder; yields its base address."""
    web = subprocess.Popen(
        [HERD, "web", "--port", "0", *args],
        cwd=herd.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = web.stdout.readline()  # type: ignore[union-attr]
        found = re.search(r"http://[^/ ]+", line)
        assert found, f"herd web printed {line!r}; stderr: {web.stderr.read()}"  # type: ignore[union-attr]
        yield found.group()
    finally:
        web.send_signal(signal.SIGINT)  # Ctrl-C, as a person stops it
        try:
            web.wait(30)
        finally:
            web.kill()  # a no-op once it has ended; never left running
            _, err = web.communicate()
    assert "Traceback" not in err, err


def browser(base: str, **headers: str) -> httpx2.Client:
    """An HTTP client as a same-origin page would ask (no proxy from the environment)."""
    host = base.removeprefix("http://")
    return httpx2.Client(
        base_url=base,
        trust_env=False,
        timeout=httpx2.Timeout(10.0, read=READ_TIMEOUT_S),
        headers={"host": host, **headers},
    )


def events_of(response: httpx2.Response) -> Iterator[tuple[str, str]]:
    """(event, data) of each server-sent event as it arrives."""
    name, data = "message", []
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []


WAITER = """
    import os, pathlib, sys, time
    {before}
    flag = pathlib.Path(os.environ["FLAG"])
    while not flag.exists():
        time.sleep(0.05)
    {after}
"""
"""An agent that does `before`, waits for a flag file, then does `after`."""


def waiter(before: str = "pass", after: str = "pass") -> str:
    return script(WAITER.format(before=before, after=after))


@pytest.mark.pidns
def test_the_fleet_page_lists_sessions_most_urgent_first_and_streams_a_state_change(
    herd: Herd,
) -> None:
    flag = herd.root / "flag"
    herd.write(f"""
        [[session]]
        name = "alpha"
        command = {waiter()}
        env = {{ FLAG = "{flag}" }}
        restart = "never"

        [[session]]
        name = "zeta"
        command = {script("import sys; sys.exit(3)")}
        restart = "never"
    """)
    client = herd.start()
    client.call("start", name="zeta")
    herd.wait_state("zeta", "failed")
    with herd_web(herd) as base, browser(base) as web:
        page = web.get("/")
        assert page.status_code == 200
        assert '<meta name="viewport"' in page.text
        rows = re.findall(r'<tr[^>]*data-session="([^"]+)"', page.text)
        assert rows == ["zeta", "alpha"], rows  # failed first: it needs a person
        assert 'href="/session/alpha"' in page.text
        assert "SESSION" in page.text and "LAST OUTPUT" in page.text

        def alpha_state(fragment: str) -> str:
            row = re.search(r'data-session="alpha">(.*?)</tr>', fragment, re.S)
            assert row, fragment
            return re.sub(r"<[^>]+>", " ", row.group(1))

        seen = []
        with web.stream("GET", "/stream") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            deadline = time.monotonic() + 60
            for event, data in events_of(stream):
                assert event == "fleet"
                seen.append(alpha_state(data))
                if len(seen) == 1:
                    assert " idle " in seen[0], seen
                    client.call("start", name="alpha")
                elif " running " in seen[-1]:
                    break
                assert time.monotonic() < deadline, seen
        flag.touch()
        herd.wait_state("alpha", "completed", "stopped", "failed")


@pytest.mark.pidns
def test_a_session_page_carries_its_output_readable_escaped_and_without_secrets(
    herd: Herd,
) -> None:
    flag = herd.root / "flag"
    secret = "s3cret-value-of-the-session"
    before = (
        "pathlib.Path('progress.md').write_text('# Session 1\\n- \\x1b[2Jwiped <b>\\n')\n"
        "    print('<script>alert(1)</script> \\x1b[31mred\\x1b[0m \\x1b]0;title\\x07')\n"
        "    print('key', os.environ['MY_TOKEN'], flush=True)\n"
        "    print(" + repr(json.dumps({"type": "result", "result": "all done"})) + ", flush=True)"
    )
    after = "print('after <the page>', flush=True); time.sleep(30)"
    herd.write(f"""
        [[session]]
        name = "talker"
        command = {waiter(before, after)}
        env = {{ FLAG = "{flag}", MY_TOKEN = "{secret}" }}
        restart = "never"
        progress = "progress.md"
    """)
    client = herd.start()
    client.call("start", name="talker")
    wait_until(lambda: "all done" in herd.status("talker")["last_line"], what="the output")
    with herd_web(herd) as base, browser(base) as web:
        page = web.get("/session/talker")
        assert page.status_code == 200
        output = re.search(r'<pre id="output"([^>]*)>(.*?)</pre>', page.text, re.S)
        assert output, page.text
        attrs, text = output.groups()
        assert "&lt;script&gt;alert(1)&lt;/script&gt; red" in text  # escaped, colours dropped
        assert "all done" in text  # a stream-json line read as herd logs reads it
        assert "<script>alert" not in page.text
        assert "\x1b" not in page.text and "\x07" not in page.text
        assert secret not in page.text and "key [hidden]" in text
        assert "MY_TOKEN" not in page.text  # no environment on the page
        assert "^[[2Jwiped &lt;b&gt;" in page.text  # the progress file, its escape made inert
        for part in ("plan", "checkpoints", "spend against the budget", "events", "report"):
            assert f"<h2>{part}" in page.text, part
        run = re.search(r'data-run="(\d+)"', attrs)
        offset = re.search(r'data-offset="(\d+)"', attrs)
        assert run and offset, attrs
        url = f"/session/talker/stream?run={run.group(1)}&offset={offset.group(1)}"
        with web.stream("GET", url) as stream:
            got = []
            for event, data in events_of(stream):
                got.append((event, data))
                assert "\x1b" not in data and secret not in data
                if event == "head":
                    assert "running" in data
                    flag.touch()
                if event == "lines":
                    assert "after &lt;the page&gt;" in data, got
                    assert "alert" not in data  # from the page's offset: nothing twice
                    break
    client.call("stop", name="talker", socket_timeout_s=None)


@pytest.mark.pidns
def test_a_foreign_origin_a_renamed_host_and_actions_without_allow_actions_are_refused(
    herd: Herd,
) -> None:
    herd.write(f"""
        [[session]]
        name = "idle"
        command = {script("pass")}
    """)
    herd.start()
    with herd_web(herd) as base, browser(base) as web:
        assert web.get("/").status_code == 200  # the same origin is served
        assert web.get("/", headers={"origin": base}).status_code == 200
        rebound = web.get("/", headers={"host": "attacker.example:80"})
        assert rebound.status_code == 403 and "attacker.example" in html.unescape(rebound.text)
        assert web.get("/stream", headers={"origin": "http://attacker.example"}).status_code == 403
        assert web.get("/", headers={"origin": "null"}).status_code == 403
        cross = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}
        assert web.get("/session/idle", headers=cross).status_code == 403
        post = web.post(
            "/session/idle/restart",
            data={"confirm": "x"},
            headers={"origin": "http://attacker.example"},
        )
        assert post.status_code == 403
        page = web.get("/session/idle")
        assert page.status_code == 200 and "/session/idle/restart" not in page.text
        confirm = web.get("/session/idle/restart")
        assert confirm.status_code == 403 and "--allow-actions" in confirm.text
        act = web.post("/session/idle/restart", data={"confirm": "x"}, headers={"origin": base})
        assert act.status_code == 403 and "--allow-actions" in act.text
    assert herd.status("idle")["state"] == "idle"  # nothing was started


def test_a_non_loopback_bind_without_a_token_file_exits_2_with_one_line(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "idle"
        command = {script("pass")}
    """)
    herd.start()
    refused = herd.cli("web", "--host", "0.0.0.0", "--port", "0", timeout_s=30)
    assert refused.returncode == 2, refused
    assert refused.stdout == ""
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("herd: web: --host 0.0.0.0"), lines
    assert "--token-file" in lines[0]
    token_file = herd.root / "token"
    token_file.write_text("0123456789abcdef0123456789abcdef\n")
    token_file.chmod(0o644)
    shared = herd.cli("web", "--host", "0.0.0.0", "--port", "0", "--token-file", str(token_file))
    assert shared.returncode == 2 and "chmod 600" in shared.stderr, shared
    token_file.write_text("short\n")
    token_file.chmod(0o600)
    short = herd.cli("web", "--host", "0.0.0.0", "--port", "0", "--token-file", str(token_file))
    assert short.returncode == 2 and "at least 16 characters" in short.stderr, short
    assert sorted(p.name for p in herd.root.iterdir()) == [".herd", "herd.toml", "token"]


@pytest.mark.pidns
def test_a_token_is_taken_from_the_address_once_then_kept_in_a_cookie(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "idle"
        command = {script("pass")}
    """)
    herd.start()
    token = "0123456789abcdef0123456789abcdef"
    token_file = herd.root / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    with herd_web(herd, "--host", "0.0.0.0", "--token-file", str(token_file)) as base:
        port = base.rpartition(":")[2]
        with browser(f"http://127.0.0.1:{port}") as web:
            assert web.get("/").status_code == 401
            assert web.get("/stream").status_code == 401
            wrong = web.get("/", params={"token": token[:-1] + "0"})
            assert wrong.status_code == 403 and "set-cookie" not in wrong.headers
            taken = web.get("/session/idle", params={"token": token})
            assert taken.status_code == 303
            assert taken.headers["location"] == "/session/idle"  # the token leaves the address
            cookie = taken.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            assert token not in cookie
            assert web.get("/session/idle").status_code == 200  # the cookie jar has it now
            web.cookies.clear()
            web.cookies.set("herd_web", "0" * 64)
            assert web.get("/").status_code == 401
            web.cookies.clear()
            odd = web.get("/", headers={"cookie": b'herd_web="\xc3\xa9"'})
            assert odd.status_code == 401  # a cookie no token made is refused, never a 500


@pytest.mark.pidns
def test_an_action_needs_its_confirmation_page_and_its_own_token(herd: Herd) -> None:
    flag = herd.root / "flag"
    herd.write(f"""
        [[session]]
        name = "worker"
        command = {waiter()}
        env = {{ FLAG = "{flag}" }}
        restart = "never"
        stop_grace = "5s"
    """)
    client = herd.start()
    client.call("start", name="worker")
    herd.wait_state("worker", "running")
    with herd_web(herd, "--allow-actions") as base, browser(base, origin=base) as web:
        page = web.get("/session/worker")
        assert 'href="/session/worker/stop"' in page.text
        assert web.post("/session/worker/stop", data={}).status_code == 403
        other = web.get("/session/worker/restart")
        other_token = re.search(r'name="confirm" value="([^"]+)"', other.text)
        assert other_token
        reused = web.post("/session/worker/stop", data={"confirm": other_token.group(1)})
        assert reused.status_code == 403  # a restart's confirmation does not stop
        assert herd.status("worker")["state"] == "running"
        confirm = web.get("/session/worker/stop")
        assert confirm.status_code == 200 and "Stop worker?" in confirm.text
        token = re.search(r'name="confirm" value="([^"]+)"', confirm.text)
        assert token
        done = web.post("/session/worker/stop", data={"confirm": token.group(1)})
        assert done.status_code == 303 and done.headers["location"] == "/session/worker"
        herd.wait_state("worker", "stopped")


def test_a_stream_that_falls_behind_skips_ahead_and_says_how_much(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_bytes(b"".join(b"line %06d\n" % n for n in range(50_000)))  # 600 KB
    follower = Follower(log, 0, step_bytes=16 << 10)
    try:
        got = follower.step()
        assert got.skipped_bytes > 500_000  # behind by far more than a step: skipped
        assert len(got.lines) <= (16 << 10) // 11 + 1
        assert got.lines[-1] == "line 049999"
        assert all(re.fullmatch(r"line \d{6}", line) for line in got.lines)  # no cut line
    finally:
        follower.close()


def chromium_binary() -> str | None:
    """Debian's Chromium (the browser itself: its /usr/bin launcher adds flags headless refuses)."""
    direct = Path("/usr/lib/chromium/chromium")
    return str(direct) if direct.is_file() else shutil.which("chromium")


class Browser:
    """Headless Chromium driven over its DevTools pipe (fds 3 and 4): open a page, read its DOM."""

    def __init__(self, binary: str, profile: Path) -> None:
        self._log = (profile.parent / "chromium.log").open("wb")  # what it says, for a failure
        to_chrome, self._send_fd = os.pipe()
        self._receive_fd, from_chrome = os.pipe()
        # The pipe ends go to fds 3 and 4 of the child (moved high first: they may be 3 or 4).
        place = "import fcntl, os, sys\n"
        place += "a, b = (fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3])\n"
        place += "os.dup2(a, 3); os.dup2(b, 4); os.execv(sys.argv[3], sys.argv[3:])"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-proxy-server"]
        flags += ["--remote-debugging-pipe", f"--user-data-dir={profile}", "--no-first-run"]
        self.process = subprocess.Popen(
            [PY, "-c", place, str(to_chrome), str(from_chrome), binary, *flags, "about:blank"],
            pass_fds=(to_chrome, from_chrome),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer = b""
        self._next_id = 0

    def open(self, url: str) -> str:
        """A new tab on `url`; returns its DevTools session."""
        target = self.call("Target.createTarget", url=url)["targetId"]
        attached = self.call("Target.attachToTarget", targetId=target, flatten=True)
        return str(attached["sessionId"])

    def call(self, method: str, session: str | None = None, **params: object) -> dict:
        """One DevTools command and its result (events in between are passed over)."""
        self._next_id += 1
        message: dict[str, object] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._send_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + READ_TIMEOUT_S
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    assert "error" not in reply, reply
                    return reply["result"]  # type: ignore[no-any-return]
            ready, _, _ = select.select([self._receive_fd], [], [], 1.0)
            assert time.monotonic() < deadline, f"no reply to {method}"
            if ready:
                chunk = os.read(self._receive_fd, 1 << 16)
                assert chunk, "the browser closed its pipe"
                self._buffer += chunk

    def evaluate(self, tab: str, expression: str) -> object:
        """The value of a script expression in the tab's page."""
        result = self.call("Runtime.evaluate", tab, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        """Close the browser and wait for every process of it."""
        try:
            self.call("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.process.wait(30)
        finally:
            self.process.kill()  # a no-op once it has ended
            self.process.wait()
            os.close(self._send_fd)
            os.close(self._receive_fd)
            self._log.close()


@pytest.mark.pidns
@pytest.mark.skipif(
    chromium_binary() is None and os.environ.get("CI") != "true",  # .ci/run installs it
    reason="no Chromium (apt-get install chromium)",
)
def test_a_real_browser_shows_a_state_change_the_script_brought(herd: Herd) -> None:
    flag = herd.root / "flag"
    herd.write(f"""
        [[session]]
        name = "alpha"
        command = {waiter("print('before the flag', flush=True)", "print('after <the flag>')")}
        env = {{ FLAG = "{flag}" }}
        restart = "never"
    """)
    client = herd.start()
    client.call("start", name="alpha")
    herd.wait_state("alpha", "running")
    binary = chromium_binary()
    assert binary is not None
    with herd_web(herd) as base:
        browser = Browser(binary, herd.root / "profile")
        try:
            fleet, session = browser.open(f"{base}/"), browser.open(f"{base}/session/alpha")
            row = "document.querySelector('tr[data-session=alpha] .c-state').textContent"
            live = "document.body && document.body.dataset.live"
            output = "document.getElementById('output').textContent"
            for tab in (fleet, session):
                wait_until(lambda t=tab: browser.evaluate(t, live) == "yes", what="the streams")
            assert "running" in str(browser.evaluate(fleet, row))
            assert "before the flag" in str(browser.evaluate(session, output))
            flag.touch()  # the session ends after the pages were served: only the script can say
            wait_until(
                lambda: "completed" in str(browser.evaluate(fleet, row)),
                what="the fleet's row to say completed",
            )
            wait_until(
                lambda: "after <the flag>" in str(browser.evaluate(session, output)),
                what="the session's output to follow the log",
            )
            dom = str(browser.evaluate(session, "document.documentElement.outerHTML"))
            assert "after &lt;the flag&gt;" in dom and "<the flag>" not in dom
        finally:
            browser.close()


@pytest.mark.pidns
def test_a_lost_daemon_is_said_on_the_pages_and_its_return_picked_up(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "idle"
        command = {script("pass")}
    """)
    herd.start()
    with herd_web(herd) as base, browser(base) as web:
        assert web.get("/").status_code == 200
        with web.stream("GET", "/stream") as stream:
            events = events_of(stream)
            assert "daemon not answering" not in next(events)[1]
            herd.stop_daemon()  # the agents stay; the daemon's socket goes
            assert "daemon not answering" in next(events)[1]
            gone = web.get("/")
            assert gone.status_code == 503 and "herd up" in gone.text
            herd.start()
            back = next(events)[1]
            assert "daemon not answering" not in back and 'data-session="idle"' in back


@pytest.mark.pidns
def test_the_approval_gate_is_answered_from_a_phone_once(herd: Herd) -> None:
    gated(herd)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "waiting-approval")
    with herd_web(herd, "--allow-actions") as base, browser(base, origin=base) as web:
        page = web.get("/session/api")
        assert 'href="/session/api/approve"' in page.text
        assert 'href="/session/api/reject"' in page.text
        confirm = web.get("/session/api/approve")
        assert "Approve api?" in confirm.text and "plan change: item 2 reworded" in confirm.text
        token = re.search(r'name="confirm" value="([^"]+)"', confirm.text)
        assert token
        done = web.post("/session/api/approve", data={"confirm": token.group(1)})
        assert done.status_code == 303
        herd.wait_state("api", "running", "completed")
        again = web.post("/session/api/approve", data={"confirm": token.group(1)})
        assert again.status_code == 403 and "used already" in again.text  # a form acts once
    assert [e["kind"] for e in herd.events("api", "plan-approved")] == ["plan-approved"]
    herd.wait_state("api", "completed", timeout_s=60)
