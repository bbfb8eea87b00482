#!/usr/bin/env bash
# Install the newest release of each real agent CLI into .cache/agents-newest, for the tests
# marked `newest` (`python -m pytest -m newest -n 0 tests/test_real_newest.py`). The pinned
# versions .ci/run installs stay in .cache/agents; this folder is replaced on each call.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=.cache/agents-newest
AGENTS=(@anthropic-ai/claude-code@latest @openai/codex@latest @google/gemini-cli@latest
        opencode-ai@latest)
rm -rf "$DIR"
mkdir -p "$DIR"
npm install --prefix "$DIR" --save-exact --no-audit --no-fund --loglevel=error "${AGENTS[@]}"
BIN="$DIR/node_modules/.bin"
for name in claude codex gemini opencode; do
  printf '%s: %s\n' "$name" "$("$BIN/$name" --version 2>/dev/null | head -1 || echo missing)"
done
