#!/usr/bin/env bash
# Starts a local network of N node processes on 127.0.0.1, waits for R beacons,
# checks that every node serves the same verified chain, prints round latency
# (p50/p90/p99/max) and CPU per round, and stops the nodes.
#
#   scripts/localnet.sh [N] [R] [more localnet flags, e.g. --json --keep-running --dir D]
#
# Without --dir the identities, configs, databases and logs go to a temporary
# directory that is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes="${1:-4}"
rounds="${2:-10}"
shift $(( $# < 2 ? $# : 2 ))
exec cargo run --release --quiet -- localnet --nodes "$nodes" --rounds "$rounds" "$@"
