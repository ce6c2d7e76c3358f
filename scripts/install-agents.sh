#!/usr/bin/env bash
# Install pinned agent CLIs into the project's git-ignored folder .cache/agents/:
#
#   scripts/install-agents.sh [agent[@version]...]    (default: claude-code)
#
# A thin wrapper over `pvisor agents install` (the registry in src/adapters/ is the one
# source of every agent's package, pinned version and proven range): builds pvisor if
# needed, then installs from the npm registry / PyPI only. Idempotent. With one agent the
# absolute entrypoint is printed on stdout; with several, one "<agent>\t<entrypoint>" line
# each. Progress goes to stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PVISOR_AGENTS_DIR="${PVISOR_AGENTS_DIR:-$ROOT/.cache/agents}"
[[ $# -gt 0 ]] || set -- claude-code
# PVISOR_BIN: a pvisor binary to use as is (scripts/test.sh passes the one its test build made).
PVISOR="${PVISOR_BIN:-}"
if [[ -z "$PVISOR" ]]; then
    PVISOR="${CARGO_TARGET_DIR:-$ROOT/target}/debug/pvisor"
    (cd "$ROOT" && cargo build -q --bin pvisor) >&2
fi
exec "$PVISOR" agents install "$@"
