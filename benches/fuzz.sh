#!/usr/bin/env bash
# Every fuzz target for SECONDS each (default 600, ten minutes), JOBS at a
# time (default 2), at the lowest priority; prints a Markdown table of
# what each did: executions, their rate, the coverage libFuzzer counted
# (edges, "cov", and features, "ft") and the inputs it kept, its peak
# memory, and whether it found anything. Logs are in target/fuzz/logs.
#
#   benches/fuzz.sh [SECONDS] [JOBS] [TARGET...]   # default: every target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
jobs=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || mapfile -t targets < <(ls fuzz/corpus)
# Built once, and copied, so that the runs side by side all fuzz the one
# build, whatever is built meanwhile.
bash fuzz/run.sh units 1 >/dev/null 2>&1
mkdir -p target/fuzz/logs
FUZZ_BINARY=$(mktemp -d)/shape-fuzz
cp "target/fuzz/build/$(rustc -vV | sed -n 's/^host: //p')/release/shape-fuzz" "$FUZZ_BINARY"
export FUZZ_BINARY
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} sh -c \
    "nice -n 19 bash fuzz/run.sh {} $seconds > target/fuzz/logs/{}.log 2>&1; echo \$? > target/fuzz/logs/{}.status"

echo "| target | seconds | executions | per second | edges (cov) | features (ft) | inputs kept | peak RSS | found |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for name in "${targets[@]}"; do
    log=target/fuzz/logs/$name.log
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    stat() { sed -n "s/^stat::$1: *//p" "$log"; }
    found=$( [[ $(cat "target/fuzz/logs/$name.status") == 0 ]] && echo nothing || echo "$(ls target/fuzz/found | grep -c "^$name-") input(s)")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s MB | %s |\n' "$name" "$seconds" \
        "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" \
        "$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")" "$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")" \
        "$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")" "$(stat peak_rss_mb)" "$found"
done
