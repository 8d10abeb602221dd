#!/usr/bin/env bash
# A fleet's share at the size of a fleet: N members of one 8 MiB/s share
# in a single process (src/control/fleet/swarm.rs), each the real plan
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
cargo test --release --quiet --bin shape --no-run 2>/dev/null

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
        cargo test --release --quiet --bin shape swarm::tests::bench -- --ignored --nocapture \
        2>/dev/null | grep '^|'
}
echo "Redis on loopback:"
swarm "redis://127.0.0.1:$redis_port/swarm"
echo
echo "Redis 50 ms away:"
swarm "redis://127.0.0.1:$far_port/swarm"
