#!/usr/bin/env bash
# Thousands of signers, measured (issue 33's table): on this machine, the
# simulator's committee DKG and rounds at 1,024 members with 1, 2, 8 and 16
# threads (as many as the machine has; the same trace hash at every thread
# count, or this script fails), 4,096 members saved to and loaded from a DKG
# snapshot (the same rounds, or this script fails), and 16,384 members
# (`huge`) where the machine has the cores and memory for it.
#
#   scripts/thousands.sh [OUT_DIR]          # default: target/thousands
#   SBFT_BIN=path/to/sbft-beacon scripts/thousands.sh   # skip the build
#   HUGE=1 scripts/thousands.sh             # run 16,384 members anyway
#   MEMBERS=256 SNAPSHOT_MEMBERS=1024 scripts/thousands.sh   # smaller runs
#
# Prints one Markdown table (members, threads, DKG wall, rounds wall, wall,
# CPU, peak RSS, DKG messages per member, the DKG's projected wall and
# speed-up on 16 threads from `host_parallelism`, trace hash), each run's
# largest serial parts, and writes each run's report (`--json`) and
# `time -v` output under OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/thousands}"
mkdir -p "$out"
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (GNU time)" >&2; exit 2; }
bin="${SBFT_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release -p lab >&2
  bin="${CARGO_TARGET_DIR:-target}/release/sbft-beacon"
fi
cores=$(nproc)
mem_gb=$(awk '/MemTotal/ {printf "%d", $2 / 1048576}' /proc/meminfo)
echo "machine: $cores cores, $mem_gb GiB, $(uname -m); $("$bin" --version 2>/dev/null || echo sbft-beacon)" >&2

# run NAME ARGS...: one simulation, its report and its resources.
run() {
  local name="$1"
  shift
  echo "running $name: sim $*" >&2
  /usr/bin/time -v -o "$out/$name.time" "$bin" sim "$@" --json "$out/$name.json" \
    >"$out/$name.log" 2>&1 || { echo "$name failed: see $out/$name.log" >&2; exit 1; }
}

rows=()
for t in 1 2 8 16; do
  [ "$t" -le "$cores" ] || continue
  run "threads-t$t" --config large --nodes "${MEMBERS:-1024}" --rounds 3 --threads "$t"
  rows+=("threads-t$t")
done
snapshot=(--config large --nodes "${SNAPSHOT_MEMBERS:-4096}" --threads "$cores")
run snapshot-save "${snapshot[@]}" --save-dkg "$out/large.dkg"
run snapshot-load "${snapshot[@]}" --load-dkg "$out/large.dkg"
rows+=(snapshot-save snapshot-load)
if [ "${HUGE:-0}" = 1 ] || { [ "$cores" -ge 16 ] && [ "$mem_gb" -ge 40 ]; }; then
  run huge --config huge --threads "$cores"
  rows+=(huge)
else
  echo "skipping 16,384 members: needs 16 cores and 40 GiB (HUGE=1 runs it anyway)" >&2
fi

python3 - "$out" "${rows[@]}" <<'EOF'
import json, re, sys
out, names = sys.argv[1], sys.argv[2:]
def resources(name):
    text = open(f"{out}/{name}.time").read()
    get = lambda label: float(re.search(re.escape(label) + r":\s*([0-9.:]+)", text).group(1))
    return get("User time (seconds)") + get("System time (seconds)"), get("Maximum resident set size (kbytes)") / 1e6
print("| run | members | threads | DKG wall s | rounds wall s | wall s | CPU s | peak RSS GB | DKG msgs/member | DKG projected on 16 threads (host_parallelism) | trace hash |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
hashes = {}
for name in names:
    r = json.load(open(f"{out}/{name}.json"))
    cpu, rss = resources(name)
    threads = re.search(r"-t(\d+)$", name)
    if threads:
        hashes[name] = r["trace_hash"]
    p16 = next(p for p in r["host_parallelism"]["dkg"]["projected"] if p["threads"] == 16)
    print(f"| {name} | {r['nodes']} | {threads.group(1) if threads else 'all'} | {r['dkg_wall_s']:.1f} | "
          f"{r['rounds_wall_s']:.1f} | {r['wall_s']:.1f} | {cpu:.0f} | {rss:.2f} | "
          f"{r['dkg_messages_per_member']:.0f} | {p16['wall_s']:.1f} s ({p16['speedup']:.1f}x) | {r['trace_hash'][:8]}… |")
if len(set(hashes.values())) > 1:
    print("trace hashes differ between thread counts:", hashes, file=sys.stderr)
    sys.exit(1)
save, load = (json.load(open(f"{out}/snapshot-{k}.json")) for k in ("save", "load"))
if save.get("rounds_trace_hash") != load.get("rounds_trace_hash"):
    print("the snapshot's rounds differ from the saving run's", file=sys.stderr)
    sys.exit(1)
if hashes:
    base = json.load(open(f"{out}/{min(hashes, key=lambda n: int(n.rsplit('t', 1)[1]))}.json"))["dkg_wall_s"]
    for name in hashes:
        r = json.load(open(f"{out}/{name}.json"))
        print(f"{name}: DKG {base / r['dkg_wall_s']:.2f}x faster than with 1 thread", file=sys.stderr)
for name in names:
    top = json.load(open(f"{out}/{name}.json"))["host_parallelism"]["serial_top"]
    parts = "; ".join(f"{c['name']} {c['s']:.2f} s" for c in top)
    print(f"{name}: largest serial parts: {parts}", file=sys.stderr)
EOF
