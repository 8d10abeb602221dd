//! The one argument step, as ripgrep turns its low arguments into high
//! ones: the flags clap parsed ([`Cli`]) are checked as a whole
//! ([`check`]: the mode asked for, and the command line with a known
//! link's figures given), then made into the mode's plan
//! ([`Checked::plan`], in [`plans`]), before any mode starts. Every rule
//! between flags that clap cannot say (`requires` and `conflicts_with`
//! are beside the flags) is here, in the order it is checked, and each
//! refusal is one line, status 2. This is the one place below `mode/`
//! that reads [`Cli`]: a mode runs its plan. What is left to the modes is
//! what needs the world: sockets, Redis, the inputs.

pub(crate) mod http;
mod plans;
#[cfg(feature = "serve")]
pub mod toxiproxy;

pub use plans::Planned;

use super::UsageError;
use crate::cli::{Cli, Generated, RemoteTarget};
use crate::control::ShareName;
use shape_impair::conditions::Carried;
use shape_impair::profiles::LinkArg;
use shape_net::Address;
use std::ffi::OsString;

/// One thing shape can be asked to do, before its plan is made.
pub enum Asked {
    Generate(Generated),
    /// `--link list`.
    ListLinks,
    Remote(RemoteTarget),
    ShareStatus(ShareName),
    ShareReset(ShareName),
    Proxy {
        listen: Address,
        connect: Address,
    },
    Udp {
        listen: Address,
        connect: Address,
    },
    Serve(Address),
    Exec(Vec<OsString>),
    Copy,
}

impl Asked {
    /// True if the mode has two ways (up and down) to shape.
    fn two_ways(&self) -> bool {
        matches!(
            self,
            Asked::Proxy { .. } | Asked::Udp { .. } | Asked::Exec(_)
        )
    }
}

/// A command line that holds together: what to do, and the flags to do it
/// with, a known link's figures given where flags give none.
pub struct Checked {
    asked: Asked,
    cli: Cli,
}

/// `cli` checked, or the first rule it breaks.
pub fn check(cli: &Cli) -> Result<Checked, UsageError> {
    let mode = mode_of(cli)?;
    refuse(misplaced_trace(cli, &mode))?;
    let cli = match with_link(cli, &mode)? {
        Some(cli) => cli,
        None => {
            return Ok(Checked {
                asked: Asked::ListLinks,
                cli: cli.clone(),
            });
        }
    };
    if !matches!(
        mode,
        Asked::Udp { .. } | Asked::Generate(_) | Asked::Exec(_)
    ) && let Some(flag) = cli.udp.first_given()
    {
        return Err(UsageError(format!(
            "{flag} applies to a UDP link (--listen udp:ADDR with --connect udp:ADDR) or --exec"
        )));
    }
    // A datagram's faults, where there are none; sent with --remote, the
    // shape that takes them decides; --exec has both.
    if !matches!(
        mode,
        Asked::Udp { .. } | Asked::Generate(_) | Asked::Remote(_) | Asked::Exec(_)
    ) {
        refuse(
            cli.fault_changes()
                .iter()
                .find_map(|change| Carried::Stream.refuses(change.needs(), change.name())),
        )?;
    }
    refuse(not_for_the_mode(&cli, &mode))?;
    refuse(http::refused(&cli, &mode))?;
    if cli.loops.is_some() && !matches!(mode, Asked::Proxy { .. } | Asked::Serve(_)) {
        return Err(UsageError(
            "--loops applies to a proxy (--listen with --connect) or --serve".into(),
        ));
    }
    if mode.two_ways() && cli.share.is_some() {
        refuse(
            [(&cli.rate_up, "--rate-up"), (&cli.rate_down, "--rate-down")]
                .into_iter()
                .find_map(|(given, flag)| given.as_ref().map(|_| flag))
                .map(|flag| {
                    format!(
                        "{flag} with --share does not apply: on a share both ways spend from its \
                         one bucket"
                    )
                }),
        )?;
    }
    Ok(Checked { asked: mode, cli })
}

/// `cli` with a known link's figures given where flags give none, or
/// `None` for `--link list`; refused where a link does not apply.
fn with_link(cli: &Cli, mode: &Asked) -> Result<Option<Cli>, UsageError> {
    match &cli.link {
        None => Ok(Some(cli.clone())),
        Some(LinkArg::List) => match cli.beside_link_list() {
            Some(extra) => Err(UsageError(format!(
                "--link list prints the known links and takes nothing more: '{extra}'"
            ))),
            None => Ok(None),
        },
        Some(LinkArg::Profile(profile)) => match mode {
            Asked::Copy | Asked::Proxy { .. } | Asked::Udp { .. } | Asked::Exec(_) => {
                Ok(Some(cli.with_profile(profile, mode.two_ways())))
            }
            Asked::Remote(_) => Err(UsageError(
                "--link applies at start: change a running shape with --rate and --delay".into(),
            )),
            _ => Err(UsageError(
                "--link applies to a pipe, a proxy (--listen with --connect), a UDP link or \
                 --exec"
                    .into(),
            )),
        },
    }
}

/// Why `cli` does not suit `mode`: the first flag given that it has no
/// use for.
fn not_for_the_mode(cli: &Cli, mode: &Asked) -> Option<String> {
    match mode {
        Asked::Copy => not_for_a_copy(cli),
        Asked::Proxy { .. } => not_for_a_proxy(cli)
            .map(|flag| format!("{flag} does not apply to a proxy (--listen with --connect)")),
        Asked::Udp { .. } => not_for_datagrams(cli),
        Asked::Exec(_) => {
            not_for_a_command(cli).map(|flag| format!("{flag} does not apply to --exec"))
        }
        Asked::Serve(_) => not_for_the_server(cli)
            .map(|flag| format!("{flag} does not apply to --serve (each proxy's toxics shape it)")),
        Asked::Remote(target) => not_for_a_share(cli, target),
        _ => None,
    }
}

/// Refuses with `why`, if there is one.
fn refuse(why: Option<String>) -> Result<(), UsageError> {
    why.map_or(Ok(()), |why| Err(UsageError(why)))
}

/// The mode `cli` asks for, or why there is none: a udp: address given
/// with a stream's.
fn mode_of(cli: &Cli) -> Result<Asked, UsageError> {
    if let Some(what) = cli.generate {
        return Ok(Asked::Generate(what));
    }
    if let Some(target) = &cli.remote {
        return Ok(Asked::Remote(target.clone()));
    }
    match (&cli.share, cli.status, cli.reset) {
        (Some(name), true, _) => return Ok(Asked::ShareStatus(name.clone())),
        (Some(name), _, true) => return Ok(Asked::ShareReset(name.clone())),
        _ => {}
    }
    if let Some(address) = &cli.serve {
        return Ok(Asked::Serve(address.clone()));
    }
    if let Some(command) = &cli.exec {
        return Ok(Asked::Exec(command.clone()));
    }
    let udp = |address: &Option<Address>| matches!(address, Some(Address::Udp { .. }));
    Ok(match (&cli.listen, &cli.connect) {
        (Some(listen), Some(connect)) if udp(&cli.listen) && udp(&cli.connect) => Asked::Udp {
            listen: listen.clone(),
            connect: connect.clone(),
        },
        _ if udp(&cli.listen) || udp(&cli.connect) => {
            return Err(UsageError(
                "a udp: address carries datagrams: --listen udp:ADDR goes with --connect udp:ADDR"
                    .into(),
            ));
        }
        (Some(listen), Some(connect)) => Asked::Proxy {
            listen: listen.clone(),
            connect: connect.clone(),
        },
        _ => Asked::Copy,
    })
}

/// Why a trace given does not apply to `mode`, if it does not: a pipe
/// has one way (`--trace`), a proxy, a UDP link and `--exec` two
/// (`--trace-up`, `--trace-down`).
fn misplaced_trace(cli: &Cli, mode: &Asked) -> Option<String> {
    let one = cli.trace.is_some();
    let two = cli.trace_up.is_some() || cli.trace_down.is_some();
    match mode {
        _ if !one && !two => None,
        Asked::Copy if two => Some(
            "--trace-up and --trace-down apply to a proxy (--listen with --connect), a UDP link \
             or --exec: a pipe follows --trace"
                .into(),
        ),
        Asked::Proxy { .. } | Asked::Udp { .. } | Asked::Exec(_) if one => Some(
            "--trace applies to a pipe: a proxy, a UDP link or --exec follows --trace-up and \
             --trace-down"
                .into(),
        ),
        Asked::Copy | Asked::Proxy { .. } | Asked::Udp { .. } | Asked::Exec(_) => None,
        _ => Some(
            "a trace applies to a pipe (--trace), a proxy, a UDP link or --exec (--trace-up, \
             --trace-down)"
                .into(),
        ),
    }
}

/// The first of pv's display flags given, which shape refuses.
/// What a copy, which has one way and no connections, cannot be asked.
fn not_for_a_copy(cli: &Cli) -> Option<String> {
    if cli.rate_up.is_some() || cli.rate_down.is_some() {
        return Some(
            "--rate-up and --rate-down apply to a proxy (--listen with --connect) or --exec".into(),
        );
    }
    if cli.delay_up.is_some() || cli.delay_down.is_some() {
        return Some(
            "--delay-up and --delay-down apply to a proxy (--listen with --connect) or a UDP link"
                .into(),
        );
    }
    // `--rate 5 MiB`: a unit taken for a file's name.
    if let Some(hint) = crate::cli::split_unit(&cli.given, &cli.files) {
        return Some(hint);
    }
    if let Some(why) = cli
        .fault_changes()
        .iter()
        .find_map(|change| Carried::Pipe.refuses(change.needs(), change.name()))
    {
        return Some(why);
    }
    if let Some(change) = cli.fault_changes().iter().find(|change| change.one_sided()) {
        return Some(format!(
            "--{} {}: up: and down: are for a proxy's two directions",
            change.name(),
            change.text()
        ));
    }
    cli.affect
        .is_some()
        .then(|| "--affect is for a proxy's connections (--listen with --connect)".into())
}

/// The first flag given that a proxy has no use for: it has no end of its
/// own, and counts bytes.
fn not_for_a_proxy(cli: &Cli) -> Option<&'static str> {
    first_given([
        (
            cli.share.is_some() && cli.per_connection,
            "--per-connection with --share",
        ),
        (cli.stop_after.is_some(), "--stop-after"),
        (cli.size.is_some(), "--size"),
        (cli.stats, "--stats"),
        (cli.connect_timeout.is_some(), "--connect-timeout"),
        (cli.lines, "--lines"),
        (cli.null, "--null"),
    ])
}

/// Why `cli` cannot be a UDP link: a fault that datagrams cannot carry, or
/// what a proxy has no use for either.
fn not_for_datagrams(cli: &Cli) -> Option<String> {
    let refused = cli
        .fault_changes()
        .iter()
        .find_map(|change| Carried::Datagrams.refuses(change.needs(), change.name()));
    refused.or_else(|| {
        not_for_a_proxy(cli).map(|flag| format!("{flag} does not apply to datagrams (udp:)"))
    })
}

/// The first flag given that a command's traffic has no use for.
fn not_for_a_command(cli: &Cli) -> Option<&'static str> {
    first_given([
        (cli.per_connection, "--per-connection"),
        (cli.stop_after.is_some(), "--stop-after"),
        (cli.size.is_some(), "--size"),
        (cli.lines, "--lines"),
        (cli.null, "--null"),
    ])
}

/// The first flag given that means nothing to the server, whose proxies
/// are shaped by their toxics alone.
fn not_for_the_server(cli: &Cli) -> Option<&'static str> {
    first_given([
        (cli.rate.is_some(), "--rate"),
        (cli.burst.is_some(), "--burst"),
        (cli.rate_up.is_some(), "--rate-up"),
        (cli.rate_down.is_some(), "--rate-down"),
        (cli.per_connection, "--per-connection"),
        (cli.stop_after.is_some(), "--stop-after"),
        (cli.size.is_some(), "--size"),
        (cli.stats, "--stats"),
        (cli.lines, "--lines"),
        (cli.null, "--null"),
        (cli.rate_file.is_some(), "--rate-file"),
        (cli.schedule.is_some(), "--schedule"),
        (!cli.fault_changes().is_empty(), "a fault flag"),
        (cli.affect.is_some(), "--affect"),
        (cli.delay.is_some(), "--delay"),
        (cli.delay_up.is_some(), "--delay-up"),
        (cli.delay_down.is_some(), "--delay-down"),
    ])
}

/// Why `--remote` cannot ask `target` what `cli` asks: a share has a rate,
/// a burst and a pause, and no delay, jitter or faults.
fn not_for_a_share(cli: &Cli, target: &RemoteTarget) -> Option<String> {
    let one_way = first_given([
        (cli.rate_up.is_some(), "--rate-up"),
        (cli.rate_down.is_some(), "--rate-down"),
    ]);
    if let (Some(flag), false) = (one_way, matches!(target, RemoteTarget::Process(_))) {
        return Some(format!(
            "{flag} changes one way of a running proxy or --exec (--remote PID); a share has \
             one rate (--rate)"
        ));
    }
    let retunes =
        !cli.fault_changes().is_empty() || cli.delay_changes() != [None; 2] || cli.jitter.is_some();
    (retunes && !matches!(target, RemoteTarget::Process(_))).then(|| {
        "--remote share: changes the rate, burst and pause; delay, jitter and faults are a \
         shape's own (--remote PID)"
            .into()
    })
}

/// The flag of the first pair given.
fn first_given<const N: usize>(flags: [(bool, &'static str); N]) -> Option<&'static str> {
    flags
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(args: &[&str]) -> Result<Checked, String> {
        let args = std::iter::once("shape").chain(args.iter().copied());
        let cli = crate::cli::parse_from(args.map(OsString::from)).expect("parses");
        check(&cli).map_err(|why| why.0)
    }

    fn refusal(args: &[&str]) -> String {
        match checked(args) {
            Ok(_) => panic!("{args:?} was not refused"),
            Err(why) => why,
        }
    }

    #[test]
    fn each_mode_is_picked_from_its_flags() {
        let mode = |args: &[&str]| checked(args).map(|checked| checked.asked).unwrap();
        assert!(matches!(mode(&["--rate", "1MiB"]), Asked::Copy));
        assert!(matches!(
            mode(&["--listen", "127.0.0.1:0", "--connect", "127.0.0.1:1"]),
            Asked::Proxy { .. }
        ));
        assert!(matches!(
            mode(&[
                "--listen",
                "udp:127.0.0.1:0",
                "--connect",
                "udp:127.0.0.1:1"
            ]),
            Asked::Udp { .. }
        ));
        assert!(matches!(mode(&["--serve", "127.0.0.1:0"]), Asked::Serve(_)));
        assert!(matches!(mode(&["--link", "list"]), Asked::ListLinks));
        assert!(matches!(mode(&["--exec", "true"]), Asked::Exec(_)));
    }

    #[test]
    fn link_list_refuses_what_is_given_beside_it() {
        assert!(refusal(&["--link", "list", "extra"]).contains("'extra'"));
        assert!(refusal(&["--link", "list", "--exec", "true"]).contains("'--exec'"));
        assert!(refusal(&["-q", "--link=list"]).contains("'-q'"));
    }

    #[test]
    fn a_known_link_gives_what_no_flag_gives() {
        let both = ["--listen", "127.0.0.1:0", "--connect", "127.0.0.1:1"];
        let checked =
            checked(&[&both[..], &["--link", "3g", "--rate-up", "1MiB"]].concat()).unwrap();
        let text = |rate: &Option<shape_leaves::counting::Written<shape_bucket::RateSpec>>| {
            rate.as_ref().map(|rate| rate.text.clone())
        };
        assert_eq!(text(&checked.cli.rate_up).as_deref(), Some("1MiB"));
        assert_eq!(text(&checked.cli.rate_down).as_deref(), Some("1.6Mbit"));
    }

    #[test]
    fn each_rule_between_flags_refuses_in_one_line() {
        // A trace is read as its flag is parsed.
        let trace = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(trace.path(), "1\n").unwrap();
        let t: &'static str = trace.path().to_str().unwrap().to_string().leak();
        fn with(more: &[&'static str]) -> Vec<&'static str> {
            [
                &["--listen", "127.0.0.1:0", "--connect", "127.0.0.1:1"][..],
                more,
            ]
            .concat()
        }
        for (args, said) in [
            (
                vec!["--listen", "udp:127.0.0.1:0", "--connect", "127.0.0.1:1"],
                "a udp: address carries datagrams",
            ),
            (vec!["--trace-up", t], "a pipe follows --trace"),
            (with(&["--trace", t]), "--trace applies to a pipe"),
            (
                vec!["--remote", "1", "--link", "3g"],
                "--link applies at start",
            ),
            (
                vec!["--udp-idle", "10s"],
                "--udp-idle applies to a UDP link",
            ),
            (
                vec!["--listen", "127.0.0.1:0", "--rate-up", "1MiB"],
                "--rate-up and --rate-down apply to a proxy",
            ),
            (
                vec!["--affect", "0.5"],
                "--affect is for a proxy's connections",
            ),
            (with(&["--stats"]), "--stats does not apply to a proxy"),
            (
                vec!["--lines", "--exec", "true"],
                "--lines does not apply to --exec",
            ),
            (
                vec!["--serve", "127.0.0.1:0", "--rate", "1"],
                "--rate does not apply to --serve",
            ),
            (
                vec!["--remote", "share:backup", "--delay", "1s"],
                "delay, jitter and faults are a shape's own",
            ),
            (
                with(&["--share", "backup", "--rate-up", "1MiB"]),
                "--rate-up with --share does not apply",
            ),
            (
                vec![
                    "--listen",
                    "udp:127.0.0.1:0",
                    "--connect",
                    "udp:127.0.0.1:1",
                    "--loops",
                    "2",
                ],
                "--loops applies to a proxy",
            ),
        ] {
            let why = refusal(&args);
            assert!(why.contains(said), "{args:?}: {why}");
            assert!(!why.contains('\n'), "{args:?}: {why}");
        }
    }
}
