//! Serve mode (`--serve`): toxiproxy's HTTP API, until SIGINT or SIGTERM.

use super::UsageError;
use crate::cli::Cli;
use anyhow::anyhow;
use shape_leaves::exit::Exit;
use shape_net::{Address, loops_per_core};
use shape_toxiproxy::{ConfigFile, Extras, Refused, Serving, run as serve};

pub fn run(cli: &Cli, address: &Address) -> anyhow::Result<Exit> {
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
        loops: cli.loops.map_or_else(loops_per_core, usize::from),
    };
    match serve(serving) {
        Ok(()) => Ok(Exit::Success),
        Err(Refused::Usage(why)) => Err(UsageError(why).into()),
        Err(Refused::Failed(why)) => Err(anyhow!(why)),
    }
}
