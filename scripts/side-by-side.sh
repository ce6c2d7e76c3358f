#!/usr/bin/env bash
# The scaling bench side by side with the best existing implementation (pvisor-sandbox 0.3.1,
# from PyPI, in a venv under the ignored .cache/peer/):
#
#   scripts/side-by-side.sh                                   # 2k/20k/60k prepare, replay 200/1000
#   PVISOR_SCALE_SIZES=20000,1000000 scripts/side-by-side.sh  # any sizes (see benches/scale.rs)
#
# Both tools run on the same synthetic Codex rollouts, alternately, in the same run; the bench
# prints the medians and our/their ratios of wall time and peak memory.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
venv="$ROOT/.cache/peer/venv"
exe="$venv/bin/pvisor-replay"
if [ ! -x "$exe" ]; then
    echo "== installing pvisor-sandbox 0.3.1 into $venv ==" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "pvisor-sandbox==0.3.1"
fi
PVISOR_PEER_REPLAY="$exe" cargo bench --bench scale "$@"
