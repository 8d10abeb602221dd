#!/usr/bin/env bash
# A fleet's share in Redis, measured: a real redis-server on a Unix socket
# of a scratch directory, "machines" that are shapes with runtime
# directories of their own (so they cannot meet through a local share),
# and distance put between them and Redis by shape's own proxy (--delay,
# half the round trip each way).
#
#   1. 2 and 4 shapes on an 8 MiB/s share at round trips of 0, 20, 50, 100
#      and 200 ms: each one's rate and part, its CV per 100 ms and per
#      10 ms, its empty 100 ms windows, and the total (benches/fleet_members.py);
#   2. 4 shapes at 400 MiB/s: the total, and Redis's lease calls a second;
#   3. two shapes on an 8 MiB/s share that hold the data while Redis is
#      away (--share-fallback block), Redis killed and started again: their
#      rate per 100 ms from the restart;
#   4. how long a shape takes to exit after its input ends, with Redis
#      frozen (SIGSTOP) and with Redis dead;
#   5. how long a --remote rate change takes to reach every shape.
#
#   benches/fleet.sh [distance] [calls] [restart] [exit] [change]   # all when none is named
#
# It installs redis-server with apt-get if root and missing.
set -euo pipefail
sections=${*:-distance calls restart exit change}
wanted() { [[ " $sections " == *" $1 "* ]]; }
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null && [[ $(id -u) == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null 2>&1 || true
fi
command -v redis-server >/dev/null || { echo "redis-server is not installed" >&2; exit 1; }
cargo build --release --quiet --bin shape
shape=$PWD/target/release/shape
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$scratch"' EXIT
socket=$scratch/redis.sock
start_redis() {
    redis-server --port 0 --unixsocket "$socket" --save '' --appendonly no >/dev/null &
    redis_pid=$!
    until [[ -S $socket ]]; do sleep 0.05; done
}
start_redis
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 1. Distance.
if wanted distance; then
echo "| round trip | member | rate | part / even part | CV per 100 ms | CV per 10 ms | empty 100 ms windows |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for members in 2 4; do
    for rtt in 0 20 50 100 200; do
        share=redis+unix://$socket/far$members$rtt
        proxy=
        if [[ $rtt != 0 ]]; then
            port=$(free_port)
            "$shape" --listen "127.0.0.1:$port" --connect "unix:$socket" --delay "$((rtt / 2))ms" -q &
            proxy=$!
            sleep 0.3
            share=redis://127.0.0.1:$port/far$members$rtt
        fi
        python3 benches/fleet_members.py --shape "$shape" --share "$share" --rate 8MiB \
            --members "$members" --seconds 10 --skip 4 --label "$rtt ms, $members shapes"
        [[ -z $proxy ]] || kill "$proxy"
    done
done
echo
fi

# 2. Redis's calls at 400 MiB/s.
if wanted calls; then
redis-cli -s "$socket" config resetstat >/dev/null
python3 benches/fleet_members.py --shape "$shape" --share "redis+unix://$socket/fast" \
    --rate 400MiB --members 4 --seconds 6 --skip 1.5 --label "400 MiB/s" | tail -1
calls=$(redis-cli -s "$socket" info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
echo "400 MiB/s, 4 shapes: $calls lease calls (EVALSHA) in 6 s: $((calls / 6)) a second"
echo
fi

# 3. Back to full rate after a restart: what arrived per 100 ms.
if wanted restart; then
for machine in a b; do
    mkdir -m 700 -p "$scratch/$machine"
    XDG_RUNTIME_DIR=$scratch/$machine "$shape" --share "redis+unix://$socket/back" --rate 8MiB \
        --share-fallback block -q </dev/zero |
        python3 -c '
import sys, time
while True:
    chunk = sys.stdin.buffer.read1(1 << 20)
    if not chunk:
        break
    print(f"{time.monotonic():.4f} {len(chunk)}", flush=True)
' >"$scratch/arrivals.$machine" &
done
sleep 2
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
sleep 1
start_redis
python3 -c 'import time; print(time.monotonic())' >"$scratch/restarted"
sleep 2
pkill -f "share redis+unix://$socket/back" || true
sleep 0.3
python3 - "$scratch/restarted" "$scratch/arrivals.a" "$scratch/arrivals.b" <<'PY'
import sys
restarted = float(open(sys.argv[1]).read())
windows = [0] * 20
for name in sys.argv[2:]:
    for line in open(name):
        t, n = map(float, line.split())
        slot = int((t - restarted) * 10)
        if 0 <= slot < len(windows):
            windows[slot] += n
print("2 shapes on 8 MiB/s holding while Redis was away; MiB/s in all per 100 ms from the moment redis-server was started again:")
print(" ".join(f"{w * 10 / 1048576:.2f}" for w in windows))
PY
echo
fi

# 4. Exit after the last byte, with Redis frozen and with Redis dead.
if wanted exit; then
for state in frozen dead; do
    for run in 1 2 3; do
        rm -f "$scratch/input"
        mkfifo "$scratch/input"
        "$shape" --share "redis+unix://$socket/leave" --rate 8MiB -q <"$scratch/input" >/dev/null &
        member=$!
        exec {feed}>"$scratch/input"
        head -c 65536 /dev/zero >&"$feed"
        sleep 0.5
        if [[ $state == frozen ]]; then kill -STOP "$redis_pid"; else kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; fi
        sleep 0.3
        closed=$(date +%s%N)
        exec {feed}>&-
        wait "$member"
        ended=$(date +%s%N)
        echo "Redis $state: exit $(((ended - closed) / 1000000)) ms after the input ended"
        if [[ $state == frozen ]]; then kill -CONT "$redis_pid"; else start_redis; fi
    done
done
fi

# 5. How long a --remote change takes to reach each shape: each shows its
# limit in JSON progress every 10 ms.
if wanted change; then
share=redis+unix://$socket/change
for i in 1 2 3 4; do
    machine=$([[ $i -le 2 ]] && echo a || echo b)
    mkdir -m 700 -p "$scratch/$machine"
    XDG_RUNTIME_DIR=$scratch/$machine "$shape" --share "$share" --rate 1MiB --progress json -i 10ms \
        </dev/zero >/dev/null 2>"$scratch/change$i.json" &
    echo "$(date +%s.%N)" >"$scratch/start$i"
done
sleep 1
asked=$(date +%s.%N)
"$shape" --remote "share:$share" --rate 8MiB >/dev/null
sleep 1
pkill -f "share $share" || true
for i in 1 2 3 4; do
    python3 - "$scratch/change$i.json" "$(cat "$scratch/start$i")" "$asked" <<'PY'
import json, sys
start, asked = float(sys.argv[2]), float(sys.argv[3])
for line in open(sys.argv[1]):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    # Each shape's limit is its part of the share's: above 1 MiB/s, it
    # runs at its part of the new rate.
    if (record.get("limit") or 0) > 1024 * 1024:
        print(f"a change reached a shape after {(start + record['elapsed'] - asked) * 1000:.0f} ms (progress every 10 ms)")
        break
else:
    print("a change never reached a shape")
PY
done
fi
