#!/usr/bin/env bash
# Measures shape against pv -L, cstream -t and mbuffer -R, side by side in
# one run on this machine, with the meter (examples/meter.rs): observed
# burst, steady rate, smoothness, CPU and peak memory at four rates, and
# throughput without a limit against plain cat. Prints Markdown tables.
#
#   benches/compare.sh            # installs missing peers with apt-get if root
#   NO_INSTALL=1 benches/compare.sh
#
# Peers that are not installed are skipped, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

peers=(pv cstream mbuffer)
missing=()
for tool in "${peers[@]}"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})) && [[ -z "${NO_INSTALL:-}" && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || true
fi
have() { command -v "$1" >/dev/null; }
for tool in "${peers[@]}"; do have "$tool" || echo "skipped: $tool is not installed" >&2; done

cargo build --release --quiet --bin shape --example meter
shape=target/release/shape
meter=target/release/examples/meter

# name, bytes per second, seconds
rates=("4KiB 4096 6" "1MiB 1048576 8" "20MiB 20971520 8" "200MiB 209715200 5")

echo "## Shaping fidelity (input /dev/zero)"
echo
echo "| tool | rate | burst | observed burst | steady rate / target | smoothness (CV per 100 ms) | CV per 10 ms | CPU s | peak memory |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for spec in "${rates[@]}"; do
    read -r name bps seconds <<<"$spec"
    run() { "$meter" --rate "$bps" --seconds "$seconds" "$@" </dev/zero; }
    run --label shape -- "$shape" --rate "$name"
    have pv && run --label "pv -L" -- pv -q -L "$bps"
    have cstream && run --label "cstream -t" -- cstream -t "$bps"
    have mbuffer && run --label "mbuffer -R" -- mbuffer -q -m 1M -R "$bps"
done
for spec in "${rates[@]:1}"; do
    read -r name bps seconds <<<"$spec"
    "$meter" --rate "$bps" --seconds "$seconds" --burst 64KiB --label shape -- "$shape" --rate "$name" --burst 64KiB </dev/zero
done

echo
echo "## Throughput without a limit: 4 GiB from /dev/zero into a pipe"
echo
echo "| tool | bytes | wall time | throughput | CPU s | peak memory |"
echo "| --- | --- | --- | --- | --- | --- |"
through() { "$meter" --bytes 4GiB "$@" </dev/zero; }
for round in 1 2; do
    through --label "cat" -- cat
    through --label "shape" -- "$shape"
    have pv && through --label "pv" -- pv -q
    have cstream && through --label "cstream" -- cstream
    have mbuffer && through --label "mbuffer" -- mbuffer -q -m 1M
done
