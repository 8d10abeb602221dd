#!/usr/bin/env bash
# Many slow connections at once, shape beside the real toxiproxy-server:
# N connections, each limited to RATE (shape `--rate RATE --per-connection`;
# toxiproxy's `bandwidth` toxic at the same rate, and the same toxic posted
# to `shape --serve`), each writing five seconds' worth of bytes through
# the proxy to a local sink, all at once. The load driver is ../shared/device/proxyload.go (built here with Go); it
# prints the wall time until every connection's bytes arrived and the
# proxy's own CPU (from wait4). Five seconds is what a proxy that keeps the
# rate takes; more says it fell behind.
#
#   [SHAPE=BINARY] [AS=COMMAND] benches/many_slow.sh TOXIPROXY_SERVER [N:RATE ...]
#
# RATE is in bytes a second; the default cases are 1, 50 and 1,000
# connections at 20,000 B/s, 50 and 200 at 200,000 B/s, and 32 at
# 10,000,000 B/s. toxiproxy's rate is in units of 1,000 B/s, so the two
# are held to the same limit. Build toxiproxy-server with
# ../shared/toxiproxy/build.sh. The descriptor limit is raised for the
# largest cases (4,000 connections need 8,000 and more). With cc, each
# case ends with its floor: what the system alone spends on the sends of
# its connections' bytes in shape's chunks (a packet below 150 kB/s, else
# 10 ms of the rate), with nothing read, paced or decided
# (benches/send_floor.c).
set -euo pipefail
cd "$(dirname "$0")/.."
toxiproxy=${1:?usage: benches/many_slow.sh TOXIPROXY_SERVER [N:RATE ...]}
shift
cases=${*:-1:20000 50:20000 1000:20000 50:200000 200:200000 32:10000000}
toxiproxy=$(cd "$(dirname "$toxiproxy")" && pwd)/$(basename "$toxiproxy")
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# SHAPE names another build to hold (the issue's start, say); else this
# tree's is built. AS runs every proxy as another user, as an ordinary
# user meets them: AS="setpriv --reuid 65534 --regid 65534 --clear-groups"
# (root's pipes know no quota).
if [ -z "${SHAPE:-}" ]; then
    cargo build --release --quiet --bin shape
    SHAPE=$PWD/target/release/shape
fi
shape=$SHAPE
as=${AS:-}
scratch=$(mktemp -d)
chmod 755 "$scratch"
trap 'rm -rf "$scratch"' EXIT
CGO_ENABLED=0 go build -o "$scratch/proxyload" ../shared/device/proxyload.go
floor=
if command -v cc >/dev/null; then
    cc -O2 -o "$scratch/send_floor" benches/send_floor.c
    floor=$scratch/send_floor
fi

# toxiproxy-server starts its proxy from a file, written once proxyload has
# chosen the ports (FRONT, SINK and API in the environment); the toxic is
# posted once its API answers.
{
    echo '#!/bin/sh'
    echo "echo \"[{\\\"name\\\": \\\"load\\\", \\\"listen\\\": \\\"127.0.0.1:\$FRONT\\\", \\\"upstream\\\": \\\"127.0.0.1:\$SINK\\\"}]\" >$scratch/proxies.json"
    echo "exec $as $toxiproxy -host 127.0.0.1 -port \$API -config $scratch/proxies.json >/dev/null 2>&1"
} >"$scratch/toxiproxy.sh"
{
    head -2 "$scratch/toxiproxy.sh"
    echo "exec $as $shape -q --serve 127.0.0.1:\$API --config $scratch/proxies.json >/dev/null 2>&1"
} >"$scratch/serve.sh"
chmod +x "$scratch/toxiproxy.sh" "$scratch/serve.sh"

echo "| proxy | connections | data | wall | throughput | CPU s | CPU s per GiB | rate each |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for case in $cases; do
    conns=${case%%:*}
    rate=${case#*:}
    kib=$((rate * 5 / 1024))
    "$scratch/proxyload" -name shape -conns "$conns" -kib "$kib" -- \
        "$as $shape -q --listen 127.0.0.1:\$FRONT --connect 127.0.0.1:\$SINK --rate $rate --per-connection" |
        sed "s#\$# $rate B/s |#"
    for server in serve toxiproxy; do
        "$scratch/proxyload" -name "$server" -conns "$conns" -kib "$kib" \
            -post "http://{API}/proxies/load/toxics" \
            -body "{\"type\": \"bandwidth\", \"stream\": \"upstream\", \"attributes\": {\"rate\": $((rate / 1000))}}" -- \
            "$scratch/$server.sh" |
            sed "s#\$# $rate B/s |#"
    done
    if [ -n "$floor" ]; then
        chunk=$((rate / 100))
        [ "$rate" -lt 150000 ] && chunk=$((rate / 10 < 1500 ? rate / 10 : 1500))
        "$floor" "$conns" "$rate" "$chunk" 5
    fi
done
