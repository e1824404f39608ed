#!/usr/bin/env bash
# The property and fuzz tests (tests/it/fuzz.rs) run for longer than CI's
# fixed 64 cases each, against a release build: CASES=20000 by default.
#   scripts/fuzz.sh            # 20,000 cases per property
#   CASES=200000 scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export TOOLGATE_FUZZ_CASES="${CASES:-20000}"
exec cargo test --release --test it fuzz:: -- --test-threads "$(nproc)"
