#!/usr/bin/env bash
# Beacon latency of real local networks, two builds back to back (issue 34).
#
#   scripts/beacon-latency.sh BEFORE_BIN AFTER_BIN [OUT_DIR]
#
# For each setting, runs `localnet` with BEFORE_BIN then AFTER_BIN, REPEATS
# times in alternation (so both see the same machine load), and prints the
# median and the spread (min-max) of each build's p50:
#   - back to back (`--period 0`): beacon_latency_ms.p50, at NODES_B2B nodes;
#   - paced (`--period 1`): beacon_delay_ms.p50, the delay from the round's
#     time to the beacon at a node, at NODES_PACED nodes;
# and the messages per round of each build. The JSON of every run is kept in
# OUT_DIR (default: a temporary folder). The machine should be quiet: the
# script prints the load average before and after.
#
# Environment: REPEATS (3), ROUNDS_B2B (40), ROUNDS_PACED (12),
# NODES_B2B ("4 16"), NODES_PACED ("4 16"), TIMEOUT_S (300 per run),
# BEFORE_ARGS and AFTER_ARGS (extra `localnet` options of each side, e.g. to
# compare two settings of one build:
#   AFTER_ARGS="--beacon-shares everyone" scripts/beacon-latency.sh B B).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
before=$1
after=$2
out=${3:-$(mktemp -d)}
mkdir -p "$out"
repeats=${REPEATS:-3}
rounds_b2b=${ROUNDS_B2B:-40}
rounds_paced=${ROUNDS_PACED:-12}
nodes_b2b=${NODES_B2B:-4 16}
nodes_paced=${NODES_PACED:-4 16}
timeout_s=${TIMEOUT_S:-300}
for bin in "$before" "$after"; do
  [ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 2; }
done

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); nproc $(nproc); results in $out"

# run NAME BIN NODES PERIOD ROUNDS REPEAT ARGS: one localnet run, its JSON kept.
run() {
  local name=$1 bin=$2 nodes=$3 period=$4 rounds=$5 rep=$6 extra=$7
  local file="$out/$name-n$nodes-p$period-$rep.json"
  # shellcheck disable=SC2086 # ARGS are words on purpose.
  if ! "$bin" localnet --nodes "$nodes" --rounds "$rounds" --period "$period" \
    --timeout-s "$timeout_s" $extra --json >"$file" 2>"$file.log"; then
    echo "run failed: $name n=$nodes period=$period (see $file.log)" >&2
    return 1
  fi
}

for setting in $(for n in $nodes_b2b; do echo "$n:0:$rounds_b2b"; done) \
  $(for n in $nodes_paced; do echo "$n:1:$rounds_paced"; done); do
  IFS=: read -r nodes period rounds <<<"$setting"
  for rep in $(seq 1 "$repeats"); do
    run before "$before" "$nodes" "$period" "$rounds" "$rep" "${BEFORE_ARGS:-}"
    run after "$after" "$nodes" "$period" "$rounds" "$rep" "${AFTER_ARGS:-}"
  done
done

python3 - "$out" "$repeats" <<'EOF'
import glob, json, os, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name, n, p, _ = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    paced = p != "p0"
    figure = d["beacon_delay_ms"]["p50"] if paced else d["beacon_latency_ms"]["p50"]
    key = (int(n[1:]), paced)
    rows.setdefault(key, {}).setdefault(name, []).append((figure, d["messages_per_round"]))
print(f"{'nodes':>5} {'mode':<12} {'before p50 ms':>22} {'after p50 ms':>22} {'after/before':>12} {'msgs/round b->a':>16}")
for (n, paced), by in sorted(rows.items()):
    def fmt(v):
        xs = [x for x, _ in v]
        return statistics.median(xs), f"{statistics.median(xs):7.2f} ({min(xs):.2f}-{max(xs):.2f})"
    b, bs = fmt(by.get("before", [(float("nan"), 0)]))
    a, as_ = fmt(by.get("after", [(float("nan"), 0)]))
    mb = statistics.median(m for _, m in by.get("before", [(0, 0)]))
    ma = statistics.median(m for _, m in by.get("after", [(0, 0)]))
    mode = "period 1 s" if paced else "back to back"
    print(f"{n:>5} {mode:<12} {bs:>22} {as_:>22} {a / b:>12.2f} {mb:>7.1f}->{ma:<7.1f}")
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
