//! What the fuzz targets (`fuzz/`) run: one function per parser of
//! outside input, each taking arbitrary bytes. Beyond not panicking and
//! not hanging (what the fuzzer itself watches), each checks what must
//! hold of any answer: a refusal is one line, and what is accepted is
//! said back in a form that is read back the same.
//!
//! `fuzz/` builds one program that runs the target its first argument
//! names; `replay.rs` runs every input kept under `fuzz/corpus/` through
//! its target in `cargo test`, so that what once broke stays mended.

mod datagrams;
mod remote;
#[cfg(test)]
mod replay;
mod share;
mod stores;
mod words;

/// A target: it runs on any bytes, and panics if they break a rule.
pub type Target = fn(&[u8]);

/// Every target, by name.
pub const TARGETS: &[(&str, Target)] = &[
    ("command_line", words::command_line),
    ("toxiproxy_flags", words::toxiproxy_flags),
    ("units", words::units),
    ("schedule", words::schedule),
    ("link_names", words::link_names),
    ("traces", words::traces),
    ("remote", remote::messages),
    ("share_names", share::names),
    ("share_file", share::file),
    ("datagrams", datagrams::link),
    #[cfg(feature = "serve")]
    ("toxiproxy_api", stores::toxiproxy_api),
    #[cfg(feature = "fleet")]
    ("redis_replies", stores::redis_replies),
    #[cfg(feature = "exec")]
    ("traced_calls", stores::traced_calls),
    #[cfg(feature = "http")]
    ("http_framing", stores::http_framing),
    #[cfg(feature = "http")]
    ("http_exchange", stores::http_exchange),
    #[cfg(feature = "http")]
    ("http2_relay", stores::http2_relay),
];

/// The target named `name`, if there is one.
pub fn target(name: &str) -> Option<Target> {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, run)| *run)
}

/// Panics unless `why`, a refusal of `input`, is one line: a message
/// that spans lines breaks a log and a test that reads the first.
fn one_line(input: &dyn std::fmt::Debug, why: &str) {
    assert!(
        !why.contains('\n') && !why.contains('\r'),
        "{input:?} was refused in more than one line: {why:?}"
    );
}
