#!/usr/bin/env bash
# Fuzzes shape's parsers of outside input with libFuzzer, on the stable
# toolchain: coverage comes from LLVM's sanitizer-coverage pass, which
# rustc takes as codegen options, so neither nightly nor cargo-fuzz is
# needed (a C++ compiler builds libFuzzer itself).
#
#   fuzz/run.sh TARGET SECONDS [LIBFUZZER-FLAGS...]   # one target
#   fuzz/run.sh all SECONDS                           # each target in turn
#
# New inputs go to target/fuzz/corpus/TARGET, beside the kept ones under
# fuzz/corpus/TARGET, which are only read. An input that breaks a target
# is written to target/fuzz/found/TARGET-*, and the run fails: mend the
# bug, then keep the input as fuzz/corpus/TARGET/found-NAME, which
# `cargo test` replays from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?which target (or all)}
seconds=${2:?for how many seconds}
shift 2

triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# --target keeps these flags off build scripts and procedural macros.
# FUZZ_BINARY names one built already (benches/fuzz.sh builds once).
binary=${FUZZ_BINARY:-target/fuzz/build/$triple/release/shape-fuzz}
if [[ -z ${FUZZ_BINARY:-} ]]; then
    cargo build --quiet --release -p shape-fuzz --target "$triple" --target-dir target/fuzz/build
fi

if [[ $target == all ]]; then
    targets=$(ls fuzz/corpus)
else
    targets=$target
fi
mkdir -p target/fuzz/found
for name in $targets; do
    mkdir -p "target/fuzz/corpus/$name"
    echo "fuzzing $name for $seconds s" >&2
    SHAPE_FUZZ_TARGET=$name "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -print_final_stats=1 -artifact_prefix="target/fuzz/found/$name-" "$@" \
        "target/fuzz/corpus/$name" "fuzz/corpus/$name"
done
