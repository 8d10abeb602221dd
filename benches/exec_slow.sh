#!/usr/bin/env bash
# What `shape --exec` itself spends on slow connections: the command is
# ../shared/device/proxyload.go with -direct (its own connections to its
# own sink, each writing its bytes), run under `shape --rate RATE --exec`,
# where every send and receive of it is a call shape answers. shape's own
# CPU (user + system, not the command's) is read from /proc by the command
# as it ends, its parent being shape.
#
#   benches/exec_slow.sh [RATE]     # default 20KiB
#
# Two cases: one connection writing five seconds' worth, and 50
# connections sharing the rate, each writing 10 KiB (25 s in all).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-20KiB}

cargo build --release --quiet --bin shape
shape=$PWD/target/release/shape
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
CGO_ENABLED=0 go build -o "$scratch/proxyload" ../shared/device/proxyload.go

echo "| connections | data each | wall s | shape CPU s | share of a core |"
echo "| --- | --- | --- | --- | --- |"
for case in 1:100 50:10; do
    conns=${case%%:*}
    kib=${case#*:}
    start=$(date +%s.%N)
    # shellcheck disable=SC2016
    "$shape" -q --rate "$rate" --exec sh -c '"$@" >/dev/null; cat /proc/$PPID/stat >"$0"' \
        "$scratch/stat" "$scratch/proxyload" -direct -conns "$conns" -kib "$kib"
    end=$(date +%s.%N)
    awk -v tick="$(getconf CLK_TCK)" -v s="$start" -v e="$end" -v c="$conns" -v k="$kib" \
        '{ cpu = ($14 + $15) / tick; printf "| %d | %d KiB | %.2f | %.3f | %.2f%% |\n", c, k, e - s, cpu, 100 * cpu / (e - s) }' \
        "$scratch/stat"
done
