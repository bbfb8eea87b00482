"""Where `herd web` may listen and which names it answers to: loopback by default, any other
address only with a token the person made (herd never makes one for such a bind)."""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path

import psutil

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Names a browser on this machine (or at the far end of an SSH tunnel) uses for loopback."""

MIN_TOKEN_CHARS = 16
"""A shorter token can be guessed; `openssl rand -hex 32` makes 64 characters."""

TOKEN_HINT = "`openssl rand -hex 32 > FILE && chmod 600 FILE`"


class BindRefused(Exception):
    """`herd web` cannot serve as asked: one line for the person, exit 2."""


@dataclass(frozen=True)
class Bind:
    """What the server listens on and what it accepts: the token (None: loopback, no token),
    the Host names that reach it, and whether actions are on."""

    host: str
    port: int
    token: str | None
    allow_actions: bool
    hosts: frozenset[str] = field(default_factory=frozenset)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`: only this machine can connect."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(path: Path) -> str:
    """The token in `path` (its first line): refused when missing, short or readable by others."""
    where = f"--token-file {path}"
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8", errors="strict")
    except FileNotFoundError:
        raise BindRefused(f"web: {where}: no such file; make one with {TOKEN_HINT}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BindRefused(
            f"web: {where}: cannot read it ({exc}); make one with {TOKEN_HINT}"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise BindRefused(f"web: {where}: not a regular file; make one with {TOKEN_HINT}")
    if info.st_mode & 0o077:
        raise BindRefused(
            f"web: {where}: other users can read it (mode {stat.S_IMODE(info.st_mode):o}); "
            f"`chmod 600 {path}`"
        )
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise BindRefused(
            f"web: {where}: the token must be one word of at least {MIN_TOKEN_CHARS} characters; "
            f"make one with {TOKEN_HINT}"
        )
    return token


def answered_names(host: str) -> frozenset[str]:
    """The Host header names that reach a server bound to `host` (a rebinding site's do not)."""
    names = set(LOOPBACK_NAMES)
    bare = host.strip("[]")
    if is_loopback(bare):
        return frozenset(names | {bare})
    names |= {bare, socket.gethostname(), socket.getfqdn()}
    if bare in ("0.0.0.0", "::"):  # every interface: any of this machine's own addresses
        for addresses in psutil.net_if_addrs().values():
            names |= {a.address.split("%")[0] for a in addresses if a.family in _IP_FAMILIES}
    return frozenset(n.lower() for n in names if n)


_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)


def plan_bind(host: str, port: int, token_file: str | None, allow_actions: bool) -> Bind:
    """The bind `herd web` asked for, checked: BindRefused says what to change."""
    if not 0 <= port <= 65535:
        raise BindRefused(f"web: --port {port}: not a TCP port; give 1-65535 (0: any free one)")
    token = read_token(Path(os.path.expanduser(token_file))) if token_file else None
    if token is None and not is_loopback(host):
        raise BindRefused(
            f"web: --host {host} is reachable from other machines; give --token-file FILE "
            f"(made with {TOKEN_HINT}), or keep the default 127.0.0.1 and use an SSH tunnel"
        )
    return Bind(host, port, token, allow_actions, answered_names(host))


def listen(bind: Bind) -> socket.socket:
    """A listening socket on the bind (port 0: a free one), or BindRefused saying why not."""
    bare = bind.host.strip("[]")
    try:
        infos = socket.getaddrinfo(bare, bind.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BindRefused(f"web: --host {bind.host}: {exc.strerror}; give an address") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BindRefused(
            f"web: cannot listen on {bind.host}:{bind.port}: {exc.strerror}; give another --port"
        ) from None
    sock.set_inheritable(True)
    return sock
