"""The signed, one-time, expiring link a notification carries to a session's approval page.

Pure: the daemon signs and checks with a key that lives as long as it does (a restart
invalidates every link sent). A link names one gate (its `waiting-approval` event's seq), so
it cannot answer a later gate; which links were used is the caller's to remember.
"""

from __future__ import annotations

import hashlib
import hmac

LINK_TTL_S = 3600.0
"""An approval link works for an hour: long enough to reach the phone, short for a leak."""


def _mac(key: bytes, name: str, gate_seq: int, expires: int) -> str:
    message = f"gate\0{name}\0{gate_seq}\0{expires}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def sign(key: bytes, name: str, gate_seq: int, now: float, ttl_s: float = LINK_TTL_S) -> str:
    """The token of an approval link for gate `gate_seq` of session `name`, good for ttl_s."""
    expires = int(now + ttl_s)
    return f"{gate_seq}.{expires}.{_mac(key, name, gate_seq, expires)}"


def gate_of(token: str) -> int | None:
    """The gate (event seq) a token names, or None when it is not a link's token."""
    seq = token.partition(".")[0]
    return int(seq) if seq.isdigit() else None


def refusal(key: bytes, token: str, name: str, now: float) -> str | None:
    """None when `token` is a good link for `name` now; else why not, in a person's words."""
    seq, _, rest = token.partition(".")
    stamp, _, mac = rest.partition(".")
    if not (seq.isdigit() and stamp.isdigit()) or not hmac.compare_digest(
        mac, _mac(key, name, int(seq), int(stamp))
    ):
        return (
            "this approval link is not one herd signed for this session (or the daemon restarted)"
        )
    if int(stamp) < now:
        return "this approval link expired: approve from the session's page or `herd approve`"
    return None
