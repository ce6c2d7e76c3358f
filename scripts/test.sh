#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
#
#   scripts/test.sh
#
# 1. checks formatting (cargo fmt --check) and lints (clippy, warnings are errors);
# 2. builds everything, then installs the pinned agent CLIs the end-to-end tests drive with
#    `pvisor agents install` (npm registry / PyPI only; cached in the ignored .cache/agents/,
#    so later runs skip it; tests that need another version install it themselves);
# 3. runs every test of the workspace: unit, property, golden-vector, kill-loop, and the
#    end-to-end tests with the real agent CLIs against the scripted model server (127.0.0.1).
# Any missing prerequisite fails the run loudly; nothing is skipped.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

command -v cargo >/dev/null || { echo "scripts/test.sh: cargo is required" >&2; exit 1; }
command -v node >/dev/null || { echo "scripts/test.sh: node (>= 18) is required for the agent CLIs" >&2; exit 1; }

if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    # A fixture workspace may carry its own .gitignore (agents honour it); every file under
    # tests/fixtures must still be committed, or a clean clone replays a different workspace.
    ignored="$(git -C "$ROOT" ls-files --others --ignored --exclude-standard tests/fixtures journal-format/vectors)"
    if [ -n "$ignored" ]; then
        echo "scripts/test.sh: fixture files ignored by a .gitignore (add them with git add -f):" >&2
        echo "$ignored" >&2
        exit 1
    fi
fi

echo "== cargo fmt --check ==" >&2
cargo fmt --all --check

echo "== cargo clippy --all-targets -D warnings ==" >&2
cargo clippy --workspace --all-targets -q -- -D warnings

echo "== building the workspace and its tests ==" >&2
cargo test --workspace --no-run -q "$@" >&2

echo "== installing pinned agent CLIs (cached in .cache/agents) ==" >&2
PVISOR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/pvisor" scripts/install-agents.sh claude-code codex opencode pi-agent mini-swe-agent mini-swe-agent@1.17.5 openhands >&2

if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    echo "== installing chromium (the audit HTML test renders the report in it) ==" >&2
    command -v apt-get >/dev/null || { echo "scripts/test.sh: chromium is required (apt-get not found)" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi

if ! command -v tmux >/dev/null; then
    echo "== installing tmux (OpenHands' terminal tool runs its shell in tmux) ==" >&2
    command -v apt-get >/dev/null || { echo "scripts/test.sh: tmux is required (apt-get not found)" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >&2
fi

if [ ! -f /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]; then
    echo "== installing faketime (a test replays days after the recording) ==" >&2
    command -v apt-get >/dev/null || { echo "scripts/test.sh: libfaketime is required (apt-get not found)" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >&2
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "== installing slurm-wlm and munge (the fleet test runs a one-machine Slurm cluster) ==" >&2
    command -v apt-get >/dev/null || { echo "scripts/test.sh: Slurm is required (apt-get not found)" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
fi

echo "== cargo test --workspace ==" >&2
# One build, shared by every test binary; tests run in parallel within each binary.
cargo test --workspace --no-fail-fast "$@"
