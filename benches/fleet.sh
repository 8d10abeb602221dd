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
#   5. how long a --remote rate change takes to reach every shape;
#   6. on a Redis Cluster of three masters and three replicas (made with
#      redis-cli --cluster create on loopback ports): 4 shapes on an
#      8 MiB/s share through a node that does not hold its slot; the
#      slot migrated under 2 shapes, and its master killed under them
#      (a failover), each with the time from the move to the first lease
#      call on the new node (MONITOR) and the share per 100 ms meanwhile
#      (benches/fleet_follow.py);
#   7. over TLS (certificates made with openssl): 4 shapes on an 8 MiB/s
#      share;
#   8. members at different distances: 2 shapes 5 ms from Redis and 2
#      200 ms away on an 8 MiB/s share, measured from 1.5 s (joining
#      included) and from 4 s;
#   9. 4 shapes holding the data while Redis is away (--share-fallback
#      block), Redis frozen (SIGSTOP) for 3 s: the share per 100 ms from
#      the freeze, and over the 1.5 s that start 0.5 s after it wakes;
#  10. 4 shapes, one ended by SIGTERM and then by SIGKILL: how long until
#      the others spend the whole share.
#
#   benches/fleet.sh [distance] [calls] [restart] [exit] [change] [cluster] [tls] [mixed] [wakes] [ends]
#   (all when none is named)
#
# It installs redis-server with apt-get if root and missing.
set -euo pipefail
sections=${*:-distance calls restart exit change cluster tls mixed wakes ends}
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

# A free loopback port whose cluster bus port (10000 above) is free too.
free_node_port() {
    python3 -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    if port < 55000:
        try:
            socket.socket().bind(("127.0.0.1", port + 10000)); print(port); break
        except OSError:
            pass'
}

# The port of the master that holds slot $1, asked through port $2.
owner_of() {
    redis-cli -p "$2" cluster nodes | awk -v slot="$1" '
        $3 ~ /master/ && $3 !~ /fail/ { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1];
            if (slot + 0 >= r[1] + 0 && slot + 0 <= r[2] + 0) { split($2, a, "[:@]"); print a[2] } } }'
}

# Moves slot $1 from the master on $2 to the master on $3, keys and all,
# telling every node in $4.
migrate() {
    local slot=$1 from=$2 to=$3 source target keys
    source=$(redis-cli -p "$from" cluster myid)
    target=$(redis-cli -p "$to" cluster myid)
    redis-cli -p "$to" cluster setslot "$slot" importing "$source" >/dev/null
    redis-cli -p "$from" cluster setslot "$slot" migrating "$target" >/dev/null
    keys=$(redis-cli -p "$from" cluster getkeysinslot "$slot" 100)
    [[ -z $keys ]] || redis-cli -p "$from" migrate 127.0.0.1 "$to" "" 0 5000 keys $keys >/dev/null
    for port in $4; do redis-cli -p "$port" cluster setslot "$slot" node "$target" >/dev/null; done
}

# The first lease call (EVALSHA) MONITOR saw in file $1 after unix time $2,
# in ms after it.
first_call_after() {
    python3 - "$1" "$2" <<'PY'
import sys
since = float(sys.argv[2])
for line in open(sys.argv[1]):
    if '"EVALSHA"' in line:
        at = float(line.split()[0])
        if at >= since:
            print(f"{(at - since) * 1000:.0f} ms")
            break
else:
    print("never")
PY
}

# 6. A cluster.
if wanted cluster; then
cluster=$scratch/cluster
mkdir -p "$cluster"
ports=()
for i in 1 2 3 4 5 6; do
    port=$(free_node_port)
    ports+=("$port")
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --cluster-node-timeout 1000 \
        --cluster-config-file "$cluster/nodes-$port.conf" --dir "$cluster" --repl-diskless-sync-delay 0 \
        --save '' --appendonly no --daemonize yes --pidfile "$cluster/$port.pid" --logfile "$cluster/$port.log"
done
for port in "${ports[@]}"; do until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done; done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${ports[@]}") --cluster-replicas 1 --cluster-yes >/dev/null
until [[ $(for port in "${ports[@]}"; do redis-cli -p "$port" cluster info | grep -c cluster_state:ok; done | grep -c 1) == 6 ]] &&
    [[ $(for port in "${ports[@]}"; do redis-cli -p "$port" info replication | grep -c master_link_status:up; done | grep -c 1) == 3 ]]; do
    sleep 0.1
done
slot_of() { redis-cli -p "${ports[0]}" cluster keyslot "shape:{$1}:settings"; }
masters=$(redis-cli -p "${ports[0]}" cluster nodes | awk '$3 ~ /master/ { split($2, a, "[:@]"); print a[2] }')
elsewhere() { for port in $masters; do [[ $port == "$1" ]] || { echo "$port"; return; }; done; }

slot=$(slot_of fleetc)
owner=$(owner_of "$slot" "${ports[0]}")
other=$(elsewhere "$owner")
echo "| on a cluster | member | rate | part / even part | CV per 100 ms | CV per 10 ms | empty 100 ms windows |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
python3 benches/fleet_members.py --shape "$shape" --share "redis://127.0.0.1:$other/fleetc" --rate 8MiB \
    --members 4 --seconds 10 --skip 4 --label "cluster, 4 shapes"
echo

slot=$(slot_of follow)
owner=$(owner_of "$slot" "${ports[0]}")
target=$(elsewhere "$owner")
via=$(for port in $masters; do [[ $port == "$owner" || $port == "$target" ]] || echo "$port"; done)
redis-cli -p "$target" monitor >"$scratch/monitor.migrate" 2>/dev/null &
monitor=$!
python3 benches/fleet_follow.py --shape "$shape" --share "redis://127.0.0.1:$via/follow" --rate 8MiB \
    --members 2 --at 3 --label "slot $slot migrated from :$owner to :$target" \
    --event "$(declare -f migrate); migrate $slot $owner $target '${ports[*]}'; date +%s.%N >$scratch/moved"
kill "$monitor"
echo "  first lease call on the new master: $(first_call_after "$scratch/monitor.migrate" "$(cat "$scratch/moved")") after the move"
echo

slot=$(slot_of failover)
owner=$(owner_of "$slot" "${ports[0]}")
survivor=$(elsewhere "$owner")
owner_pid=$(cat "$cluster/$owner.pid")
for port in "${ports[@]}"; do
    [[ $port == "$owner" ]] || redis-cli -p "$port" monitor >"$scratch/monitor.$port" 2>/dev/null &
done
cat >"$scratch/failover.sh" <<EOF
$(declare -f owner_of)
kill -9 $owner_pid
for _ in \$(seq 600); do
    p=\$(owner_of $slot $survivor)
    [[ -n \$p && \$p != $owner ]] && break
    sleep 0.02
done
date +%s.%N >$scratch/promoted
echo "\$p" >$scratch/promoted.port
EOF
python3 benches/fleet_follow.py --shape "$shape" --share "redis://127.0.0.1:$owner/failover" --rate 8MiB \
    --members 2 --at 3 --after 5 --label "master :$owner of slot $slot killed (SIGKILL), members pointed at it" \
    --event "bash $scratch/failover.sh"
promoted=$(cat "$scratch/promoted.port")
echo "  the replica on :$promoted was promoted; first lease call on it: $(first_call_after "$scratch/monitor.$promoted" "$(cat "$scratch/promoted")") after the promotion was seen"
kill $(jobs -p) 2>/dev/null || true
wait 2>/dev/null || true
for port in "${ports[@]}"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
echo
fi

# 7. TLS.
if wanted tls; then
tls=$scratch/tls
mkdir -p "$tls"
(
    cd "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 \
        -extfile server.ext 2>/dev/null
)
port=$(free_port)
redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --tls-cert-file "$tls/server.pem" \
    --tls-key-file "$tls/server.key" --tls-ca-cert-file "$tls/ca.pem" --tls-auth-clients no \
    --save '' --appendonly no --daemonize yes --logfile "$tls/redis.log"
until redis-cli -p "$port" --tls --cacert "$tls/ca.pem" ping >/dev/null 2>&1; do sleep 0.05; done
echo "| over TLS | member | rate | part / even part | CV per 100 ms | CV per 10 ms | empty 100 ms windows |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
SHAPE_REDIS_CA_FILE=$tls/ca.pem python3 benches/fleet_members.py --shape "$shape" \
    --share "rediss://127.0.0.1:$port/fleett" --rate 8MiB --members 4 --seconds 10 --skip 4 --label "TLS, 4 shapes"
redis-cli -p "$port" --tls --cacert "$tls/ca.pem" shutdown nosave >/dev/null 2>&1 || true
echo
fi

# 8. Members near and far.
if wanted mixed; then
near=$(free_port)
far=$(free_port)
"$shape" --listen "127.0.0.1:$near" --connect "unix:$socket" --delay 2500us -q &
near_proxy=$!
"$shape" --listen "127.0.0.1:$far" --connect "unix:$socket" --delay 100ms -q &
far_proxy=$!
sleep 0.3
echo "| 5 ms (members 1, 3) and 200 ms (2, 4) | member | rate | part / even part | CV per 100 ms | CV per 10 ms | empty 100 ms windows |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for skip in 1.5 4; do
    python3 benches/fleet_members.py --shape "$shape" --rate 8MiB --members 4 --seconds 10 --skip "$skip" \
        --share "redis://127.0.0.1:$near/mixed$skip" --share "redis://127.0.0.1:$far/mixed$skip" \
        --label "from $skip s"
done
kill "$near_proxy" "$far_proxy"
echo
fi

# 9. Redis frozen for 3 s under 4 shapes that hold the data meanwhile.
if wanted wakes; then
for run in 1 2 3; do
    python3 benches/fleet_members.py --shape "$shape" --share "redis+unix://$socket/wakes$run" \
        --rate 8MiB --members 4 --seconds 9 --skip 1.5 --extra "--share-fallback block" \
        --freeze "$redis_pid:2:3" --label "frozen, run $run" | grep -v member
done
echo
fi

# 10. A member ended: its part freed.
if wanted ends; then
for end in TERM KILL; do
    python3 benches/fleet_members.py --shape "$shape" --share "redis+unix://$socket/ends$end" \
        --rate 8MiB --members 4 --seconds 8 --skip 5 --end "$end:3" --label "SIG$end" | grep -v member
done
echo
fi
