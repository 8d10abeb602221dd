#!/usr/bin/env bash
# `shape --exec` with a link (issue 46), on loopback. Prints Markdown:
#
# 1. connects and request/response round trips (64 bytes) under
#    `--delay 25ms`: a static Go client under --exec, beside the same
#    client through shape's proxy with the same delay, and plain;
# 2. curl fetching 4 MiB at `--rate 1MiB --delay 50ms`;
# 3. without a link, nothing costs more than before: curl fetching 1 GiB
#    unlimited, and dd writing 1 GiB to a file, plain, under this shape's
#    --exec, and under OLD's (a shape built before the link, if given);
# 4. rsync over ssh to a local sshd, 8 MiB up, under
#    `--delay 50ms --rate 2MiB`.
#
#   benches/exec_link.sh [OLD]     # OLD: another shape binary to compare
#
# Needs go, curl, python3, rsync, ssh and sshd (the last row is skipped
# without them).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:-}
cargo build --release --quiet --bin shape
shape=$PWD/target/release/shape
work=$(mktemp -d)
# Servers started in command substitutions are not this shell's jobs:
# their pids are kept in a file.
trap 'kill $(jobs -p) $(cat "$work/pids" 2>/dev/null) 2>/dev/null; rm -rf "$work"' EXIT
CGO_ENABLED=0 GO111MODULE=off GOCACHE="$work/cache" go build -o "$work/pinger" benches/link_pinger.go

# Starts `$@` in the background and waits for the port it prints.
port_of() {
    local out=$work/port.$RANDOM
    "$@" >"$out" &
    echo $! >>"$work/pids"
    until [[ -s $out ]]; do sleep 0.01; done
    head -1 "$out"
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "### Round trips under \`--delay 25ms\` (50 connects, 200 round trips of 64 bytes)"
echo
echo "| path | connect | round trip |"
echo "| --- | --- | --- |"
echo_port=$(port_of "$work/pinger" -serve)
row() {
    local name=$1
    shift
    "$@" | awk -v name="$name" '/^connect/ { c = substr($0, 9) } /^round trip/ { r = substr($0, 12) } END { printf "| %s | %s | %s |\n", name, c, r }'
}
row "plain" "$work/pinger" -addr "127.0.0.1:$echo_port"
row "\`shape --delay 25ms --exec\`" "$shape" -q --delay 25ms --exec "$work/pinger" -addr "127.0.0.1:$echo_port"
proxy_port=$(free_port)
"$shape" -q --listen "127.0.0.1:$proxy_port" --connect "127.0.0.1:$echo_port" --delay 25ms &
proxy=$!
until (exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null; do sleep 0.01; done
row "shape's proxy, \`--delay 25ms\`" "$work/pinger" -addr "127.0.0.1:$proxy_port"
kill $proxy

# Files to fetch: 4 MiB, and 1 GiB sparse.
mkdir "$work/files"
head -c $((4 << 20)) /dev/urandom >"$work/files/4m"
truncate -s 1G "$work/files/1g"
web=$(port_of "$work/pinger" -http "$work/files")

echo
echo "### curl fetching 4 MiB at \`--rate 1MiB --delay 50ms\`"
echo
echo "| run | wall s |"
echo "| --- | --- |"
for run in 1 2 3; do
    start=$(date +%s.%N)
    "$shape" -q --rate 1MiB --delay 50ms --exec curl -sS -o /dev/null "http://127.0.0.1:$web/4m"
    end=$(date +%s.%N)
    awk -v r="$run" -v s="$start" -v e="$end" 'BEGIN { printf "| %d | %.3f |\n", r, e - s }'
done

# Runs `$@` (a command) and prints its wall time and the CPU of its
# parent (shape, when run under it), median of three.
timed() {
    for _ in 1 2 3; do
        start=$(date +%s.%N)
        # shellcheck disable=SC2016
        "$@" sh -c '"$@"; cat /proc/$PPID/stat >"$0"' "$work/stat" "${command[@]}"
        end=$(date +%s.%N)
        awk -v tick="$(getconf CLK_TCK)" -v s="$start" -v e="$end" '{ printf "%.3f %.3f\n", e - s, ($14 + $15) / tick }' "$work/stat"
    done | sort -n | sed -n 2p
}
plain() { "$@"; }

echo
echo "### Without a link: 1 GiB unlimited (median of 3; shape's own CPU)"
echo
echo "| command | plain wall s | \`--exec\` wall s | shape CPU s | before the link: wall s | CPU s |"
echo "| --- | --- | --- | --- | --- | --- |"
for what in curl dd; do
    case $what in
        curl) command=(curl -sS -o /dev/null "http://127.0.0.1:$web/1g") ;;
        dd) command=(dd if=/dev/zero of="$work/out" bs=1M count=1024 status=none) ;;
    esac
    read -r plain_wall _ < <(timed plain)
    read -r wall cpu < <(timed "$shape" -q --exec)
    before="| - | - |"
    if [[ -n $old ]]; then
        read -r old_wall old_cpu < <(timed "$old" -q --exec)
        before="| $old_wall | $old_cpu |"
    fi
    echo "| $what | $plain_wall | $wall | $cpu $before"
done
rm -f "$work/out"

echo
echo "### rsync over ssh, 8 MiB up, \`--delay 50ms --rate 2MiB\`"
echo
if ! command -v rsync >/dev/null || ! command -v ssh >/dev/null || [[ ! -x /usr/sbin/sshd ]]; then
    echo "skipped: rsync, ssh or sshd is not installed"
    exit 0
fi
ssh-keygen -q -t ed25519 -N "" -f "$work/host"
ssh-keygen -q -t ed25519 -N "" -f "$work/user"
ssh_port=$(free_port)
printf 'Port %s\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\nStrictModes no\nUsePAM no\nPidFile none\nPermitRootLogin prohibit-password\n' \
    "$ssh_port" "$work/host" "$work/user.pub" >"$work/sshd_config"
mkdir -p /run/sshd 2>/dev/null || true
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2>/dev/null &
until (exec 3<>"/dev/tcp/127.0.0.1/$ssh_port") 2>/dev/null; do sleep 0.01; done
ssh_cmd="ssh -p $ssh_port -i $work/user -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
head -c $((8 << 20)) /dev/urandom >"$work/source"
echo "| run | wall s | intact |"
echo "| --- | --- | --- |"
for run in plain linked; do
    rm -f "$work/there"
    start=$(date +%s.%N)
    case $run in
        plain) rsync -a -e "$ssh_cmd" "$work/source" "$(id -un)@127.0.0.1:$work/there" ;;
        linked) "$shape" -q --delay 50ms --rate 2MiB --exec rsync -a -e "$ssh_cmd" "$work/source" "$(id -un)@127.0.0.1:$work/there" ;;
    esac
    end=$(date +%s.%N)
    intact=no
    cmp -s "$work/source" "$work/there" && intact=yes
    awk -v r="$run" -v s="$start" -v e="$end" -v i="$intact" 'BEGIN { printf "| %s | %.3f | %s |\n", r, e - s, i }'
done
