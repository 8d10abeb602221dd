#!/usr/bin/env bash
# The proxy on loopback: throughput without a limit, shape against socat in
# the same run, and shape's CPU seconds per GiB shaped at 200 MiB/s. Prints
# Markdown tables. Needs socat (installed with apt-get when run as root).
#
# With CONNECTIONS, the GiB are sent over that many connections at once
# (each its share), and shape runs with one event loop and with two.
#
# Beside them runs the floor (benches/splice_floor.c, built with cc when
# there is one): a thread per connection that only splices, blocking,
# nothing read, paced or decided; no proxy between two TCP sockets can
# spend less CPU than it.
#
# With TOXIPROXY naming a toxiproxy-server (../shared/toxiproxy/build.sh
# builds one), it runs beside them: a proxy made through its API, and a
# bandwidth toxic for the limit.
#
#   [SHAPE=BINARY] [TOXIPROXY=BINARY] benches/proxy.sh [GiB] [CONNECTIONS]   # default 2 GiB, 1 connection
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v socat >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq socat >/dev/null 2>&1 || true
fi
command -v socat >/dev/null || { echo "skipped: socat is not installed" >&2; exit 0; }
# SHAPE names another build to measure (an older one, for a before and
# after in one run).
if [[ -z ${SHAPE:-} ]]; then
    cargo build --release --quiet --bin shape
fi
shape=${SHAPE:-$PWD/target/release/shape}
floor=""
if command -v cc >/dev/null; then
    floor=$(mktemp -d)/splice_floor
    cc -O2 -pthread -o "$floor" benches/splice_floor.c
fi
gib=${1:-2}
connections=${2:-1}
bytes=$((gib << 30))

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# CPU seconds of every thread of a process and of the children it forked
# (socat forks one per connection), live ones from the kernel's schedstat,
# ended ones from what the parent reaped of them.
cpu_of() {
    local pid=$1 children ticks
    children=$(cat /proc/"$pid"/task/*/children 2>/dev/null)
    ticks=$(getconf CLK_TCK)
    {
        cat /proc/"$pid"/task/*/schedstat
        for child in $children; do cat /proc/"$child"/task/*/schedstat; done
    } 2>/dev/null | awk -v reaped="$(sed 's/.*) //' /proc/"$pid"/stat 2>/dev/null | awk '{print $14 + $15}')" \
        -v ticks="$ticks" '{ns += $1} END {printf "%.3f", ns / 1e9 + reaped / ticks}'
}
# Keeps the latest CPU reading of process $1 in file $2 until it exits, so
# that a proxy which ends by itself (socat) is measured too.
watch_cpu() { while [[ -d /proc/$1 ]]; do local cpu; cpu=$(cpu_of "$1"); [[ $cpu != 0.000 ]] && echo "$cpu" > "$2"; sleep 0.02; done; }
# Waits until something listens on port $1, without connecting to it (a
# probe connection would use up a one-connection listener).
wait_listening() {
    local port
    port=$(printf ':%04X' "$1")
    for _ in $(seq 500); do
        awk -v p="$port" '$2 ~ p"$" && $4 == "0A" { found = 1 } END { exit !found }' /proc/net/tcp && return
        sleep 0.01
    done
    return 1
}

# Sends $bytes through a proxy started by "$@" (which gets FRONT and SINK
# ports in the environment) and prints: seconds, proxy CPU seconds.
through() {
    export SINK FRONT
    SINK=$(free_port) FRONT=$(free_port)
    # One sink process for all the connections: it ends after the last.
    if [[ $connections == 1 ]]; then
        socat -u TCP-LISTEN:"$SINK",reuseaddr OPEN:/dev/null &
    else
        python3 - "$SINK" "$connections" <<'SINK' &
import socket, sys, threading
listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
def drain(conn):
    while conn.recv(1 << 20):
        pass
threads = [threading.Thread(target=drain, args=(listener.accept()[0],)) for _ in range(int(sys.argv[2]))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
SINK
    fi
    local sink=$!
    wait_listening "$SINK"
    bash -c "$*" &
    local proxy=$! readings
    readings=$(mktemp)
    watch_cpu "$proxy" "$readings" &
    local watcher=$!
    wait_listening "$FRONT"
    local start end cpu
    start=$(date +%s.%N)
    local senders=()
    for _ in $(seq "$connections"); do
        head -c $((bytes / connections)) /dev/zero | socat -u - TCP:127.0.0.1:"$FRONT" &
        senders+=($!)
    done
    wait "${senders[@]}"
    wait "$sink"
    end=$(date +%s.%N)
    sleep 0.1
    kill "$proxy" 2>/dev/null || true
    wait "$proxy" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    cpu=$(cat "$readings")
    rm -f "$readings"
    echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f", b - a }') $cpu"
}

echo "## Proxy on loopback, $gib GiB per run over $connections connection(s)"
echo
echo "| proxy | limit | wall time | throughput | proxy CPU s | CPU s per GiB |"
echo "| --- | --- | --- | --- | --- | --- |"
# The command line of a toxiproxy-server on a port of its own that makes
# a proxy from $FRONT to $SINK, with a bandwidth toxic of $1 KB/s if given;
# stopped with it.
toxiproxy() {
    local api cmd toxic=""
    api=$(free_port)
    if [[ -n ${1:-} ]]; then
        toxic='curl -sf -X POST 127.0.0.1:API/proxies/bench/toxics -d "{\"type\": \"bandwidth\", \"attributes\": {\"rate\": RATE}}" >/dev/null'
    fi
    cmd='BIN -host 127.0.0.1 -port API >/dev/null 2>&1 & server=$!
trap "kill $server" TERM
until curl -sf -X POST 127.0.0.1:API/proxies -d "{\"name\": \"bench\", \"listen\": \"127.0.0.1:$FRONT\", \"upstream\": \"127.0.0.1:$SINK\"}" >/dev/null; do sleep 0.05; done
TOXIC
wait'
    toxic=${toxic//RATE/${1:-}}
    cmd=${cmd//TOXIC/$toxic}
    cmd=${cmd//API/$api}
    echo "${cmd//BIN/$TOXIPROXY}"
}
row() {
    local label=$1 limit=$2 seconds cpu
    read -r seconds cpu
    awk -v l="$label" -v r="$limit" -v s="$seconds" -v c="$cpu" -v b="$bytes" -v g="$gib" \
        'BEGIN { printf "| %s | %s | %.3f s | %.1f MiB/s | %.3f | %.3f |\n", l, r, s, b / 1048576 / s, c, c / g }'
}
for round in 1 2; do
    through 'exec socat TCP-LISTEN:$FRONT,reuseaddr,fork TCP:127.0.0.1:$SINK' | row socat unlimited
    if [[ -n $floor ]]; then
        through "exec $floor \$FRONT \$SINK $connections 2>/dev/null" | row "splice floor" unlimited
    fi
    if [[ -n ${TOXIPROXY:-} ]]; then
        through "$(toxiproxy)" | row toxiproxy unlimited
    fi
    if [[ $connections -gt 1 ]]; then
        through "exec $shape --listen 127.0.0.1:\$FRONT --connect 127.0.0.1:\$SINK --loops 1" |
            row "shape, 1 loop" unlimited
        through "exec $shape --listen 127.0.0.1:\$FRONT --connect 127.0.0.1:\$SINK --loops 2" |
            row "shape, 2 loops" unlimited
    else
        through "exec $shape --listen 127.0.0.1:\$FRONT --connect 127.0.0.1:\$SINK" | row shape unlimited
    fi
done
through "exec $shape --listen 127.0.0.1:\$FRONT --connect 127.0.0.1:\$SINK --rate 200MiB" | row shape "200 MiB/s"
if [[ -n ${TOXIPROXY:-} ]]; then
    through "$(toxiproxy 204800)" | row toxiproxy "200 MiB/s"
fi
through "exec $shape --listen 127.0.0.1:\$FRONT --connect 127.0.0.1:\$SINK --rate 200MiB --delay 50ms" | row shape "200 MiB/s, --delay 50ms"
