#!/usr/bin/env bash
# End-to-end test of the container image (scripts/Dockerfile) and of
# `sbft-beacon deploy compose`, with real containers on a Compose network:
#
#   1. every node passes round 50, and round 50 is identical on all of them;
#   2. `sbft-beacon verify --url` against node 0 verifies every round it has;
#   3. node 0's container health check (`sbft-beacon-node health`) reports healthy;
#   4. with one node stopped, the other three go on;
#   5. with a second one cut off (`docker network disconnect`), there is no
#      progress and no fork;
#   6. after reconnecting it and restarting the stopped one, all four resume,
#      catch up and hold one chain;
#   7. on `docker stop` each node exits by itself, with 0, under 2 s;
#   8. a second network, quicknet-style (`bls-unchained-g1-rfc9380`, one round
#      a second), behind the TLS proxy of `deploy compose --tls-proxy` (nginx,
#      with a certificate from a CA made here with openssl): `verify --url
#      https://...`, `health` and `tle encrypt` / `tle decrypt` work through it
#      with `--cacert`, another CA is refused naming the server, and the proxy
#      refuses writes.
#
# It installs what is missing (Debian's docker.io, docker-compose, debootstrap,
# curl, jq, binutils, openssl), starts a dockerd when none runs (and stops it at the end), builds a
# base image once per machine with `debootstrap --variant=minbase bookworm` and
# `docker import` (our machines cannot pull images), builds the node image on
# it, and the TLS proxy's image (`scripts/Dockerfile.tls-proxy`: Debian's nginx,
# installed from the base's Debian mirror) once per machine and version of that
# file, and removes every container, network and volume it made, and its node image.
# It skips, with the reason, only where Docker cannot run at all.
#
# Prints `N passed, M failed`; exits non-zero on any failure.
# E2E_SCHEME names the signature scheme (default pedersen-bls-chained).
# E2E_MEASURE=1 also prints, for the report, at n = 4 and 16: compose up to the
# first beacon, and beacon p50 and RSS on the Compose network and in `localnet`.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
# The installed docker client has no buildx: the classic builder.
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0
BASE_IMAGE=sbft-base:bookworm
tag="$$"
IMAGE="sbft-beacon:e2e-$tag"
PROJECT="sbfte2e$tag"
PORT=$((18000 + tag % 1000))
NODES=4
# E2E_SCHEME=bls-unchained-g1-rfc9380 runs the same checks on a quicknet-style chain.
SCHEME="${E2E_SCHEME:-pedersen-bls-chained}"

passed=0
failed=0
pass() { echo "  ok    $*"; passed=$((passed + 1)); }
fail() { echo "  FAIL  $*"; failed=$((failed + 1)); }
check() {
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
note() { echo "  ..    $*"; }
skip() {
  echo "compose-e2e: skipped: $*"
  exit 0
}
die() {
  echo "compose-e2e: $*" >&2
  echo "$passed passed, $((failed + 1)) failed"
  exit 1
}

# ---- Docker: present, installed or skipped -------------------------------
[ "$(uname -s)" = Linux ] || skip "Docker containers need Linux (this is $(uname -s))"
docker_ok() { docker info >/dev/null 2>&1; }
if ! docker_ok && [ "$(id -u)" -ne 0 ]; then
  skip "no Docker daemon answers, and without root none can be installed or started"
fi
compose_cmd() {
  if docker compose version >/dev/null 2>&1; then
    echo "docker compose"
  elif command -v docker-compose >/dev/null; then
    echo "docker-compose"
  fi
}
missing=()
command -v docker >/dev/null || missing+=(docker.io)
if ! docker_ok && ! command -v dockerd >/dev/null; then missing+=(docker.io); fi
[ -n "$(compose_cmd)" ] || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v curl >/dev/null || missing+=(curl)
command -v jq >/dev/null || missing+=(jq)
command -v strip >/dev/null || missing+=(binutils)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null ||
    skip "missing ${missing[*]} and no apt-get to install them"
  [ "$(id -u)" -eq 0 ] || skip "missing ${missing[*]}, and installing needs root"
  echo "compose-e2e: installing ${missing[*]}"
  apt-get update -qq >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null 2>&1 ||
    die "apt-get install ${missing[*]} failed"
fi
COMPOSE=$(compose_cmd)
[ -n "$COMPOSE" ] || die "no docker compose after installing docker-compose"

dockerd_pid=""
dockerd_log=$(mktemp)
forward_policy=""
if ! docker_ok; then
  # dockerd sets the FORWARD policy to DROP, which (with br_netfilter) breaks
  # plain network-namespace bridges: put it back when this dockerd stops.
  forward_policy=$(iptables -S FORWARD 2>/dev/null | awk '$1 == "-P" {print $3; exit}')
  # A dockerd killed earlier may have left its pid file behind.
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  dockerd >"$dockerd_log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 120); do
    docker_ok && break
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.5
  done
  if ! docker_ok; then
    kill "$dockerd_pid" 2>/dev/null
    wait "$dockerd_pid" 2>/dev/null
    [ -z "$forward_policy" ] || iptables -P FORWARD "$forward_policy" 2>/dev/null
    skip "dockerd does not run here: $(tail -n 3 "$dockerd_log" | tr '\n' ' ')"
  fi
  echo "compose-e2e: started dockerd (pid $dockerd_pid)"
fi

# What an earlier run left behind (one killed before its clean-up; its
# containers would restart with the daemon).
stale=$(docker ps -aq --filter label=com.docker.compose.project | while read -r c; do
  docker inspect -f '{{index .Config.Labels "com.docker.compose.project"}} {{.Id}}' "$c"
done | awk '$1 ~ /^sbfte2e[0-9]/ {print $2}')
[ -z "$stale" ] || docker rm -f $stale >/dev/null 2>&1
docker network ls --format '{{.Name}}' | grep -E '^sbfte2e[0-9]+[mt]?[0-9]*_' | xargs -r docker network rm >/dev/null 2>&1
docker image ls --format '{{.Repository}}:{{.Tag}}' | grep -E '^sbft-beacon:e2e-' | xargs -r docker image rm -f >/dev/null 2>&1

work=$(mktemp -d)
net_dir="$work/net"
cleanup() {
  set +e
  for d in "$work"/net*; do
    [ -f "$d/compose.yml" ] || continue
    local p
    p=$(cat "$d/.project" 2>/dev/null) || continue
    $COMPOSE -p "$p" -f "$d/compose.yml" down -v --remove-orphans -t 2 >/dev/null 2>&1
  done
  docker image rm -f "$IMAGE" >/dev/null 2>&1
  rm -rf "$work"
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null
    for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$dockerd_pid" 2>/dev/null
    wait "$dockerd_pid" 2>/dev/null
    [ -z "$forward_policy" ] || iptables -P FORWARD "$forward_policy" 2>/dev/null
    echo "compose-e2e: stopped dockerd"
  fi
  rm -f "$dockerd_log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- Binary, base image, node image --------------------------------------
# The binary `cargo test` already built (optimised test profile), so that CI does
# not build the workspace a second time; PROFILE=release for a release image.
profile="${PROFILE:-test}"
# The image holds the slim node binary (`sbft-beacon-node`); this script drives
# the network with the lab's `sbft-beacon` (deploy, verify, tle, localnet).
echo "compose-e2e: building the $profile binaries (a no-op after cargo test)"
cargo build --profile "$profile" --quiet -p lab --bin sbft-beacon -p node-cli --bin sbft-beacon-node ||
  die "cargo build --profile $profile failed"
case "$profile" in test | dev) out="$CARGO_TARGET_DIR/debug" ;; *) out="$CARGO_TARGET_DIR/$profile" ;; esac
bin="$out/sbft-beacon"
node_bin="$out/sbft-beacon-node"

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "compose-e2e: building the base image $BASE_IMAGE (debootstrap from $mirror, once per machine)"
  root="$work/rootfs"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -n 5 "$work/debootstrap.log")"
  # What debian:bookworm-slim leaves out too: documentation, manuals, locales.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/*
  tar -C "$root" -c . | docker import - "$BASE_IMAGE" >/dev/null || die "docker import failed"
  rm -rf "$root"
fi

ctx="$work/context"
mkdir -p "$ctx"
# Without debug info (symbols stay, for backtraces).
strip --strip-debug -o "$ctx/sbft-beacon-node" "$node_bin" || die "strip failed"
docker build -q -f scripts/Dockerfile --build-arg "BASE=$BASE_IMAGE" -t "$IMAGE" "$ctx" >"$work/build.log" 2>&1 ||
  die "docker build failed: $(tail -n 5 "$work/build.log")"
rm -rf "$ctx"
# The TLS proxy's image: once per machine and version of its Dockerfile.
PROXY_IMAGE="sbft-beacon-tls-proxy:$(sha256sum scripts/Dockerfile.tls-proxy | cut -c1-12)"
if ! docker image inspect "$PROXY_IMAGE" >/dev/null 2>&1; then
  echo "compose-e2e: building the TLS proxy's image $PROXY_IMAGE (Debian's nginx, once per machine)"
  mkdir -p "$work/proxy-context"
  docker build -q -f scripts/Dockerfile.tls-proxy --build-arg "BASE=$BASE_IMAGE" -t "$PROXY_IMAGE" "$work/proxy-context" >"$work/proxy-build.log" 2>&1 ||
    die "docker build of the TLS proxy failed: $(tail -n 5 "$work/proxy-build.log")"
fi
image_mb=$(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.1f", $1 / 1048576}')
base_mb=$(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.1f", $1 / 1048576}')
note "image $IMAGE: $image_mb MiB (base $base_mb MiB)"

# ---- Helpers ---------------------------------------------------------------
# `up DIR PROJECT`: `docker compose up -d` of the deployment in DIR.
up() {
  echo "$2" >"$1/.project"
  $COMPOSE -p "$2" -f "$1/compose.yml" up -d >"$work/up.log" 2>&1
}
dc() { $COMPOSE -p "$PROJECT" -f "$net_dir/compose.yml" "$@"; }
# Container ID of node I.
cid() { dc ps -q "node-$1"; }
# Node I's API on the host: its address on the Compose network (looked up
# once; `forget_api I` after its networks change).
declare -A apis=()
api() {
  if [ -z "${apis[$1]:-}" ]; then
    local ip
    ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$(cid "$1")" | awk '{print $1}')
    apis[$1]="http://$ip:8000"
  fi
  echo "${apis[$1]}"
}
forget_api() { unset "apis[$1]"; }
latest() { curl -sf --max-time 3 "$(api "$1")/public/latest" | jq -r '.round // 0' 2>/dev/null || echo 0; }
beacon() { curl -sf --max-time 3 "$(api "$1")/public/$2"; }
# `wait_round I R SECS`: node I serves round R within SECS seconds.
wait_round() {
  local end=$((SECONDS + $3))
  while [ "$(latest "$1")" -lt "$2" ]; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}
# `same_round R I...`: round R is served, and identical, on every node I.
same_round() {
  local r=$1 first="" b
  shift
  for i in "$@"; do
    b=$(beacon "$i" "$r") || return 1
    [ -n "$b" ] || return 1
    if [ -z "$first" ]; then first=$b; elif [ "$b" != "$first" ]; then return 1; fi
  done
}
# `same_of PATH I...`: GET PATH answers, identically, on every node I.
same_of() {
  local path=$1 first="" b
  shift
  for i in "$@"; do
    b=$(curl -sf --max-time 3 "$(api "$i")$path") || return 1
    if [ -z "$first" ]; then first=$b; elif [ "$b" != "$first" ]; then return 1; fi
  done
}
# `same_chain TO I...`: one chain up to round TO on every node I: the same
# chain info, the same beacon and block at TO (each beacon signs its
# predecessor's signature and each block names its parent's digest, so equal
# heads mean equal histories), and the same beacons at 10 rounds drawn at random.
same_chain() {
  local to=$1 r
  shift
  same_of /info "$@" || return 1
  same_of "/blocks/$to" "$@" || return 1
  same_round "$to" "$@" || return 1
  for r in $(shuf -i 1-"$to" -n 10); do same_round "$r" "$@" || return 1; done
}
# `stop_node I`: after `docker stop`, the node exits by itself (exit 0, not
# killed) under 2 s after its SIGTERM. The node's own time is measured to the
# moment Docker saw its process exit (`State.FinishedAt`); what `docker stop`
# takes on top (the container's teardown: mounts, the network endpoint's
# iptables rules) is Docker's, is printed, and is bounded only by the stop's
# 10 s timeout (a node still running then would be killed and exit 137).
stop_times=()
stop_node() {
  local c t0 t1 ms code finished node_ms
  c=$(cid "$1")
  t0=$(date +%s%N)
  docker stop -t 10 "$c" >/dev/null || return 1
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  code=$(docker inspect -f '{{.State.ExitCode}}' "$c")
  finished=$(date -d "$(docker inspect -f '{{.State.FinishedAt}}' "$c")" +%s%N 2>/dev/null) || finished=$t1
  node_ms=$(((finished - t0) / 1000000))
  stop_times+=("node-$1:${node_ms}ms(docker-stop:${ms}ms)/exit$code")
  if [ "$node_ms" -lt 2000 ] && [ "$code" = 0 ]; then return 0; fi
  # What the node did while it stopped (timestamps in its log).
  echo "  ..    node-$1's last log lines:"
  docker logs --tail 15 "$c" 2>&1 | sed 's/^/          /'
  return 1
}
# Latency of rounds 2..TO (ms) on node I, one a line, from /stats/rounds.
latencies() {
  local next=2 page last
  while [ "$next" -le "$2" ]; do
    page=$(curl -sf --max-time 5 "$(api "$1")/stats/rounds?from=$next") || return
    last=$(echo "$page" | jq -r 'last.round // empty')
    [ -n "$last" ] || return
    echo "$page" | jq -r ".[] | select(.round <= $2) | .latency_ms"
    next=$((last + 1))
  done
}
p50() { sort -g | awk '{v[NR] = $1} END {if (NR) printf "%.2f", v[int((NR + 1) / 2)]; else print "n/a"}'; }
# The node's RSS: the largest sbft-beacon-node process in the container (the health
# check runs a second, short-lived one; `comm` keeps 15 characters of the name).
rss_of() { docker top "$1" -o pid,rss,comm | awk '$3 == "sbft-beacon-nod" && $2 > m {m = $2} END {printf "%.0f ", m / 1024}'; }

# ---- The network -------------------------------------------------------------
echo "compose-e2e: $NODES nodes, scheme $SCHEME (project $PROJECT)"
"$bin" deploy compose --nodes "$NODES" --scheme "$SCHEME" --out "$net_dir" --image "$IMAGE" --publish-http "$PORT" >"$work/deploy.log" 2>&1 ||
  die "deploy compose failed: $(cat "$work/deploy.log")"
t0=$(date +%s%N)
up "$net_dir" "$PROJECT" || die "compose up failed: $(tail -n 5 "$work/up.log")"
if wait_round 0 1 120; then
  note "compose up to first beacon: $((($(date +%s%N) - t0) / 1000000)) ms"
fi

all=$(seq 0 $((NODES - 1)))
ok=true
for i in $all; do wait_round "$i" 50 180 || ok=false; done
check "every node passes round 50" $ok
check "round 50 is identical on every node" same_round 50 $all
lat=$(for i in $all; do latencies "$i" 50; done | p50)
note "beacon p50 on the Compose network (rounds 2..50, every node): $lat ms"
note "RSS per node at round 50 (MiB): $(for i in $all; do rss_of "$(cid "$i")"; done)"
# (The redirection is inside a function: on `check` itself it took the result line.)
verify_node0() { "$bin" verify --url "http://127.0.0.1:$PORT" >"$work/verify.log" 2>&1; }
check "verify --url node 0 (published on 127.0.0.1:$PORT) verifies every round" verify_node0
health_ok() {
  local end=$((SECONDS + 60))
  while [ $SECONDS -lt $end ]; do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$(cid 0)")" = healthy ] && return 0
    sleep 1
  done
  return 1
}
check "node 0's container health check reports healthy" health_ok

# One node stopped: the other three go on.
check "docker stop node-3: it exits 0 under 2 s" stop_node 3
r=$(latest 0)
ok=true
for i in 0 1 2; do wait_round "$i" $((r + 20)) 60 || ok=false; done
check "without node-3 the other three go on (20 more rounds)" $ok

# A second node cut off: no progress, no fork.
network="${PROJECT}_beacon"
docker network disconnect "$network" "$(cid 2)" || fail "docker network disconnect"
sleep 3
a0=$(latest 0)
a1=$(latest 1)
sleep 5
b0=$(latest 0)
b1=$(latest 1)
check "with node-2 cut off too, no progress ($a0 -> $b0, $a1 -> $b1)" test "$a0" = "$b0" -a "$a1" = "$b1"
low=$((b0 < b1 ? b0 : b1))
check "no fork while stalled (rounds 1..$low identical on node-0 and node-1)" same_chain "$low" 0 1

# Reconnect, restart: all four resume and catch up.
docker network connect --alias node-2 "$network" "$(cid 2)" || fail "docker network connect"
forget_api 2
docker start "$(cid 3)" >/dev/null || fail "docker start node-3"
target=$(($(latest 0) + 20))
ok=true
for i in $all; do wait_round "$i" "$target" 120 || ok=false; done
check "after reconnecting and restarting, all four pass round $target" $ok
check "one chain on all four (rounds 1..$target)" same_chain "$target" $all

# docker stop of each node: under 2 s, exit 0.
ok=true
for i in $all; do stop_node "$i" || ok=false; done
check "docker stop of every node: each exits 0 under 2 s" $ok
note "docker stop: ${stop_times[*]}"
dc down -v --remove-orphans -t 2 >/dev/null 2>&1

# ---- https: a quicknet-style network behind the TLS proxy ---------------------
# A CA made here, a server certificate for 127.0.0.1 and localhost that it
# signs, and another CA that the clients must refuse.
tls="$work/tls"
mkdir -p "$tls"
make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=sbft-beacon e2e $1" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$tls/$1.key" -out "$tls/$1.pem"
}
{
  make_ca ca && make_ca other-ca &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
      -keyout "$tls/key.pem" -out "$tls/server.csr" &&
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=critical,CA:FALSE" \
      "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$tls/server.ext" &&
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
      -days 2 -extfile "$tls/server.ext" -out "$tls/cert.pem"
} >"$work/openssl.log" 2>&1 || die "making the test certificates failed: $(tail -n 5 "$work/openssl.log")"
TLS_PORT=$((PORT + 1000))
tls_dir="$work/net-tls"
TLS_PROJECT="${PROJECT}t"
echo "compose-e2e: 4 nodes, bls-unchained-g1-rfc9380, one round a second, behind the TLS proxy on 127.0.0.1:$TLS_PORT"
"$bin" deploy compose --nodes 4 --scheme bls-unchained-g1-rfc9380 --period 1 --genesis-delay 10 \
  --out "$tls_dir" --image "$IMAGE" --tls-proxy "$TLS_PORT" --tls-cert "$tls/cert.pem" \
  --tls-key "$tls/key.pem" --tls-image "$PROXY_IMAGE" >"$work/deploy-tls.log" 2>&1 ||
  die "deploy compose --tls-proxy failed: $(cat "$work/deploy-tls.log")"
up "$tls_dir" "$TLS_PROJECT" || die "compose up (TLS) failed: $(tail -n 5 "$work/up.log")"
https_url="https://127.0.0.1:$TLS_PORT"
https_latest() { curl -sf --max-time 3 --cacert "$tls/ca.pem" "$https_url/public/latest" | jq -r '.round // 0' 2>/dev/null || echo 0; }
wait_https_round() {
  local end=$((SECONDS + $2))
  while [ "$(https_latest)" -lt "$1" ]; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}
check "the TLS proxy serves round 5 over https (curl --cacert)" wait_https_round 5 120
verify_https() { "$bin" verify --url "$https_url" --cacert "$tls/ca.pem" >"$work/verify-https.log" 2>&1; }
check "verify --url $https_url --cacert verifies every round" verify_https
health_https() { "$bin" health --url "$https_url" --cacert "$tls/ca.pem" >/dev/null 2>&1; }
check "health --url $https_url --cacert reports healthy" health_https
refused_https() {
  local e
  e=$("$bin" verify --url "$https_url" --cacert "$tls/other-ca.pem" 2>&1) && return 1
  echo "$e" | grep -q "^Error: 127.0.0.1:$TLS_PORT: the server's TLS certificate is refused"
}
check "verify --url with another CA is refused, naming 127.0.0.1:$TLS_PORT and the reason" refused_https
writes_refused() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 --cacert "$tls/ca.pem" -X POST --data x "$https_url/tx")" = 403 ]
}
check "the proxy refuses writes (POST /tx: 403)" writes_refused
echo "a secret for a round to come" >"$work/secret.txt"
tle_https() {
  local target locked="$work/secret.age" opened="$work/secret.out"
  target=$(($(https_latest) + 5))
  "$bin" tle encrypt --round "$target" --url "$https_url" --cacert "$tls/ca.pem" -o "$locked" "$work/secret.txt" 2>"$work/tle.log" || return 1
  # Not out yet: refused, nothing written.
  if [ "$(https_latest)" -lt "$target" ]; then
    "$bin" tle decrypt --url "$https_url" --cacert "$tls/ca.pem" -o "$opened" "$locked" 2>>"$work/tle.log" && return 1
    grep -q "not out yet" "$work/tle.log" && [ ! -e "$opened" ] || return 1
  fi
  wait_https_round "$target" 30 || return 1
  "$bin" tle decrypt --url "$https_url" --cacert "$tls/ca.pem" -o "$opened" "$locked" 2>>"$work/tle.log" || return 1
  cmp -s "$work/secret.txt" "$opened"
}
check "tle encrypt and tle decrypt through $https_url" tle_https
$COMPOSE -p "$TLS_PROJECT" -f "$tls_dir/compose.yml" down -v --remove-orphans -t 2 >/dev/null 2>&1

# ---- Measurements for the report (E2E_MEASURE=1) ------------------------------
if [ "${E2E_MEASURE:-0}" = 1 ]; then
  for n in 4 16; do
    d="$work/net-$n"
    p="${PROJECT}m$n"
    "$bin" deploy compose --nodes "$n" --out "$d" --image "$IMAGE" >/dev/null 2>&1 || die "deploy $n"
    t0=$(date +%s%N)
    up "$d" "$p" || die "compose up $n failed"
    c0=$($COMPOSE -p "$p" -f "$d/compose.yml" ps -q node-0)
    ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$c0" | awk '{print $1}')
    until [ "$(curl -sf --max-time 3 "http://$ip:8000/public/latest" | jq -r '.round // 0' 2>/dev/null || echo 0)" -ge 1 ]; do
      sleep 0.1
      [ $(($(date +%s%N) - t0)) -lt 300000000000 ] || break
    done
    note "n = $n: compose up to first beacon $((($(date +%s%N) - t0) / 1000000)) ms"
    # Beacon p50 over rounds 2..50 on every node, as localnet measures it.
    ids=$($COMPOSE -p "$p" -f "$d/compose.yml" ps -q)
    end=$((SECONDS + 180))
    for c in $ids; do
      ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$c" | awk '{print $1}')
      until [ "$(curl -sf --max-time 3 "http://$ip:8000/public/latest" | jq -r '.round // 0' 2>/dev/null || echo 0)" -ge 50 ]; do
        if [ $SECONDS -ge $end ]; then
          note "n = $n: $(docker inspect -f '{{.Name}}' "$c") has no round 50 after 180 s (restarts: $(docker inspect -f '{{.RestartCount}}' "$c"))"
          break
        fi
        sleep 0.2
      done
    done
    lat=$(for c in $ids; do
      ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$c" | awk '{print $1}')
      curl -sf --max-time 5 "http://$ip:8000/stats/rounds?from=2" | jq -r '.[] | select(.round <= 50) | .latency_ms'
    done | p50)
    note "n = $n: beacon p50 on the Compose network $lat ms; RSS per node (MiB): $(for c in $ids; do rss_of "$c"; done)"
    $COMPOSE -p "$p" -f "$d/compose.yml" down -v --remove-orphans -t 2 >/dev/null 2>&1
    note "n = $n: localnet on this machine: $("$bin" localnet --nodes "$n" --rounds 50 --json | jq -r '"beacon p50 \(.beacon_latency_ms.p50) ms, RSS end \(.soak_rss_mb.end)"')"
  done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
