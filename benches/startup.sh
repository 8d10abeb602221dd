#!/usr/bin/env bash
# The release binary's size and how long `--version` takes to start and
# end, beside pv's, with hyperfine (installed with apt-get if root and
# missing). Prints Markdown rows.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in hyperfine pv; do
    if ! command -v "$tool" >/dev/null && [[ $(id -u) == 0 ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null 2>&1 || true
    fi
done
cargo build --release --quiet --bin shape
shape=target/release/shape
stripped=$(mktemp)
trap 'rm -f "$stripped" "$stripped.json"' EXIT
strip -o "$stripped" "$shape"

echo "| binary | size | stripped (as packaged) | \`--version\`, mean ± σ |"
echo "| --- | --- | --- | --- |"
row() {
    local name=$1 path=$2 packed=$3 timing="-"
    if command -v hyperfine >/dev/null; then
        hyperfine -N --style none --warmup 20 --runs 300 --export-json "$stripped.json" "$path --version" >/dev/null 2>&1
        timing=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.2f ms ± %.2f ms" % (r["mean"]*1e3, r["stddev"]*1e3))' "$stripped.json")
    fi
    echo "| $name | $(stat -c %s "$path") bytes | $packed | $timing |"
}
row shape "$shape" "$(stat -c %s "$stripped") bytes"
command -v pv >/dev/null && row pv "$(command -v pv)" "(Debian's)"
