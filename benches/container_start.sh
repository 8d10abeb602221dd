#!/usr/bin/env bash
# Start time of toxiproxy images: from `podman run` to /version answering
# on the published port, RUNS times each, for BENCHMARKS.md. Usage:
#
#   benches/container_start.sh IMAGE [IMAGE...]      # RUNS=10 by default
#
# with container/build.sh's image (and, to hold it beside the real one, an
# image of toxiproxy-server laid out the same way).
set -euo pipefail
runs=${RUNS:-10}
for image in "$@"; do
    times=()
    for _ in $(seq "$runs"); do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        start=$(date +%s%N)
        id=$(podman run -d -p "127.0.0.1:$port:8474" "$image")
        until curl -sf "http://127.0.0.1:$port/version" >/dev/null; do sleep 0.005; done
        end=$(date +%s%N)
        podman rm -f -t 0 "$id" >/dev/null
        times+=($(( (end - start) / 1000000 )))
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    echo "$image: median $(sed -n "$(( (runs + 1) / 2 ))p" <<<"$sorted") ms, least $(head -1 <<<"$sorted") ms, most $(tail -1 <<<"$sorted") ms over $runs runs"
done
