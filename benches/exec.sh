#!/usr/bin/env bash
# `shape --exec` against trickle, on loopback: for each kind of program,
# the achieved rate over the set rate, and whether each limited it at all;
# then the smoothness at the receiver (CV of the bytes in each 100 ms
# window, measured by examples/meter.rs at curl's output) for curl at 1,
# 10 and 100 MiB/s. Prints Markdown tables. Needs curl, wget, python3, node,
# go and trickle (installed with apt-get when run as root).
#
#   benches/exec.sh [MiB]      # default 8 MiB per transfer at 1 MiB/s
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    missing=()
    for pair in trickle:trickle curl:curl wget:wget go:golang-go node:nodejs; do
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    [[ ${#missing[@]} -gt 0 ]] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1
fi
for tool in trickle curl wget python3 node go; do
    command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed" >&2; exit 0; }
done
cargo build --release --quiet --bin shape --example meter
shape=$PWD/target/release/shape
meter=$PWD/target/release/examples/meter
mib=${1:-8}
bytes=$((mib << 20))
rate=1048576

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# What is fetched: a blob of the size measured, a sparse file for the
# smoothness runs, and a page a twentieth of the blob for the forking row.
head -c "$bytes" /dev/urandom > "$work/blob"
head -c $((bytes / 20)) /dev/urandom > "$work/page"
truncate -s 4G "$work/big"
web=$(free_port)
(cd "$work" && exec python3 -m http.server "$web" --bind 127.0.0.1 >/dev/null 2>&1) &
sink=$(free_port)
# An upload sink: takes connections, reads each to its end (HTTP PUT or
# plain bytes), answers HTTP.
python3 - "$sink" <<'EOF' >/dev/null 2>&1 &
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head and not head.startswith(b"RAW"):
        got = c.recv(65536)
        if not got: return
        head += got
    if b"100-continue" in head.lower():
        c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    got = len(head.split(b"\r\n\r\n", 1)[1]) if b"\r\n\r\n" in head else 0
    while length == 0 or got < length:
        more = c.recv(65536)
        if not more: break
        got += len(more)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"); c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
udp=$(free_port)
python3 - "$udp" <<'EOF' >/dev/null 2>&1 &
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", int(sys.argv[1])))
while True: s.recv(65536)
EOF
sleep 1

# The static Go client.
cat > "$work/get.go" <<'EOF'
package main

import (
	"io"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		os.Exit(1)
	}
	io.Copy(io.Discard, resp.Body)
}
EOF
(cd "$work" && CGO_ENABLED=0 GO111MODULE=off GOCACHE=$work/gocache go build -o get get.go)
python=python3
[[ -x target/clients/venv/bin/python ]] && python=$PWD/target/clients/venv/bin/python

url=http://127.0.0.1:$web/blob
page=http://127.0.0.1:$web/page
# Each row: a label, then a command for sh -c ("exec" where one program
# runs, so that trickle's preload reaches it as if run directly).
rows=(
    "curl download|exec curl -s -o /dev/null $url"
    "wget download|exec wget -q -O /dev/null $url"
    "curl upload|exec curl -s -T $work/blob http://127.0.0.1:$sink/up"
    "static Go client (epoll, raw syscalls)|exec $work/get $url"
    "Python requests|exec $python -c 'import requests, sys; requests.get(sys.argv[1]).content' $url"
    "Python socket.sendfile|exec python3 -c 'import socket, sys; s = socket.create_connection((\"127.0.0.1\", int(sys.argv[1]))); s.send(b\"RAW\"); s.sendfile(open(sys.argv[2], \"rb\")); s.close()' $sink $work/blob"
    "Node (non-blocking, epoll)|exec node -e 'require(\"http\").get(process.argv[1], r => r.resume())' $url"
    "shell forking 20 curls, 4 at a time|seq 20 | xargs -P4 -I{} curl -s -o /dev/null $page"
    "UDP sender (1,000-byte datagrams)|exec python3 -c 'import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); [s.sendto(b\"x\" * 1000, (\"127.0.0.1\", int(sys.argv[1]))) for _ in range(int(sys.argv[2]) // 1000)]' $udp $bytes"
)

# Runs "$@" and prints its wall seconds.
seconds() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
# Achieved over set rate, from the shaped run's wall time less the plain
# run's (start-up and the transfer at full speed); a run that took less
# than half the set time was not limited, and its ratio is from its own
# wall time.
ratio() {
    awk -v b="$bytes" -v r="$rate" -v t="$1" -v p="$2" 'BEGIN {
        if (t - p < b / r / 2) printf "%.1f", b / t / r; else printf "%.4f", b / (t - p) / r }'
}
limited() { awk -v r="$1" 'BEGIN { print (r < 1.1 ? "yes" : "no") }'; }

echo "Each program moves $mib MiB at a set rate of 1 MiB/s (shape --rate 1MiB --burst 16KiB --exec; trickle -s -d 1024 -u 1024)."
echo "Achieved rate over set rate, from the wall time less the plain run's (start-up): under 1 is slower than set, far over 1 is not limited."
echo
echo "| program | shape | limited | trickle | limited |"
echo "| --- | --- | --- | --- | --- |"
for row in "${rows[@]}"; do
    label=${row%%|*}
    command=${row#*|}
    plain=$(seconds sh -c "$command")
    s=$(seconds "$shape" --rate 1MiB --burst 16KiB --exec sh -c "$command")
    t=$(seconds trickle -s -d 1024 -u 1024 sh -c "$command")
    rs=$(ratio "$s" "$plain")
    rt=$(ratio "$t" "$plain")
    printf '| %s | %s | %s | %s | %s |\n' "$label" "$rs" "$(limited "$rs")" "$rt" "$(limited "$rt")"
done

echo
echo "Smoothness at the receiver (curl's output): CV of the bytes per 100 ms window after the first second, then per 10 ms; steady rate over set rate."
echo
echo "| tool | rate | burst | observed burst | steady / set | CV 100 ms | CV 10 ms | CPU s | peak RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for r in 1 10 100; do
    bps=$((r << 20))
    "$meter" --rate "$bps" --seconds 6 --label "shape --exec, ${r} MiB/s" -- \
        "$shape" --rate "${r}MiB" --exec curl -s "http://127.0.0.1:$web/big" </dev/null
    "$meter" --rate "$bps" --seconds 6 --label "trickle, ${r} MiB/s" -- \
        trickle -s -d $((r * 1024)) curl -s "http://127.0.0.1:$web/big" </dev/null
done
