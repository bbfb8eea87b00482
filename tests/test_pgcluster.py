"""The private PostgreSQL the cluster tests run against (tests/pgcluster.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cluster


def test_each_test_gets_a_fresh_empty_database(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables == (0,)
        assert conn.execute("SHOW server_version_num").fetchone()[0] >= "150000"
