//! Every input kept under `fuzz/corpus/TARGET/`, run through its target:
//! the seeds each target starts from, and every input that once found a
//! bug (named `found-*`), so that what was mended stays mended.

use super::{TARGETS, target};
use std::path::Path;

#[test]
fn every_kept_input_passes_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut ran = 0;
    for entry in std::fs::read_dir(&corpus).expect("fuzz/corpus") {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(run) = target(&name) else {
            // A target of a feature this build leaves out.
            assert!(
                [
                    "toxiproxy_api",
                    "redis_replies",
                    "traced_calls",
                    "http_framing",
                    "http_exchange",
                    "http2_relay"
                ]
                .contains(&name.as_str()),
                "fuzz/corpus/{name} is no target's"
            );
            continue;
        };
        for input in std::fs::read_dir(&dir).unwrap() {
            let input = input.unwrap().path();
            let data = std::fs::read(&input).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{} failed", input.display());
            ran += 1;
        }
    }
    for (name, _) in TARGETS {
        assert!(
            corpus.join(name).is_dir(),
            "no fuzz/corpus/{name}: {ran} inputs ran"
        );
    }
}
