//! `shape --remote PID ...`: asks the shape running as PID to change, and
//! prints the settings it then reports; `--remote share:NAME` changes the
//! share's bucket itself, for every shape on it.

use super::UsageError;
use crate::cli::{Cli, RemoteTarget};
use crate::control::{self, ControlDir, Request, Settings, share};
use crate::exit::Exit;
use anyhow::Context;
use shape_bucket::units::Size;
use std::time::Duration;

/// How long a running shape has to answer.
const PATIENCE: Duration = Duration::from_secs(1);

pub fn run(cli: &Cli, target: &RemoteTarget) -> anyhow::Result<Exit> {
    let request = Request {
        limit: cli.rate,
        burst: cli.burst.map(Size::bytes),
        paused: (cli.pause || cli.resume).then_some(cli.pause),
    };
    if request == Request::default() {
        return Err(
            UsageError("--remote needs --rate, --burst, --pause or --resume".into()).into(),
        );
    }
    let dir = ControlDir::open().context("control directory")?;
    let (who, settings) = match target {
        RemoteTarget::Process(pid) => (format!("shape {pid}"), dir.send(*pid, &request, PATIENCE)?),
        RemoteTarget::Share(name) => {
            let bucket = share::find(&dir, name)?;
            control::apply(&bucket, &request).with_context(|| format!("share {name}"))?;
            (format!("share {name}"), Settings::of(&bucket))
        }
    };
    println!("{who}: {settings}");
    Ok(Exit::Success)
}
