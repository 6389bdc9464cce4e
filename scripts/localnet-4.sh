#!/usr/bin/env bash
# Runs the ready-made 4-node network of configs/localnet-4/ (libp2p on ports
# 9400-9403, HTTP APIs on 10400-10403) in the foreground; Ctrl-C stops it.
# Each node keeps its key material and chain in configs/localnet-4/node-I/data:
# restarting resumes the chain; delete those directories to start a new one.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/sbft-beacon"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' INT TERM EXIT
for i in 0 1 2 3; do
  "$bin" run --config "configs/localnet-4/node-$i/node.toml" 2> "configs/localnet-4/node-$i/node.log" &
  pids+=($!)
done
echo "4 nodes up; try: curl http://127.0.0.1:10400/public/latest  (logs: configs/localnet-4/node-*/node.log)"
wait
