#!/usr/bin/env bash
# One GiB through a shape proxy run as uid 65534, between two shapes of
# the same build (the sink accepts one connection, the client sends), as
# one process for farm-bench to time and to pair against another build:
#
#   farm-bench -n 20 --vs "benches/proxy_pair.sh OLD" -- benches/proxy_pair.sh NEW [RATE]
#
# Run as root (setpriv drops to uid 65534); BUILD must be readable by it.
set -e
B=$1; RATE=${2:-}
d=$(mktemp -d); chmod 777 $d
U="setpriv --reuid 65534 --regid 65534 --clear-groups"
$U $B --progress none --listen 127.0.0.1:0 >/dev/null 2>$d/sink &
sink=$!
until grep -q 'listening on' $d/sink 2>/dev/null; do sleep 0.01; done
sp=$(grep -o '127.0.0.1:[0-9]*' $d/sink | head -1)
$U $B --progress none --listen 127.0.0.1:0 --connect $sp ${RATE:+--rate $RATE} 2>$d/proxy &
proxy=$!
until grep -q 'listening on' $d/proxy 2>/dev/null; do sleep 0.01; done
pp=$(grep -o '127.0.0.1:[0-9]*' $d/proxy | head -1)
head -c 1G /dev/zero | $U $B --progress none --connect $pp
wait $sink
kill $proxy; wait $proxy 2>/dev/null || true
rm -rf $d
