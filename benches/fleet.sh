#!/usr/bin/env bash
# A fleet's share in Redis, measured: a real redis-server on a Unix socket
# of a scratch directory, and "machines" that are shapes with runtime
# directories of their own (so they cannot meet through a local share).
#
#   1. 4 shapes on 2 machines at 8 MiB/s: each one's rate, and the total;
#   2. 4 shapes at 400 MiB/s: the total, and Redis's commands a second;
#   3. the same as 1 with 20 ms of round trip to Redis (shape's own proxy
#      with --delay 10ms each way in front of it);
#   4. how long a --remote rate change takes to reach every shape.
#
#   benches/fleet.sh      # installs redis-server with apt-get if root and missing
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null && [[ $(id -u) == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null 2>&1 || true
fi
command -v redis-server >/dev/null || { echo "redis-server is not installed" >&2; exit 1; }
cargo build --release --quiet --bin shape --example meter
shape=$PWD/target/release/shape
meter=$PWD/target/release/examples/meter
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$scratch"' EXIT
socket=$scratch/redis.sock
redis-server --port 0 --unixsocket "$socket" --save '' --appendonly no >/dev/null &
until [[ -S $socket ]]; do sleep 0.05; done
mkdir -p "$scratch/a" "$scratch/b"
chmod 700 "$scratch/a" "$scratch/b"

# Four shapes on two machines at TOTAL through SHARE for SECONDS; prints a
# row per shape, then the total.
four() {
    local name=$1 share=$2 total=$3 each=$4 seconds=$5
    local rows=$scratch/rows.$RANDOM
    : >"$rows"
    local members=()
    for machine in a a b b; do
        XDG_RUNTIME_DIR=$scratch/$machine "$meter" --rate "$each" --seconds "$seconds" \
            --label "$name, machine $machine" -- "$shape" --share "$share" --rate "$total" \
            </dev/zero >>"$rows" &
        members+=($!)
    done
    wait "${members[@]}"
    cat "$rows"
    awk -F'|' '{ sum += $6 } END { printf "| %s | total | | | %.5f | | | | |\n", name, sum / 4 }' name="$name" "$rows"
}

echo "| shapes | rate | burst | observed burst | steady rate / target | smoothness (CV per 100 ms) | CV per 10 ms | CPU s | peak memory |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
four "8 MiB/s" "redis+unix://$socket/eight" 8MiB 2MiB 8
redis-cli -s "$socket" config resetstat >/dev/null
started=$(date +%s.%N)
four "400 MiB/s" "redis+unix://$socket/fast" 400MiB 100MiB 6
ended=$(date +%s.%N)
calls=$(redis-cli -s "$socket" info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
inner=$(redis-cli -s "$socket" info commandstats | sed -n 's/^cmdstat_[a-z|]*:calls=\([0-9]*\),.*/\1/p' | awk '{ s += $1 } END { print s }')
echo
echo "400 MiB/s: $calls lease calls (EVALSHA) in $(printf '%.1f' "$(echo "$ended - $started" | bc)") s:" \
    "$(echo "$calls / ($ended - $started)" | bc) a second; every command counted, those inside the scripts too: $(echo "$inner / ($ended - $started)" | bc) a second"
echo

# 20 ms of round trip: shape's own proxy, 10 ms each way, in front of Redis.
"$shape" --listen 127.0.0.1:0 --connect "unix:$socket" --delay 10ms -q 2>/dev/null &
proxy_pid=$!
sleep 0.3
port=$(ss -ltnp 2>/dev/null | awk -v pid="pid=$proxy_pid," '$0 ~ pid { split($4, a, ":"); print a[length(a)] }' | head -1)
echo "| shapes | rate | burst | observed burst | steady rate / target | smoothness (CV per 100 ms) | CV per 10 ms | CPU s | peak memory |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
four "8 MiB/s, 20 ms to Redis" "redis://127.0.0.1:$port/far" 8MiB 2MiB 8
kill "$proxy_pid"

# How long a change takes to reach each shape: each shows its limit in
# JSON progress every 10 ms.
share=redis+unix://$socket/change
for i in 1 2 3 4; do
    machine=$([[ $i -le 2 ]] && echo a || echo b)
    XDG_RUNTIME_DIR=$scratch/$machine "$shape" --share "$share" --rate 1MiB --progress json -i 10ms \
        </dev/zero >/dev/null 2>"$scratch/change$i.json" &
    echo "$(date +%s.%N)" >"$scratch/start$i"
done
sleep 1
asked=$(date +%s.%N)
"$shape" --remote "share:$share" --rate 8MiB >/dev/null
sleep 1
for i in 1 2 3 4; do kill %$((i + 1)) 2>/dev/null || true; done
for i in 1 2 3 4; do
    python3 - "$scratch/change$i.json" "$(cat "$scratch/start$i")" "$asked" <<'PY'
import json, sys
start, asked = float(sys.argv[2]), float(sys.argv[3])
for line in open(sys.argv[1]):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    if record.get("limit") == 8 * 1024 * 1024:
        print(f"a change reached a shape after {(start + record['elapsed'] - asked) * 1000:.0f} ms (progress every 10 ms)")
        break
else:
    print("a change never reached a shape")
PY
done
