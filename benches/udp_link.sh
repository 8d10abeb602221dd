#!/usr/bin/env bash
# A UDP link on loopback, measured with iperf3 (-u). Prints Markdown tables:
#   1. datagrams a second through an unlimited link, and the relay's CPU
#      per million datagrams, shape against socat's UDP relay in the same
#      run, in turn;
#   2. the queue at twice the rate: the drops iperf3 saw against those the
#      link counted;
#   3. memory per flow: shape's resident memory with the flows of 10,000
#      clients open, against none.
# Needs iperf3, socat and python3 (installed with apt-get when run as root).
#
#   benches/udp_link.sh [SECONDS]      # default 5 s per throughput run
set -euo pipefail
cd "$(dirname "$0")/.."

for pair in iperf3:iperf3 socat:socat; do
    if ! command -v "${pair%%:*}" >/dev/null && [[ $(id -u) == 0 ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pair#*:}" >/dev/null 2>&1 || true
    fi
    command -v "${pair%%:*}" >/dev/null || { echo "skipped: ${pair%%:*} is not installed" >&2; exit 0; }
done
cargo build --release --quiet --bin shape
shape=$PWD/target/release/shape
seconds=${1:-5}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# CPU seconds of every thread of a process, from the kernel's schedstat.
cpu_of() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ns += $1} END {printf "%.3f", ns / 1e9}' || true; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' /proc/"$1"/status; }

# Runs iperf3's UDP test (client flags "$2") through a UDP relay started
# by "$1" (which gets FRONT and SERVER ports in the environment); iperf3's
# control connection goes through a plain shape proxy on the same port.
# Prints: datagrams sent, datagrams lost, the relay's CPU seconds, and
# the relay's own SIGUSR1 line (shape's), if any.
through() {
    export FRONT SERVER
    FRONT=$(free_port) SERVER=$(free_port)
    iperf3 -s -1 -p "$SERVER" >/dev/null 2>&1 &
    local server=$!
    "$shape" -q --listen 127.0.0.1:"$FRONT" --connect 127.0.0.1:"$SERVER" >/dev/null &
    local control=$!
    local said
    said=$(mktemp)
    bash -c "$1" >/dev/null 2>"$said" &
    local relay=$!
    sleep 0.5
    local report
    report=$(mktemp)
    # shellcheck disable=SC2086
    iperf3 -c 127.0.0.1 -p "$FRONT" -u -J $2 >"$report" || true
    local cpu
    cpu=$(cpu_of "$relay")
    kill -USR1 "$relay" 2>/dev/null || true
    sleep 0.3
    kill "$relay" "$control" "$server" 2>/dev/null || true
    wait "$server" "$relay" "$control" 2>/dev/null || true
    python3 - "$report" "$cpu" "$said" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
if "error" in report:
    sys.exit("iperf3: " + report["error"])
end = report["end"]["sum"]
said = [l for l in open(sys.argv[3]) if "up: " in l]
print(end["packets"], end["lost_packets"], sys.argv[2], said[-1].split("; up: ", 1)[1].strip() if said else "-")
EOF
    rm -f "$report" "$said"
}

echo "## UDP link on loopback: 100-byte datagrams, as fast as iperf3 sends them, $seconds s per run"
echo
echo "| relay | sent | received | received a second | relay CPU s | CPU s per million |"
echo "| --- | --- | --- | --- | --- | --- |"
for round in 1 2 3; do
    for relay in socat shape; do
        case $relay in
            # UDP-SENDTO, not UDP: a connected socket ends socat at the
            # first ICMP port unreachable.
            socat) command='exec socat UDP-LISTEN:$FRONT,bind=127.0.0.1 UDP-SENDTO:127.0.0.1:$SERVER' ;;
            shape) command="exec $shape --listen udp:127.0.0.1:\$FRONT --connect udp:127.0.0.1:\$SERVER" ;;
        esac
        read -r sent lost cpu _ < <(through "$command" "-b 0 -l 100 -t $seconds")
        awk -v r="$relay" -v s="$sent" -v l="$lost" -v c="$cpu" -v t="$seconds" \
            'BEGIN { g = s - l; printf "| %s | %d | %d | %.0f | %.3f | %.2f |\n", r, s, g, g / t, c, c / (g / 1e6) }'
    done
done

echo
echo "## The queue at twice the rate: iperf3 -u -b 10M -l 1400 through --rate 5Mbit"
echo
echo "| run | sent | iperf3 saw lost | the link says |"
echo "| --- | --- | --- | --- |"
for run in 1 2 3; do
    read -r sent lost _ line < <(through "exec $shape --listen udp:127.0.0.1:\$FRONT --connect udp:127.0.0.1:\$SERVER --rate 5Mbit" "-b 10M -l 1400 -t $seconds")
    echo "| $run | $sent | $lost | $line |"
done

echo
echo "## Memory per flow: 10,000 clients, one datagram each, to an upstream that never answers"
echo
port=$(free_port) sink=$(free_port)
python3 -c "import socket,time; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', $sink)); time.sleep(120)" &
sinker=$!
prlimit --nofile=20000:20000 -- "$shape" -q --listen udp:127.0.0.1:"$port" --connect udp:127.0.0.1:"$sink" &
link=$!
sleep 0.5
rss0=$(rss_kib "$link") fds0=$(ls /proc/"$link"/fd | wc -l)
python3 - "$port" <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
# Not faster than the link reads them: a datagram the kernel drops makes
# no flow.
for batch in range(100):
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(100)]
    for s in sockets:
        s.sendto(b"x" * 100, ("127.0.0.1", port))
    time.sleep(0.01)
    for s in sockets:
        s.close()
EOF
sleep 1
rss1=$(rss_kib "$link") fds1=$(ls /proc/"$link"/fd | wc -l)
kill "$link" "$sinker"
wait "$link" "$sinker" 2>/dev/null || true
# A client port closed may come again for the next client: flows are
# counted by the sockets the link holds, one each.
flows=$((fds1 - fds0))
echo "| flows | shape resident before | after | per flow |"
echo "| --- | --- | --- | --- |"
awk -v n="$flows" -v a="$rss0" -v b="$rss1" 'BEGIN { printf "| %d | %d KiB | %d KiB | %.0f bytes |\n", n, a, b, (b - a) * 1024 / n }'
echo
echo "Each flow also holds a socket (a descriptor, and about a kilobyte of the kernel's"
echo "memory); an idle one holds no buffer."
