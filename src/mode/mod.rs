//! What shape does, picked from the command line as ripgrep picks its
//! mode: copy (the default: inputs to standard output or a connection),
//! proxy (`--listen` with `--connect`), toxiproxy's API (`--serve`), a
//! command's own traffic (`--exec`),
//! remote (`--remote`), a share's status or reset, and generate (man
//! page, completions). Each mode runs to an [`Exit`]; a failure is printed
//! here, once, as one line.

mod copy;
#[cfg(feature = "exec")]
mod exec;
mod input;
mod live;
mod proxy;
mod remote;
#[cfg(feature = "serve")]
mod serve;
mod share;
#[cfg(feature = "serve")]
mod toxiproxy;
mod udp;

use crate::cli::{Cli, Generated, RemoteTarget};
use crate::conditions::Carried;
use crate::control::ShareName;
use crate::exit::Exit;
use crate::message::{clip_quoted, one_line};
use crate::net::Address;
use crate::profiles::{self, LinkArg};

/// One thing shape can be asked to do.
enum Mode<'a> {
    Generate(Generated),
    Remote(&'a RemoteTarget),
    ShareStatus(&'a ShareName),
    ShareReset(&'a ShareName),
    Proxy {
        listen: &'a Address,
        connect: &'a Address,
    },
    Datagrams {
        listen: &'a Address,
        connect: &'a Address,
    },
    Serve(&'a Address),
    Exec(&'a [std::ffi::OsString]),
    Copy,
}

impl<'a> Mode<'a> {
    /// The mode `cli` asks for, or why there is none: a udp: address
    /// given with a stream's.
    fn of(cli: &'a Cli) -> Result<Mode<'a>, UsageError> {
        if let Some(what) = cli.generate {
            return Ok(Mode::Generate(what));
        }
        if let Some(target) = &cli.remote {
            return Ok(Mode::Remote(target));
        }
        match (&cli.share, cli.status, cli.reset) {
            (Some(name), true, _) => return Ok(Mode::ShareStatus(name)),
            (Some(name), _, true) => return Ok(Mode::ShareReset(name)),
            _ => {}
        }
        if let Some(address) = &cli.serve {
            return Ok(Mode::Serve(address));
        }
        if let Some(command) = &cli.exec {
            return Ok(Mode::Exec(command));
        }
        let udp = |address: &Option<Address>| matches!(address, Some(Address::Udp { .. }));
        Ok(match (&cli.listen, &cli.connect) {
            (Some(listen), Some(connect)) if udp(&cli.listen) && udp(&cli.connect) => {
                Mode::Datagrams { listen, connect }
            }
            _ if udp(&cli.listen) || udp(&cli.connect) => {
                return Err(UsageError(
                    "a udp: address carries datagrams: --listen udp:ADDR goes with --connect \
                     udp:ADDR"
                        .into(),
                ));
            }
            (Some(listen), Some(connect)) => Mode::Proxy { listen, connect },
            _ => Mode::Copy,
        })
    }
}

/// A command line that parsed but asks for something shape cannot do:
/// said in one line, with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Runs what `cli` asks for, a known link's figures given where its flags
/// give none.
pub fn run(cli: &Cli) -> Exit {
    let mode = match Mode::of(cli) {
        Ok(mode) => mode,
        Err(why) => return refused(why),
    };
    if let Some(why) = misplaced_trace(cli, &mode) {
        return refused(why);
    }
    let profile = match cli.link {
        None => return run_mode(cli),
        Some(LinkArg::List) => return crate::exit::print_whole(profiles::table().as_bytes()),
        Some(LinkArg::Profile(profile)) => profile,
    };
    let two_ways = match mode {
        Mode::Proxy { .. } | Mode::Datagrams { .. } | Mode::Exec(_) => true,
        Mode::Copy => false,
        Mode::Remote(_) => {
            return refused(
                "--link applies at start: change a running shape with --rate and --delay",
            );
        }
        _ => {
            return refused(
                "--link applies to a pipe, a proxy (--listen with --connect), a UDP link or \
                 --exec",
            );
        }
    };
    run_mode(&cli.with_profile(profile, two_ways))
}

/// Runs what `cli` asks for, as it asks.
fn run_mode(cli: &Cli) -> Exit {
    if let Some(flag) = pv_display_flag(cli) {
        return refused(format!(
            "{flag} is pv's, to pick the bar's parts: shape's bar shows the count, the \
             rate, the limit and the time, and with --size the percentage and ETA \
             (--progress bar); -n prints numbers, as pv -n"
        ));
    }
    // Checked in `run`, before a known link's figures were given.
    let mode = match Mode::of(cli) {
        Ok(mode) => mode,
        Err(why) => return refused(why),
    };
    if !matches!(
        mode,
        Mode::Datagrams { .. } | Mode::Generate(_) | Mode::Exec(_)
    ) && let Some(flag) = cli.udp.first_given()
    {
        return refused(format!(
            "{flag} applies to a UDP link (--listen udp:ADDR with --connect udp:ADDR) or \
             --exec"
        ));
    }
    // A datagram's faults, where there are none; sent with --remote, the
    // shape that takes them decides; --exec has both.
    if !matches!(
        mode,
        Mode::Datagrams { .. } | Mode::Generate(_) | Mode::Remote(_) | Mode::Exec(_)
    ) && let Some(why) = cli
        .fault_changes()
        .iter()
        .find_map(|change| Carried::Stream.refuses(change.needs(), change.name()))
    {
        return refused(why);
    }
    let ran = match mode {
        Mode::Generate(what) => {
            return crate::exit::print_whole(&crate::cli::generate::render(what));
        }
        Mode::Remote(target) => remote::run(cli, target),
        Mode::ShareStatus(name) => share::status(name),
        Mode::ShareReset(name) => share::reset(name),
        Mode::Proxy { listen, connect } => proxy::run(cli, listen, connect),
        Mode::Datagrams { listen, connect } => udp::run(cli, listen, connect),
        #[cfg(feature = "serve")]
        Mode::Serve(address) => serve::run(cli, address),
        #[cfg(not(feature = "serve"))]
        Mode::Serve(_) => Err(not_built("--serve", "serve")),
        #[cfg(feature = "exec")]
        Mode::Exec(command) => exec::run(cli, command),
        #[cfg(not(feature = "exec"))]
        Mode::Exec(_) => Err(not_built("--exec", "exec")),
        Mode::Copy if cli.rate_up.is_some() || cli.rate_down.is_some() => Err(UsageError(
            "--rate-up and --rate-down apply to a proxy (--listen with --connect) or --exec".into(),
        )
        .into()),
        Mode::Copy if cli.delay_up.is_some() || cli.delay_down.is_some() => Err(UsageError(
            "--delay-up and --delay-down apply to a proxy (--listen with --connect) or a UDP link"
                .into(),
        )
        .into()),
        Mode::Copy => copy::run(cli),
    };
    ran.unwrap_or_else(|err| {
        eprintln!("shape: {}", clip_quoted(&one_line(&err)));
        match err.downcast_ref::<UsageError>() {
            Some(_) => Exit::Usage,
            None => Exit::Failure,
        }
    })
}

/// A command line refused for `why`, said in one line: status 2.
fn refused(why: impl std::fmt::Display) -> Exit {
    eprintln!("shape: {why}");
    Exit::Usage
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

/// Why a trace given does not apply to `mode`, if it does not: a pipe
/// has one way (`--trace`), a proxy, a UDP link and `--exec` two
/// (`--trace-up`, `--trace-down`).
fn misplaced_trace(cli: &Cli, mode: &Mode) -> Option<String> {
    let one = cli.trace.is_some();
    let two = cli.trace_up.is_some() || cli.trace_down.is_some();
    match mode {
        _ if !one && !two => None,
        Mode::Copy if two => Some(
            "--trace-up and --trace-down apply to a proxy (--listen with --connect), a UDP link \
             or --exec: a pipe follows --trace"
                .into(),
        ),
        Mode::Proxy { .. } | Mode::Datagrams { .. } | Mode::Exec(_) if one => Some(
            "--trace applies to a pipe: a proxy, a UDP link or --exec follows --trace-up and \
             --trace-down"
                .into(),
        ),
        Mode::Copy | Mode::Proxy { .. } | Mode::Datagrams { .. } | Mode::Exec(_) => None,
        _ => Some(
            "a trace applies to a pipe (--trace), a proxy, a UDP link or --exec (--trace-up, \
             --trace-down)"
                .into(),
        ),
    }
}

/// The first of pv's display flags given, which shape refuses.
fn pv_display_flag(cli: &Cli) -> Option<&'static str> {
    [
        (cli.pv_percent, "-p"),
        (cli.pv_timer, "-t"),
        (cli.pv_eta, "-e"),
        (cli.pv_average, "-a"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// Says `err` on standard error, for a failure that does not end the run.
fn warn(err: &anyhow::Error) {
    eprintln!("shape: {}", one_line(err));
}
