"""A missing agent CLI skips its tests on a developer's machine and fails them in CI."""

from __future__ import annotations

from pathlib import Path

import pytest
import realagents


def _without_agents(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(realagents, "AGENT_BIN_DIR", tmp_path / "none")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def test_a_missing_cli_skips_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _without_agents(monkeypatch, tmp_path)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"npm install --prefix .cache/agents "):
        realagents.agent_binary("codex")


def test_a_missing_cli_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _without_agents(monkeypatch, tmp_path)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true: a missing agent fails the run"):
        realagents.agent_binary("gemini")


def test_an_installed_cli_is_found_first_in_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _without_agents(monkeypatch, tmp_path)
    cache = tmp_path / "bin"
    cache.mkdir()
    (cache / "claude").write_text("#!/bin/sh\n")
    (cache / "claude").chmod(0o755)
    monkeypatch.setattr(realagents, "AGENT_BIN_DIR", cache)
    assert realagents.agent_binary("claude") == str(cache / "claude")
