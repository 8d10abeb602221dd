//! libFuzzer's entry: each input goes to the target SHAPE_FUZZ_TARGET
//! names (see `shape::fuzzing::TARGETS`).

#![no_main]

use std::sync::OnceLock;

static TARGET: OnceLock<shape::fuzzing::Target> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let run = TARGET.get_or_init(|| {
        let name = std::env::var("SHAPE_FUZZ_TARGET").unwrap_or_default();
        shape::fuzzing::target(&name).unwrap_or_else(|| {
            let names: Vec<&str> = shape::fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
            panic!("SHAPE_FUZZ_TARGET={name:?} is none of {}", names.join(", "))
        })
    });
    run(data);
});
