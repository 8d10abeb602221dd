//! shape started as `toxiproxy-server` (or `toxiproxy`): toxiproxy's API
//! served on toxiproxy-server's command line, with its defaults.

use crate::cli::toxiproxy::{ServerCommand, parse, usage};
use shape_leaves::exit::Exit;
use shape_net::{Address, loops_per_core};
use shape_toxiproxy::api::TOXIPROXY_VERSION;
use shape_toxiproxy::{ConfigFile, Extras, Refused, Serving, run as serve};

/// Runs as `program` with toxiproxy-server's flags `args`.
pub fn run(program: &str, args: &[String]) -> Exit {
    let flags = match parse(args) {
        ServerCommand::Serve(flags) => flags,
        ServerCommand::Version => {
            println!(
                "toxiproxy-server version {TOXIPROXY_VERSION} (shape {})",
                env!("CARGO_PKG_VERSION")
            );
            return Exit::Success;
        }
        ServerCommand::Help => {
            eprint!("{}", usage(program));
            return Exit::Success;
        }
        ServerCommand::Refused(why) => {
            eprint!("{why}\n{}", usage(program));
            return Exit::Usage;
        }
    };
    let address: Address = match flags.address().parse() {
        Ok(address) => address,
        Err(why) => {
            // The host is the user's: a control character in it must
            // not break the line.
            let line = format!("shape: -host {} -port {}: {why}", flags.host, flags.port);
            eprintln!("{}", shape_leaves::message::escape_controls(&line));
            return Exit::Usage;
        }
    };
    let serving = Serving {
        address: &address,
        config: flags.config.as_deref().map(|path| ConfigFile {
            path,
            flag: "-config",
        }),
        seed: flags.seed.unwrap_or_else(|| fastrand::u64(..)),
        allow_origins: &[],
        extras: Extras {
            allow_unix: false,
            runtime_metrics: flags.runtime_metrics,
            proxy_metrics: flags.proxy_metrics,
        },
        config_optional: true,
        loops: loops_per_core(),
        report: Some(Default::default()),
    };
    match serve(serving) {
        Ok(()) => Exit::Success,
        Err(Refused::Usage(why)) => {
            eprintln!("shape: {why}");
            Exit::Usage
        }
        Err(Refused::Failed(why)) => {
            eprintln!("shape: {why}");
            Exit::Failure
        }
    }
}
