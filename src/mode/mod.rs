//! What shape does, picked from the command line as ripgrep picks its
//! mode: copy (the default: inputs to standard output or a connection),
//! proxy (`--listen` with `--connect`), a UDP link (`udp:` addresses),
//! toxiproxy's API (`--serve`), a command's own traffic (`--exec`),
//! remote (`--remote`), a share's status or reset, and generate (man
//! page, completions). The command line is checked once, as a whole, and
//! made into the mode's plan ([`step`], [`plan`]) before any mode starts;
//! each mode runs its plan to an [`Exit`], and a failure is printed here,
//! once, as one line.

mod copy;
#[cfg(feature = "exec")]
mod exec;
mod http;
mod input;
mod live;
pub(crate) mod plan;
mod proxy;
mod remote;
#[cfg(feature = "serve")]
mod serve;
mod share;
pub(crate) mod step;
#[cfg(feature = "serve")]
mod toxiproxy;
mod udp;

use crate::cli::Cli;
use plan::Mode;
use shape_impair::profiles;
use shape_leaves::exit::Exit;
use shape_leaves::message::{clip_quoted, one_line};
use step::Planned;

/// A command line that parsed but asks for something shape cannot do:
/// said in one line, with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Runs what `cli` asks for, once it is checked and planned.
pub fn run(cli: &Cli) -> Exit {
    let checked = match step::check(cli) {
        Ok(checked) => checked,
        Err(why) => return refused(why),
    };
    let quiet = cli.quiet;
    let ran = checked.plan().and_then(|Planned { mode, warnings }| {
        if !quiet {
            warnings.iter().for_each(|line| eprintln!("{line}"));
        }
        run_plan(mode)
    });
    ran.unwrap_or_else(|err| {
        eprintln!("shape: {}", clip_quoted(&one_line(&err)));
        match err.downcast_ref::<UsageError>() {
            Some(_) => Exit::Usage,
            None => Exit::Failure,
        }
    })
}

/// Runs the mode `mode` plans.
fn run_plan(mode: Mode) -> anyhow::Result<Exit> {
    match mode {
        Mode::Generate(what) => Ok(shape_leaves::exit::print_whole(
            &crate::cli::generate::render(what),
        )),
        Mode::ListLinks => Ok(shape_leaves::exit::print_whole(
            profiles::table().as_bytes(),
        )),
        Mode::Remote(plan) => remote::run(&plan),
        Mode::ShareStatus(name) => share::status(&name),
        Mode::ShareReset(name) => share::reset(&name),
        Mode::Proxy(plan) => proxy::run(&plan),
        Mode::Udp(plan) => udp::run(&plan),
        #[cfg(feature = "serve")]
        Mode::Serve(plan) => serve::run(&plan),
        #[cfg(not(feature = "serve"))]
        Mode::Serve(_) => Err(not_built("--serve", "serve")),
        #[cfg(feature = "exec")]
        Mode::Exec(plan) => exec::run(&plan),
        #[cfg(not(feature = "exec"))]
        Mode::Exec(_) => Err(not_built("--exec", "exec")),
        Mode::Copy(plan) => copy::run(&plan),
    }
}

/// A command line refused for `why`, said in one line: status 2.
fn refused(why: impl std::fmt::Display) -> Exit {
    eprintln!("{}", refusal_line(&why));
    Exit::Usage
}

/// The line a refusal of the command line prints: one line, whatever the
/// values it quotes hold, and those clipped.
pub(crate) fn refusal_line(why: &dyn std::fmt::Display) -> String {
    format!("shape: {}", clip_quoted(&one_line(why)))
}

/// The refusal of `what`, left out of this build with cargo's `feature`.
#[cfg(any(not(feature = "serve"), not(feature = "exec")))]
fn not_built(what: &str, feature: &str) -> anyhow::Error {
    UsageError(format!(
        "{what} is not in this build of shape: it was built without the `{feature}` feature"
    ))
    .into()
}

/// True if shape was started under toxiproxy-server's name.
pub fn called_as_toxiproxy(argv0: &std::ffi::OsStr) -> bool {
    crate::cli::toxiproxy::called_so(argv0)
}

/// Runs toxiproxy-server's command line, `args` after `program`.
pub fn run_as_toxiproxy(program: &str, args: &[String]) -> Exit {
    #[cfg(feature = "serve")]
    return toxiproxy::run(program, args);
    #[cfg(not(feature = "serve"))]
    {
        let _ = args;
        eprintln!(
            "{program}: {}",
            not_built("toxiproxy-server's command line", "serve")
        );
        Exit::Usage
    }
}

/// Says `err` on standard error, for a failure that does not end the run.
fn warn(err: &anyhow::Error) {
    eprintln!("shape: {}", one_line(err));
}
