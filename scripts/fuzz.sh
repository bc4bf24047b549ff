#!/usr/bin/env bash
# A long campaign of the decoder fuzz tests (crates/fuzz/tests/decoders.rs):
# every decoder of untrusted bytes (peer wire, handshake, WAL entries, hard
# state and recovery, store snapshots with users and roles, snapshot files,
# the log's client commands), CASES mutated or
# random inputs each (the WAL recovery test a tenth of that: it writes
# files). The test suite runs 300; this runs 1,000,000 by default.
#
#   scripts/fuzz.sh            # about a minute on 2 cores
#   CASES=10000000 scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CASES="${CASES:-1000000}"
BELLWETHER_FUZZ_CASES="$CASES" cargo test --profile ci -p bellwether-fuzz --test decoders -- --nocapture
