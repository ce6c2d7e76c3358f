#!/usr/bin/env bash
# Seed corpora of the parser targets from the committed fixtures (fuzz/corpus is ignored):
#   fuzz/seed.sh && cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run parse_codex -- -max_total_time=600
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
F="$ROOT/tests/fixtures"
seed() { # target, files...
    local t="$1"; shift
    mkdir -p "$ROOT/fuzz/corpus/$t"
    for f in "$@"; do
        [ -f "$f" ] && cp "$f" "$ROOT/fuzz/corpus/$t/$(echo "$f" | sed "s|$F/||; s|/|_|g")"
    done
    echo "$t: $(ls "$ROOT/fuzz/corpus/$t" | wc -l) seeds"
}
shopt -s globstar nullglob
seed parse_claude_code $(ls "$F"/claude/**/*.jsonl | grep -v -e requests -e stdout -e stderr)
seed parse_codex "$F"/codex/**/rollout*.jsonl
seed parse_opencode "$F"/opencode/**/export.json "$F"/opencode/**/stdout*.jsonl
seed parse_pi "$F"/pi/**/session*.jsonl "$F"/pi/**/stdout*.jsonl
seed parse_mini_swe_agent "$F"/mini-swe-agent/**/mini.traj.json
# OpenHands conversation folders in their canonical form (base_state.json, then the events in
# index order, one per line: what `Adapter::read_input` returns).
mkdir -p "$ROOT/fuzz/corpus/parse_openhands"
for b in "$F"/openhands/**/base_state.json; do
    d="$(dirname "$b")"
    out="$ROOT/fuzz/corpus/parse_openhands/$(echo "$d" | sed "s|$F/||; s|/|_|g").jsonl"
    { cat "$b"; echo; for e in $(ls "$d/events" | grep '^event-' | sort); do cat "$d/events/$e"; echo; done; } > "$out"
done
echo "parse_openhands: $(ls "$ROOT/fuzz/corpus/parse_openhands" | wc -l) seeds"
# The bridge check: a selector byte (the adapter of bridge_cases::CASES, high bit: a later
# request) followed by the conversation list of each main request its real CLI sent.
mkdir -p "$ROOT/fuzz/corpus/bridge_validate"
python3 - "$ROOT" <<'PY'
import json, sys, pathlib
root = pathlib.Path(sys.argv[1])
logs = ["claude/recorded/five-step/requests.jsonl", "codex/genuine/requests-run1.jsonl",
        "opencode/genuine/requests-run1.jsonl", "pi/genuine/requests-run1.jsonl",
        "mini-swe-agent/genuine-2.4.6/requests-run1.jsonl", "openhands/genuine/requests-run1.jsonl"]
out = root / "fuzz/corpus/bridge_validate"
for i, log in enumerate(logs):
    for j, line in enumerate((root / "tests/fixtures" / log).read_text().splitlines()):
        r = json.loads(line)
        if r.get("kind") == "main":
            key = "input" if "input" in r["body"] else "messages"
            body = json.dumps(r["body"][key], separators=(",", ":")).encode()
            (out / f"case{i}-req{j}").write_bytes(bytes([i]) + body)
PY
echo "bridge_validate: $(ls "$ROOT/fuzz/corpus/bridge_validate" | wc -l) seeds"
