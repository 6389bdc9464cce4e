#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/) for a while each (issue 37): builds them
# once, then runs each for SECONDS (default 600), keeping its corpus in
# fuzz/corpus/TARGET/, its crashing inputs in fuzz/artifacts/TARGET/ and its full
# log in fuzz/logs/TARGET.log. Prints one line per target as it ends (runs,
# corpus size, crash) and a table of all of them at the end; a crash does not
# stop the other targets, and the script exits 1 if any target crashed or failed.
# Without a nightly toolchain it says so and exits 0 (skipped); without
# cargo-fuzz it installs it (FUZZ_NO_INSTALL=1: skip instead).
#
#   scripts/fuzz.sh                    # every target, 10 minutes each
#   scripts/fuzz.sh 30                 # a smoke test: 30 s each
#   FUZZ_TARGETS="admission envelope" scripts/fuzz.sh 3600
#   FUZZ_ARGS="-timeout=10 -rss_limit_mb=4096" scripts/fuzz.sh   # more libFuzzer flags
#
# A crash replays with `cd fuzz && cargo +nightly fuzz run -O TARGET ARTIFACT`;
# keep the input as a regression in fuzz/regressions/TARGET-<hash>.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

secs="${1:-600}"
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: scripts/fuzz.sh [SECONDS]   (SECONDS per target, a positive integer; got '$secs')" >&2
    exit 2
fi

skip() {
    echo "fuzz: skipped: $*"
    exit 0
}

command -v cargo >/dev/null 2>&1 || skip "cargo is not installed"
cargo +nightly --version >/dev/null 2>&1 ||
    skip "no nightly toolchain (cargo-fuzz needs one: rustup toolchain install nightly)"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    if [[ "${FUZZ_NO_INSTALL:-0}" == 1 ]]; then
        skip "cargo-fuzz is not installed (cargo install cargo-fuzz)"
    fi
    echo "fuzz: cargo-fuzz is not installed: cargo install cargo-fuzz"
    cargo install cargo-fuzz || skip "cargo-fuzz could not be installed"
    cargo +nightly fuzz --version >/dev/null 2>&1 || skip "cargo-fuzz does not run after installing it"
fi
echo "fuzz: $(cargo +nightly --version), $(cargo +nightly fuzz --version)"

cd "$root/fuzz"
mapfile -t all < <(cargo +nightly fuzz list)
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
    for t in "${targets[@]}"; do
        if ! printf '%s\n' "${all[@]}" | grep -qxF -- "$t"; then
            echo "fuzz: no target '$t' (targets: ${all[*]})" >&2
            exit 2
        fi
    done
else
    targets=("${all[@]}")
fi
if [[ ${#targets[@]} -eq 0 ]]; then
    echo "fuzz: no targets" >&2
    exit 2
fi
read -r -a extra <<<"${FUZZ_ARGS:-}"

echo "fuzz: building ${#all[@]} targets (cargo +nightly fuzz build -O)"
start=$SECONDS
cargo +nightly fuzz build -O
echo "fuzz: built in $((SECONDS - start)) s; running ${#targets[@]} targets for $secs s each"

mkdir -p logs
names=() runs=() times=() corpora=() results=() failed=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="logs/$t.log"
    marker="$(mktemp)"
    echo "fuzz: $t: running for $secs s (log: fuzz/$log)"
    start=$SECONDS
    rc=0
    cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$secs" -print_final_stats=1 \
        "${extra[@]}" >"$log" 2>&1 || rc=$?
    took=$((SECONDS - start))

    # Executions: libFuzzer's final "Done N runs in S second(s)", else its final
    # stats (also printed at a crash), else its last "#N" status line.
    n="$(sed -n 's/^Done \([0-9][0-9]*\) runs in .*/\1/p' "$log" | tail -n 1)"
    if [[ -z "$n" ]]; then
        n="$(sed -n 's/^stat::number_of_executed_units: *\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)"
    fi
    if [[ -z "$n" ]]; then
        n="$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' "$log" | tail -n 1)"
    fi
    n="${n:-?}"
    corpus="$(find "corpus/$t" -type f | wc -l | tr -d ' ')"

    # A crash: the input libFuzzer wrote ("Test unit written to PATH"), else any
    # artifact newer than this run.
    artifact="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
    if [[ -z "$artifact" ]]; then
        artifact="$(find "artifacts/$t" -type f -newer "$marker" | head -n 1)"
    fi
    rm -f "$marker"
    if [[ -n "$artifact" ]]; then
        artifact="$(realpath --relative-to="$root" "$artifact" 2>/dev/null || echo "$artifact")"
        result="CRASH $artifact"
    elif [[ $rc -ne 0 ]]; then
        result="FAILED (exit $rc, see fuzz/$log)"
    else
        result="ok"
    fi
    if [[ "$result" != ok ]]; then
        failed+=("$t")
    fi
    echo "fuzz: $t: $n runs in $took s, corpus $corpus files, $result"
    if [[ "$result" != ok ]]; then
        # The panic (or sanitizer) message, for the record.
        grep -m 1 -A 1 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" | sed 's/^/fuzz:     /' || true
    fi
    names+=("$t") runs+=("$n") times+=("$took") corpora+=("$corpus") results+=("$result")
done

echo
printf '%-18s %12s %6s %8s  %s\n' target runs secs corpus result
for i in "${!names[@]}"; do
    printf '%-18s %12s %6s %8s  %s\n' "${names[$i]}" "${runs[$i]}" "${times[$i]}" "${corpora[$i]}" "${results[$i]}"
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo
    echo "fuzz: ${#failed[@]} of ${#names[@]} targets crashed or failed: ${failed[*]}"
    echo "fuzz: replay with: cd fuzz && cargo +nightly fuzz run -O TARGET ARTIFACT"
    exit 1
fi
echo
echo "fuzz: all ${#names[@]} targets ran without a crash"
