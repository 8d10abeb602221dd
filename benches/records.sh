#!/usr/bin/env bash
# Records mode, measured with the meter (examples/meter.rs --records):
# fidelity at 5 and 1000 lines a second, and against `pv -l` the speed
# without a limit on 1 GiB of 20-byte lines and the rate and CPU at
# 100,000 lines a second. Prints Markdown tables.
#
#   benches/records.sh            # installs pv with apt-get if root and missing
#   NO_INSTALL=1 benches/records.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v pv >/dev/null && [[ -z "${NO_INSTALL:-}" && $(id -u) == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pv >/dev/null 2>&1 || true
fi
have_pv() { command -v pv >/dev/null; }
have_pv || echo "skipped: pv is not installed" >&2

cargo build --release --quiet --bin shape --example meter
shape=target/release/shape
meter=target/release/examples/meter
# 20 bytes a line, as fast as can be; fed by redirection, so that the
# producer's SIGPIPE when the meter stops is not the script's failure.
short_lines() { yes abcdefghijklmnopqrs; }

echo "## Records: fidelity (a producer that is always ahead)"
echo
echo "| tool | rate | burst | observed burst | steady rate / target | smallest gap | lines and the time from the first to the last | CPU s | peak memory |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
"$meter" --records --rate 5 --count 101 --seconds 40 --label "shape --lines" -- "$shape" --lines --rate 5 < <(seq 1 1000000)
"$meter" --records --rate 1000 --seconds 10 --label "shape --lines" -- "$shape" --lines --rate 1000 < <(yes)
have_pv && "$meter" --records --rate 1000 --seconds 10 --label "pv -l -L" -- pv -q -l -L 1000 < <(yes)
for round in 1 2; do
    "$meter" --records --rate 100000 --seconds 6 --label "shape --lines" -- "$shape" --lines --rate 100000 < <(short_lines)
    have_pv && "$meter" --records --rate 100000 --seconds 6 --label "pv -l -L" -- pv -q -l -L 100000 < <(short_lines)
done

echo
echo "## Records without a limit: 1 GiB of 20-byte lines"
echo
echo "| tool | lines | wall time | lines per second | CPU s | peak memory |"
echo "| --- | --- | --- | --- | --- | --- |"
for round in 1 2; do
    "$meter" --records --bytes 1GiB --label "shape --lines" -- "$shape" --lines -q < <(short_lines)
    have_pv && "$meter" --records --bytes 1GiB --label "pv -l" -- pv -l -q < <(short_lines)
done
