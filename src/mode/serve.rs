//! Serve mode (`--serve`): toxiproxy's HTTP API, until SIGINT or SIGTERM.

use super::UsageError;
use super::plan::ServePlan;
use anyhow::anyhow;
use shape_leaves::exit::Exit;
use shape_toxiproxy::{ConfigFile, Extras, Refused, Serving, run as serve};

pub fn run(plan: &ServePlan) -> anyhow::Result<Exit> {
    let serving = Serving {
        address: &plan.address,
        config: plan.config.as_deref().map(|path| ConfigFile {
            path,
            flag: "--config",
        }),
        seed: plan.seed,
        allow_origins: &plan.allow_origins,
        extras: Extras {
            allow_unix: plan.allow_unix,
            runtime_metrics: plan.runtime_metrics,
            proxy_metrics: true,
        },
        config_optional: false,
        report: (!plan.quiet).then(Default::default),
        loops: plan.loops,
    };
    match serve(serving) {
        Ok(()) => Ok(Exit::Success),
        Err(Refused::Usage(why)) => Err(UsageError(why).into()),
        Err(Refused::Failed(why)) => Err(anyhow!(why)),
    }
}
