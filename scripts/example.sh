#!/usr/bin/env bash
# The main job on the bundled example: replay a genuine Claude Code session's first 2
# tool-call batches in a fresh workspace, rebuild the session, and let the real `claude`
# continue against pvisor's built-in scripted model. No API key, no network beyond the npm
# registry for the first install.
#
#   scripts/example.sh [--after-step N] [--max-steps M] [extra pvisor replay flags...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
EX="$ROOT/examples/claude-code"
WORK=/tmp/pvisor-rec-five-step/work     # the original run's workspace path (absolute paths in the session)
OUT="$ROOT/run-output"

echo "[example] installing the pinned Claude Code CLI (first time only)..." >&2
CLAUDE="$(scripts/install-agents.sh claude-code)"
echo "[example] building pvisor..." >&2
cargo build --quiet --bin pvisor
PVISOR="${CARGO_TARGET_DIR:-$ROOT/target}/debug/pvisor"

echo "[example] fresh workspace at $WORK" >&2
rm -rf "$WORK" && mkdir -p "$WORK"

RUN_ID="example-$(date -u +%Y%m%dT%H%M%SZ)-$$"
set +e
"$PVISOR" replay \
  --agent claude-code \
  --trajectory "$EX/session.jsonl" \
  --after-step 2 \
  --max-steps 6 \
  --workspace "$WORK" \
  --state-dir "$OUT/state" --output-dir "$OUT/output" --run-id "$RUN_ID" \
  --agent-entrypoint "$CLAUDE" \
  --model-script "$EX/model-script.json" \
  "$@"
code=$?
set -e
echo >&2
echo "[example] exit code $code; outputs in $OUT/output/$RUN_ID" >&2
echo "[example] offline audit of the run:" >&2
"$PVISOR" journal audit "$OUT/state/$RUN_ID" >&2 || true
"$PVISOR" journal audit --format html -o "$OUT/audit-$RUN_ID.html" "$OUT/state/$RUN_ID" >/dev/null 2>&1 || true
echo "[example] the same audit as a page: file://$OUT/audit-$RUN_ID.html" >&2
exit $code
