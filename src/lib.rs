//! shape, the program: parse the command line, run the mode it asks for,
//! and turn the outcome into an exit status ([`main`], which `main.rs`
//! calls). What each part owns is in ARCHITECTURE.md; the token bucket is
//! the `shape-bucket` crate. It is a library too for the fuzz targets
//! alone: [`fuzzing`] is all it offers besides `main`.

// A build without `--serve`, `--exec` or fleets leaves what only they use
// unused: the full build, which CI lints, is where dead code is caught.
#![cfg_attr(
    not(all(feature = "serve", feature = "exec", feature = "fleet")),
    allow(dead_code)
)]
// `unsafe` is allowed in two places of this crate alone, each saying why
// it is sound: the mapping of a share file (control/share/mapping.rs) and
// the check of the standard streams at start (started.rs). The kernel
// calls of `--exec` are shape-exec's.
#![deny(unsafe_code)]

mod cli;
mod control;
pub mod fuzzing;
mod mode;
mod pipe;
mod progress;
#[allow(unsafe_code)]
mod started;

use std::process::ExitCode;

/// Runs shape with the process's arguments, and says how it ended.
pub fn main() -> ExitCode {
    // While there is one thread: threads take their creator's.
    shape_net::low_ports::take_if_given();
    // Under toxiproxy-server's name, its command line.
    let mut args = std::env::args_os().map(|arg| arg.to_string_lossy().into_owned());
    let program = args.next().unwrap_or_default();
    if mode::called_as_toxiproxy(program.as_ref()) {
        return mode::run_as_toxiproxy(&program, &args.collect::<Vec<_>>()).into();
    }
    let exit = match cli::parse() {
        Ok(cli) => mode::run(&cli),
        Err(err) => cli::usage::report(&err),
    };
    exit.into()
}
