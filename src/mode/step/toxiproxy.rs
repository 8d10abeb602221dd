//! The argument step for shape under toxiproxy-server's name: its
//! command line, read as toxiproxy-server reads it
//! ([`crate::cli::toxiproxy`]), made into the plan of serving the API
//! with toxiproxy-server's defaults.

use crate::cli::toxiproxy::{ServerCommand, parse, usage};
use crate::mode::plan::{ServePlan, ToxiproxyAsk};
use shape_net::{Address, loops_per_core};

/// What `program` with toxiproxy-server's flags `args` asks for.
pub fn plan(program: &str, args: &[String]) -> ToxiproxyAsk {
    let flags = match parse(args) {
        ServerCommand::Serve(flags) => flags,
        ServerCommand::Version => return ToxiproxyAsk::Version,
        ServerCommand::Help => return ToxiproxyAsk::Help(usage(program)),
        ServerCommand::Refused(why) => {
            return ToxiproxyAsk::Refused(format!("{why}\n{}", usage(program)));
        }
    };
    let address: Address = match flags.address().parse() {
        Ok(address) => address,
        Err(why) => {
            // The host is the user's: a control character in it must
            // not break the line.
            let line = format!("shape: -host {} -port {}: {why}", flags.host, flags.port);
            let line = shape_leaves::message::escape_controls(&line);
            return ToxiproxyAsk::Refused(format!("{line}\n"));
        }
    };
    ToxiproxyAsk::Serve(ServePlan {
        address,
        config: flags.config.map(|path| (path, "-config")),
        // toxiproxy-server serves without a config it cannot read.
        config_optional: true,
        seed: flags.seed.unwrap_or_else(|| fastrand::u64(..)),
        allow_origins: Vec::new(),
        allow_unix: false,
        runtime_metrics: flags.runtime_metrics,
        proxy_metrics: flags.proxy_metrics,
        quiet: false,
        loops: loops_per_core(),
    })
}
