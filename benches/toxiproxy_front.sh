#!/usr/bin/env bash
# toxiproxy-server as a proxy from 127.0.0.1:$FRONT to 127.0.0.1:$ECHO
# with a delay each way and a bandwidth each way, for the probe benches
# (benches/probe_busy.py, benches/probe_under_load.go):
#
#   benches/toxiproxy_front.sh TOXIPROXY_SERVER LATENCY_MS RATE_KB
#
# toxiproxy's latency is per stream, so LATENCY_MS on each is a round trip
# of twice that; its bandwidth is in KB/s (1000 bytes).
set -euo pipefail
server=${1:?usage: toxiproxy_front.sh TOXIPROXY_SERVER LATENCY_MS RATE_KB}
latency=${2:?latency in ms}
rate=${3:?rate in KB/s}
api=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$server" -host 127.0.0.1 -port "$api" >/dev/null 2>&1 &
child=$!
trap 'kill $child 2>/dev/null' EXIT TERM INT
until curl -sf "http://127.0.0.1:$api/version" >/dev/null; do sleep 0.05; done
curl -sf "http://127.0.0.1:$api/proxies" \
    -d "{\"name\":\"front\",\"listen\":\"127.0.0.1:$FRONT\",\"upstream\":\"127.0.0.1:$ECHO\"}" >/dev/null
for stream in upstream downstream; do
    curl -sf "http://127.0.0.1:$api/proxies/front/toxics" \
        -d "{\"type\":\"latency\",\"stream\":\"$stream\",\"attributes\":{\"latency\":$latency}}" >/dev/null
    curl -sf "http://127.0.0.1:$api/proxies/front/toxics" \
        -d "{\"type\":\"bandwidth\",\"stream\":\"$stream\",\"attributes\":{\"rate\":$rate}}" >/dev/null
done
wait $child
