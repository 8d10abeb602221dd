#!/usr/bin/env bash
# HTTP faults beside the plain proxies, in one run on this machine: wrk
# (HTTP/1.1, 50 kept-alive connections, small answers), or with PROTO=h2
# h2load (HTTP/2 with prior knowledge, 50 connections, 10 streams each),
# against nginx
# (Debian's) directly, through shape's plain proxy, through shape with an
# HTTP rule that picks nothing, through toxiproxy's plain proxy, and
# through shape answering every request 503 itself. Each proxy runs as
# uid 65534; each figure is the median of ROUNDS rounds of SECONDS, the
# setups taking turns within a round, with its p99 latency and the
# proxy's CPU per 10,000 requests.
#
#   [PROTO=h2] benches/http_faults.sh SHAPE [TOXIPROXY] [ROUNDS] [SECONDS]
#
# Needs nginx, wrk and h2load (apt-get install nginx wrk nghttp2-client);
# run as root. h2load gives no p99: the mean time for a request stands in.
set -euo pipefail
SHAPE=$(realpath "$1"); TOXI=${2:-}; ROUNDS=${3:-5}; SECONDS_EACH=${4:-5}
d=$(mktemp -d); chmod 777 "$d"
U="setpriv --reuid 65534 --regid 65534 --clear-groups"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NGINX_PORT=$(port)
mkdir -p "$d/www" && printf 'hello from nginx\n' > "$d/www/index.html"
cat > "$d/nginx.conf" <<EOF
daemon off; worker_processes 1; pid $d/nginx.pid; error_log $d/error.log;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 1000000;
  server { listen 127.0.0.1:$NGINX_PORT ${PROTO:+http2}; root $d/www; } }
EOF
nginx -c "$d/nginx.conf" -e "$d/error.log" &
NGINX=$!
pids=()
cleanup() { kill "${pids[@]}" $NGINX 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
start_shape() { # NAME ARGS...: a shape proxy in front of nginx; sets its port
    local name=$1; shift
    $U "$SHAPE" --progress none --listen 127.0.0.1:0 --connect 127.0.0.1:$NGINX_PORT "$@" 2>"$d/$name.log" &
    pids+=($!); eval "${name}_pid=$!"
    until grep -q 'listening on' "$d/$name.log" 2>/dev/null; do sleep 0.01; done
    eval "${name}_port=$(grep -o '127.0.0.1:[0-9]*' "$d/$name.log" | head -1 | cut -d: -f2)"
}
start_shape plain
start_shape rule --http-status 503 --path /never
start_shape answer --http-status 503
setups="nginx plain rule answer"
nginx_port=$NGINX_PORT; nginx_pid=$NGINX
if [ -n "$TOXI" ]; then
    TP=$(port)
    $U "$TOXI" -port "$TP" >"$d/toxi.log" 2>&1 &
    pids+=($!); toxi_pid=$!
    until curl -s "127.0.0.1:$TP/version" >/dev/null; do sleep 0.05; done
    toxi_port=$(port)
    curl -s -XPOST "127.0.0.1:$TP/proxies" -d "{\"name\":\"web\",\"listen\":\"127.0.0.1:$toxi_port\",\"upstream\":\"127.0.0.1:$NGINX_PORT\"}" >/dev/null
    setups="$setups toxi"
fi
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for round in $(seq "$ROUNDS"); do
    for setup in $setups; do
        p=$(eval echo \$${setup}_port); pid=$(eval echo \$${setup}_pid)
        before=$(cpu "$pid")
        if [ "${PROTO:-}" = h2 ]; then
            h2load -c50 -m10 -t2 -D"$SECONDS_EACH" "http://127.0.0.1:$p/" > "$d/wrk"
            after=$(cpu "$pid")
            rps=$(awk '/^finished in/ {print $4}' "$d/wrk")
            total=$(awk '/^requests:/ {print $6}' "$d/wrk")
            p99=$(awk '/time for request:/ {print $6}' "$d/wrk")
            non2xx=$(awk '/^status codes:/ {print $5+$7+$9}' "$d/wrk")
        else
            wrk -t2 -c50 -d"${SECONDS_EACH}s" --latency "http://127.0.0.1:$p/" > "$d/wrk"
            after=$(cpu "$pid")
            rps=$(awk '/Requests\/sec/ {print $2}' "$d/wrk")
            total=$(awk '/requests in/ {print $1}' "$d/wrk")
            p99=$(awk '$1=="99%" {print $2}' "$d/wrk")
            non2xx=$(awk '/Non-2xx/ {print $NF}' "$d/wrk"); non2xx=${non2xx:-0}
        fi
        ticks=$((after - before))
        echo "$setup $rps $p99 $(python3 -c "print(f'{$ticks/100/$total*10000*1000:.1f}')") $non2xx" >> "$d/results"
    done
done
echo "# setup: requests/s (median of $ROUNDS x ${SECONDS_EACH}s), p99, server-or-proxy CPU ms per 10,000 requests, answers not 2xx (last round)"
python3 - "$d/results" $setups <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def ms(text):
    for unit, scale in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
for setup in sys.argv[2:]:
    mine = [r for r in rows if r[0] == setup]
    rps = statistics.median(float(r[1]) for r in mine)
    p99 = statistics.median(ms(r[2]) for r in mine)
    cpu = statistics.median(float(r[3]) for r in mine)
    print(f"{setup:7} {rps:10.0f} req/s  p99 {p99:6.2f} ms  {cpu:6.1f} ms CPU/10k  non-2xx {mine[-1][4]}")
EOF
