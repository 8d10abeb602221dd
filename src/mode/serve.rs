//! Serve mode (`--serve`, or shape under toxiproxy-server's name):
//! toxiproxy's HTTP API, until SIGINT or SIGTERM.

use super::UsageError;
use super::plan::ServePlan;
use anyhow::anyhow;
use shape_leaves::exit::Exit;
use shape_toxiproxy::{ConfigFile, Extras, Refused, Serving};

pub fn run(plan: &ServePlan) -> anyhow::Result<Exit> {
    match serve(plan) {
        Ok(()) => Ok(Exit::Success),
        Err(Refused::Usage(why)) => Err(UsageError(why).into()),
        Err(Refused::Failed(why)) => Err(anyhow!(why)),
    }
}

/// Serves as `plan` says, until SIGINT or SIGTERM.
pub fn serve(plan: &ServePlan) -> Result<(), Refused> {
    let serving = Serving {
        address: &plan.address,
        config: plan
            .config
            .as_ref()
            .map(|(path, flag)| ConfigFile { path, flag }),
        seed: plan.seed,
        allow_origins: &plan.allow_origins,
        extras: Extras {
            allow_unix: plan.allow_unix,
            runtime_metrics: plan.runtime_metrics,
            proxy_metrics: plan.proxy_metrics,
        },
        config_optional: plan.config_optional,
        report: (!plan.quiet).then(Default::default),
        loops: plan.loops,
    };
    shape_toxiproxy::run(serving)
}
