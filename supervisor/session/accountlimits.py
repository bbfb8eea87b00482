"""One account, one limit: sessions that share a provider account are parked together.

When one session's run hits a rate limit, every other running session of its account would
hit it next: they are parked with it (backoff, reason rate-limit) until the same reset, and
resumed after it one at a time, `stagger_s` apart in the order they were parked, so the fleet
does not meet the limit again all at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agentherd.sessions.accounts import account_of
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.times import iso, utc_now

PARKED_WITH_ACCOUNT = "account-limit"
"""A run's `stop_reason` while it is stopped because another session of its account hit a limit
(its end parks it in backoff, not stopped)."""


@dataclass
class AccountPark:
    """An account's sessions parked on one limit: its reset and who resumes in what order."""

    account: str
    until: datetime
    """The reset: the first session resumes then."""
    delay_source: str
    """`agent` (an agent said when the limit resets) or `guess` (herd's wait)."""
    order: list[str] = field(default_factory=list)
    """Sessions in the order they were parked; the n-th resumes n stagger steps after `until`."""


class AccountLimits:
    """The fleet's parked accounts, shared by every session (in the Context)."""

    def __init__(self, stagger_s: float, environ: Mapping[str, str] | None = None) -> None:
        self.stagger_s = stagger_s
        self.environ = environ if environ is not None else os.environ
        self.parks: dict[str, AccountPark] = {}

    def account(self, config: SessionConfig) -> str:
        """The session's account (its `account` key, else the agent and its key's source)."""
        return account_of(config, self.environ)

    def current(self, account: str, now: datetime | None = None) -> AccountPark | None:
        """The account's park while someone in it has yet to resume, else None."""
        park = self.parks.get(account)
        if park is None:
            return None
        last = park.until + timedelta(seconds=self.stagger_s * max(0, len(park.order) - 1))
        if (now or utc_now()) > last:
            del self.parks[account]
            return None
        return park

    def park(self, account: str, name: str, until: datetime, delay_source: str) -> datetime:
        """Park `name` on its account's limit; when it resumes. A limit that comes while the
        account is parked joins that park (its reset holds for all, unless this one is later)."""
        park = self.current(account)
        if park is None:
            park = self.parks[account] = AccountPark(account, until, delay_source)
        elif until > park.until:
            park.until, park.delay_source = until, delay_source
        if name not in park.order:
            park.order.append(name)
        return self.resumes_at(park, name)

    def resumes_at(self, park: AccountPark, name: str) -> datetime:
        """When `name` resumes: the reset, plus one stagger step per session parked before it."""
        return park.until + timedelta(seconds=self.stagger_s * park.order.index(name))

    def to_json(self) -> dict[str, Any]:
        """The status's `fleet.limits`: per parked account, its reset and who resumes when."""
        shown: dict[str, Any] = {}
        for account in list(self.parks):
            park = self.current(account)
            if park is None:
                continue
            shown[account] = {
                "until": iso(park.until),
                "delay_source": park.delay_source,
                "parked": [
                    {"session": name, "resumes_at": iso(self.resumes_at(park, name))}
                    for name in park.order
                ],
            }
        return shown
