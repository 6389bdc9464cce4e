#!/usr/bin/env bash
# The long real-process tests of bounded resources (issue 16), one at a time:
# a member's largest frames do not stall the node receiving them, a peer that
# never reads does not grow its senders' memory, and ten minutes of back-to-back
# rounds keep RSS flat (the RSS curve is printed). The flood test runs with them
# (it also runs in `cargo test`).
#
#   scripts/soak.sh              # everything (about 15 minutes)
#   SOAK_SECS=120 scripts/soak.sh rss   # only tests whose name contains "rss", shorter soak
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
exec cargo test --release -p lab --test limits -- --include-ignored --test-threads 1 --nocapture $filter
