//! shape started as `toxiproxy-server` (or `toxiproxy`): toxiproxy's API
//! served on toxiproxy-server's command line, with its defaults, the
//! plan made by the argument step ([`super::step::toxiproxy`]).

use super::plan::ToxiproxyAsk;
use shape_leaves::exit::Exit;
use shape_toxiproxy::Refused;
use shape_toxiproxy::api::TOXIPROXY_VERSION;

/// Runs as `program` with toxiproxy-server's flags `args`.
pub fn run(program: &str, args: &[String]) -> Exit {
    let plan = match super::step::toxiproxy::plan(program, args) {
        ToxiproxyAsk::Serve(plan) => plan,
        ToxiproxyAsk::Version => {
            println!(
                "toxiproxy-server version {TOXIPROXY_VERSION} (shape {})",
                env!("CARGO_PKG_VERSION")
            );
            return Exit::Success;
        }
        ToxiproxyAsk::Help(usage) => {
            eprint!("{usage}");
            return Exit::Success;
        }
        ToxiproxyAsk::Refused(said) => {
            eprint!("{said}");
            return Exit::Usage;
        }
    };
    match super::serve::serve(&plan) {
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
