#!/usr/bin/env bash
# A long campaign of the fuzz targets, one after the other on one core, each for RUNS
# executions (default 10,000,000), from the seeded corpora (fuzz/seed.sh). Prints one line per
# target: executions, seconds, exec/s, coverage (edges), features, corpus, peak RSS, findings.
#   fuzz/seed.sh && (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build -O -a -s none) && fuzz/campaign.sh [TARGET…]
# (-a: debug assertions and overflow checks; -s none: no AddressSanitizer, see docs/fuzzing.md)
# RUNS=N, MAX_LEN=N (default 65536) override. Findings land in fuzz/artifacts/<target>/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/fuzz/target/x86_64-unknown-linux-gnu/release"
RUNS="${RUNS:-10000000}"
MAX_LEN="${MAX_LEN:-65536}"
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(bridge_validate parse_codex parse_opencode parse_pi parse_mini_swe_agent parse_openhands parse_claude_code journal_open)
for t in "${targets[@]}"; do
    mkdir -p "$ROOT/fuzz/corpus/$t" "$ROOT/fuzz/artifacts/$t" "$ROOT/fuzz/logs"
    log="$ROOT/fuzz/logs/$t.log"
    start=$(date +%s)
    "$BIN/$t" "$ROOT/fuzz/corpus/$t" -runs="$RUNS" -max_len="$MAX_LEN" -rss_limit_mb=2048 \
        -timeout=30 -print_final_stats=1 -artifact_prefix="$ROOT/fuzz/artifacts/$t/" >"$log" 2>&1 || true
    secs=$(( $(date +%s) - start ))
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || echo ?)
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || echo ?)
    corp=$(echo "$last" | grep -o 'corp: [0-9]*' | grep -o '[0-9]*' || echo ?)
    findings=$(ls "$ROOT/fuzz/artifacts/$t" | wc -l)
    printf '%s\texecs %s\t%ss\t%s exec/s\tcov %s\tft %s\tcorpus %s\trss %s MB\tfindings %s\n' \
        "$t" "$execs" "$secs" "$(( execs / (secs > 0 ? secs : 1) ))" "$cov" "$ft" "$corp" "$rss" "$findings"
done
