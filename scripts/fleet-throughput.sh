#!/usr/bin/env bash
# Fleet throughput on this machine (docs/fleet.md): replays per minute of a replay-only fleet
# (the bundled Claude `five-step` session at boundary 3, every task at the same original path
# with --isolate) submitted to the local Slurm cluster at --max-parallel 1, 2 and 4, and the
# cost of --isolate per replay (the same replay run alone 10 times with and without it).
#   scripts/fleet-throughput.sh [TASKS]      # default 24 tasks per setting
# Needs root (Slurm, mount namespaces); uses target/debug/pvisor unless PVISOR_BIN is set.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pvisor="${PVISOR_BIN:-$root/target/debug/pvisor}"
tasks="${1:-24}"
session="$root/tests/fixtures/claude/recorded/five-step/session.jsonl"
cwd=/tmp/pvisor-rec-five-step/work
eval "$("$root/scripts/slurm-local.sh" start)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/seed"

now() { date +%s.%N; }

manifest() { # $1: dir
  mkdir -p "$1"
  printf '{"schema_version":"pvisor.fleet/v1","defaults":{"agent":"claude-code","trajectory":"%s","after_step":3,"replay_only":true,"isolate":true,"workspace":"%s","workspace_seed":"%s","state_dir":"state","output_dir":"out"}}\n' \
    "$session" "$cwd" "$work/seed" > "$1/fleet.jsonl"
  for i in $(seq 1 "$tasks"); do printf '{"run_id":"t%03d"}\n' "$i" >> "$1/fleet.jsonl"; done
}

echo "tasks per setting: $tasks (replay-only, 4 tool calls each, --isolate)"
for k in 1 2 4; do
  d="$work/p$k"
  manifest "$d"
  t0="$(now)"
  job="$("$pvisor" fleet submit "$d/fleet.jsonl" --max-parallel "$k" 2>/dev/null)"
  while [ -n "$(squeue -h -r -j "$job" -o %i)" ]; do sleep 0.2; done
  t1="$(now)"
  done_count="$("$pvisor" fleet status "$d/fleet.jsonl" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"].get("done",0))')"
  awk -v a="$t0" -v b="$t1" -v n="$tasks" -v k="$k" -v ok="$done_count" \
    'BEGIN { s = b - a; printf "max-parallel %d: %d/%d done in %.1f s = %.1f replays/min\n", k, ok, n, s, 60 * n / s }'
done

alone() { # $1: run id, $2..: extra flags
  local id="$1"; shift
  "$pvisor" replay --agent claude-code --trajectory "$session" --after-step 3 --replay-only \
    --workspace "$cwd" --state-dir "$work/alone/state" --output-dir "$work/alone/out" \
    --run-id "$id" "$@" > /dev/null
}
mkdir -p "$cwd"
t0="$(now)"; for i in $(seq 1 10); do alone "iso-$i" --isolate --workspace-seed "$work/seed"; done; t1="$(now)"
# Without --isolate the replays share the host's directory: emptied before each.
t2="$(now)"; for i in $(seq 1 10); do rm -rf "${cwd:?}"/*; alone "plain-$i"; done; t3="$(now)"
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" \
  'BEGIN { printf "one replay alone: %.0f ms with --isolate, %.0f ms without: %+.0f ms\n", 100 * (b - a), 100 * (d - c), 100 * ((b - a) - (d - c)) }'
