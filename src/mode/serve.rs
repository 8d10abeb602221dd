//! Serve mode (`--serve`): toxiproxy's HTTP API, until SIGINT or SIGTERM.

use super::UsageError;
use crate::cli::Cli;
use crate::exit::Exit;
use crate::net::Address;
use crate::serve::{ConfigFile, Extras, Refused, Serving, run as serve};
use anyhow::anyhow;

pub fn run(cli: &Cli, address: &Address) -> anyhow::Result<Exit> {
    if let Some(flag) = not_for_the_server(cli) {
        return Err(UsageError(format!(
            "{flag} does not apply to --serve (each proxy's toxics shape it)"
        ))
        .into());
    }
    let serving = Serving {
        address,
        config: cli.config.as_deref().map(|path| ConfigFile {
            path,
            flag: "--config",
        }),
        seed: cli.seed.unwrap_or_else(|| fastrand::u64(..)),
        allow_origins: &cli.serve_allow_origin,
        extras: Extras {
            allow_unix: cli.serve_allow_unix,
            runtime_metrics: cli.runtime_metrics,
            proxy_metrics: true,
        },
        config_optional: false,
        report: (!cli.quiet).then(Default::default),
    };
    match serve(serving) {
        Ok(()) => Ok(Exit::Success),
        Err(Refused::Usage(why)) => Err(UsageError(why).into()),
        Err(Refused::Failed(why)) => Err(anyhow!(why)),
    }
}

/// The first flag given that means nothing to the server, whose proxies
/// are shaped by their toxics alone.
fn not_for_the_server(cli: &Cli) -> Option<&'static str> {
    [
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
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}
