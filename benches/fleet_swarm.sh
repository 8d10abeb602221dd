#!/usr/bin/env bash
# A fleet's share at the size of a fleet: N members of one 8 MiB/s share
# in a single process (crates/fleet/src/swarm/), each the real plan
# making the real lease calls on the real clock, against a real
# redis-server, for N = 10, 100, 1,000 and 5,000 (or the sizes given).
# Each member's bucket is a model whose reader takes every token it is
# given, so that the machine runs one process, not thousands.
#
# Printed for each size, as BENCHMARKS.md's table: the share's lease time;
# what the members spent together over the share, over a window of four
# lease times (at least 10 s) after a warm-up as long, and what Redis
# leased meanwhile; the least and the most a member spent over an even
# split; lease scripts, Redis commands (those the scripts run included)
# and Redis's CPU over the window (INFO commandstats and INFO cpu); and
# how long a member that joins then takes until its pace over half a
# second is 90% of its part.
#
# Twice: with Redis on loopback, then 50 ms away, through shape's own
# proxy (--delay 25ms each way).
#
#   benches/fleet_swarm.sh [SIZES]        # SIZES: 10,100,1000,5000 if not given
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-10,100,1000,5000}
command -v redis-server >/dev/null || { echo "redis-server is not installed" >&2; exit 1; }
cargo build --release --quiet --bin shape
cargo test --release --quiet -p shape-fleet --lib --no-run 2>/dev/null

scratch=$(mktemp -d)
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$scratch"
}
pids=()
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
redis_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --dir "$scratch" >/dev/null &
pids+=($!)
far_port=$(free_port)
target/release/shape --quiet --listen "127.0.0.1:$far_port" --connect "127.0.0.1:$redis_port" \
    --delay 25ms &
pids+=($!)
for port in "$redis_port" "$far_port"; do
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.05
    done
done

swarm() {
    SHAPE_SWARM_REDIS=$1 SHAPE_SWARM_INFO="redis://127.0.0.1:$redis_port/swarm" \
        SHAPE_SWARM_MEMBERS=$sizes \
        cargo test --release --quiet -p shape-fleet --lib swarm::tests::bench -- --ignored --nocapture \
        2>/dev/null | grep '^|'
}
echo "Redis on loopback:"
swarm "redis://127.0.0.1:$redis_port/swarm"
echo
echo "Redis 50 ms away:"
swarm "redis://127.0.0.1:$far_port/swarm"

# Real processes, as the figures before this design were measured: N
# shapes on one 8 MiB/s share, each reading /dev/zero into /dev/null;
# Redis's lease calls, commands and CPU over 10 s after 10 s of warm-up.
processes() {
    local n=$1 shapes=() before after
    for _ in $(seq "$n"); do
        target/release/shape --quiet --share "redis://127.0.0.1:$redis_port/processes$n" \
            --rate 8MiB </dev/zero >/dev/null &
        shapes+=($!)
    done
    sleep 10
    before=$(redis-cli -p "$redis_port" info all)
    sleep 10
    after=$(redis-cli -p "$redis_port" info all)
    kill "${shapes[@]}"
    wait "${shapes[@]}" 2>/dev/null || true
    python3 - "$n" "$before" "$after" <<'PY'
import re, sys
n, before, after = sys.argv[1], sys.argv[2], sys.argv[3]
def counters(text):
    calls = {m[0]: int(m[1]) for m in re.findall(r"cmdstat_(\w+):calls=(\d+)", text)}
    cpu = sum(float(x) for x in re.findall(r"used_cpu_(?:sys|user):([\d.]+)", text))
    return sum(calls.get(c, 0) for c in ("evalsha", "eval")), sum(v for k, v in calls.items() if k != "info"), cpu
b, a = counters(before), counters(after)
print(f"| {n} | {(a[0] - b[0]) / 10:.0f} | {(a[1] - b[1]) / 10:.0f} | {(a[2] - b[2]) / 10 * 100:.1f}% |")
PY
}
echo
echo "Real processes, Redis on loopback:"
echo "| shapes | scripts a second | Redis commands a second | Redis CPU |"
echo "|---|---|---|---|"
for n in 20 100; do processes "$n"; done
