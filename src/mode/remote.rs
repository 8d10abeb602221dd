//! `shape --remote PID ...`: asks the shape running as PID to change, and
//! prints the settings it then reports; `--remote share:NAME` changes the
//! share's bucket itself, for every shape on it.

use super::plan::RemotePlan;
use crate::cli::RemoteTarget;
use crate::control::{Adjuster, ControlDir, ShareName, fleet, share};
use anyhow::Context;
use shape_leaves::bucket::Settings;
use shape_leaves::exit::Exit;
use std::sync::Arc;
use std::time::Duration;

/// How long a running shape has to answer.
const PATIENCE: Duration = Duration::from_secs(1);

pub fn run(RemotePlan { target, request }: &RemotePlan) -> anyhow::Result<Exit> {
    let (who, settings) = match target {
        RemoteTarget::Process(pid) => {
            let dir = ControlDir::open().context("control directory")?;
            (
                format!("shape {pid}"),
                dir.send(*pid, request, PATIENCE)?.to_string(),
            )
        }
        RemoteTarget::Share(ShareName::Local(name)) => {
            let dir = ControlDir::open().context("control directory")?;
            let (bucket, counting) = share::find(&dir, name)?;
            let bucket = Arc::new(bucket);
            // As a shape on the share would change it: one rule for all.
            Adjuster::new(bucket.clone(), counting, false)
                .apply(request)
                .map_err(|why| anyhow::anyhow!("share {name}: {why}"))?;
            (
                format!("share {name}"),
                Settings::of(&bucket, counting).to_string(),
            )
        }
        RemoteTarget::Share(ShareName::Redis(share)) => {
            println!(
                "{}",
                fleet::commands::change(share, |counting| request.adjustment(counting))?
            );
            return Ok(Exit::Success);
        }
    };
    println!("{who}: {settings}");
    Ok(Exit::Success)
}
