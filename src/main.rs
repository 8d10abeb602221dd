//! The `shape` command. Everything it does lives in the library; see
//! `shape::app`.

#[cfg(not(loom))]
fn main() -> std::process::ExitCode {
    shape::app::main()
}

/// Under the loom model checker only the bucket is built.
#[cfg(loom)]
fn main() {}
