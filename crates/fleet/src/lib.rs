//! One limit for a fleet: shapes on many machines spend from one share kept
//! in Redis (`--share redis://host/NAME`).
//!
//! Redis is not asked for every chunk. A shape spends from a bucket of its
//! own, at its part of the share's rate, and keeps that spending covered
//! by *leases*: stretches of a timeline of its own at that part, granted
//! on Redis's clock by an atomic script, each spendable from the
//! stretch's start less the share's burst in time. How a member sizes,
//! times and spends its leases is [`plan`]; the threads that carry it
//! out, one of which alone talks to Redis, are [`member`]. Every reply also carries the share's settings,
//! so a change made from any machine reaches every shape within a lease,
//! and members remember them, so that a Redis that lost the share gets the
//! latest back. Unused tokens are given back on exit.
//!
//! If Redis cannot be reached or refuses, the transfer goes on as
//! `--share-fallback` says (at the last known rate per shape, held, or
//! unlimited), said once; the member tries again with a growing pause on
//! the same connection while it holds, and says when Redis serves again.

#![forbid(unsafe_code)]

mod connection;
pub mod fuzzing;
mod member;
mod plan;
mod store;
#[cfg(test)]
mod swarm;
mod url;

pub use member::{Leaving, Member};
pub use plan::Held;
pub use store::StoreError;
pub use url::RedisShare;

use shape_leaves::bucket::{Bucket, own_empty};

use member::Identity;
use plan::{Event, Leases};
use shape_bucket::{Clock, MonotonicClock};
use shape_leaves::say::Printer;
use std::sync::Arc;

// What this crate builds on, named at its root as its own
// (`shape_leaves::counting`).
use store::Store;

/// Why a fleet's share could not be used.
#[derive(Debug, thiserror::Error)]
#[error("share {share}: {why}")]
pub struct FleetError {
    /// The address, its password hidden.
    share: String,
    why: String,
}

impl FleetError {
    fn new(share: &RedisShare, why: impl ToString) -> FleetError {
        FleetError {
            share: share.to_string(),
            why: shape_leaves::message::one_line(&why.to_string()),
        }
    }
}

/// Joins `share`: the share's settings win if other shapes are on it (the
/// notice returned says so if the user's differ); nobody on it, this
/// shape's settings start it afresh. The first lease is granted before
/// this returns, so that the copy starts at once. Returns the bucket to
/// spend from.
pub fn join(
    share: &RedisShare,
    joining: &shape_leaves::share::Joining,
    say: Option<Printer>,
) -> Result<(Arc<Bucket>, Member, Option<String>), FleetError> {
    let fail = |why: StoreError| FleetError::new(share, why);
    if let Some(say) = &say {
        warn_of_the_address(share, say);
    }
    let mut store = Store::connect_member(share, &[]).map_err(fail)?;
    let ours = Held {
        limit: joining.limit,
        burst: joining.burst,
        paused: false,
        counting: joining.counting,
        generation: 0,
        follows: !joining.burst_given,
    };
    let (held, notice) = settings_to_join(share, &mut store, ours, joining.settings_given)?;
    // Leases follow what the bucket granted: its spent counter also moves
    // by what it throws away after an idle spell, which no lease should pay.
    let bucket = Arc::new(
        own_empty(held.limit, held.burst)
            .map_err(|err| FleetError::new(share, err))?
            .counting_grants(),
    );
    let identity = Identity {
        share: share.clone(),
        id: format!(
            "{}:{}:{:x}",
            hostname(),
            std::process::id(),
            fastrand::u64(..)
        ),
        say,
    };
    let clock = MonotonicClock;
    let mut plan = Leases::new(
        held,
        joining.fallback,
        clock.now(),
        member::local(&bucket).granted,
    );
    // The first lease, made here, so that a failure is the command's.
    let first = plan.step(clock.now(), member::local(&bucket), Event::Tick);
    let ask = first.ask.expect("a new plan asks at once");
    let answer = store.lease(&identity.id, &ask).map_err(fail)?;
    let step = plan.step(clock.now(), member::local(&bucket), Event::Answered(answer));
    member::apply(&bucket, &step, None, share);
    let member = Member::start(identity, plan, bucket.clone(), store, step.ask)
        .map_err(|err| FleetError::new(share, err))?;
    Ok((bucket, member, notice))
}

/// Warns on `say` of what the address of `share` gives away: a password
/// that `ps` shows, or a server that is not verified.
fn warn_of_the_address(share: &RedisShare, say: &Printer) {
    if share.password_in_url {
        say.line(&format!(
            "shape: share {share}: the password in the address is visible to other users of this machine (ps); set {} instead",
            url::PASSWORD_VARIABLE
        ));
    }
    if share.tls == url::Tls::Insecure {
        say.line(&format!(
            "shape: share {share}: the server's certificate is not verified (#insecure): whoever answers at that address gets the share"
        ));
    }
}

/// The settings a shape that wants `ours` joins `share` with: the share's
/// while others are on it (with a notice if `given` settings differ),
/// else its own if given. A share that counts something else is refused.
fn settings_to_join(
    share: &RedisShare,
    store: &mut Store,
    ours: Held,
    given: bool,
) -> Result<(Held, Option<String>), FleetError> {
    let fail = |why: StoreError| FleetError::new(share, why);
    let (held, members) = store.held_and_members().map_err(fail)?;
    Ok(match held {
        Some(held) if held.counting != ours.counting => {
            return Err(fail(StoreError::Counts {
                theirs: held.counting.units(),
                ours: ours.counting.units(),
            }));
        }
        Some(_) if members == 0 => {
            if given {
                store.replace(&ours).map_err(fail)?;
            }
            (store.held().map_err(fail)?.unwrap_or(ours), None)
        }
        Some(held) => {
            let differs = (held.limit, held.burst) != (ours.limit, ours.burst);
            let notice = (given && differs).then(|| {
                format!(
                    "share {share} is at {}; using that (change it with --remote share:{share})",
                    describe(&held)
                )
            });
            (held, notice)
        }
        None => (ours, None),
    })
}

/// Settings as `--status` and notices show them: as a local share's.
pub fn describe(held: &Held) -> String {
    shape_leaves::bucket::Settings {
        limit: held.limit,
        burst: held.burst,
        paused: held.paused,
        counting: held.counting,
    }
    .to_string()
}

/// This machine's name, for members' names.
fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The one-off commands on a fleet's share.
pub mod commands {
    use super::store::Store;
    use super::*;
    use shape_leaves::bucket::Adjustment;
    use shape_leaves::counting::Counting;

    /// `--status`: the settings, the shapes on the share, and what they
    /// spend together, over half a second.
    pub fn status(share: &RedisShare) -> Result<String, FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let (mut store, held) = existing(share)?;
        let granted = shape_leaves::throughput::growth(|| store.granted()).map_err(fail)?;
        let members = store.members().map_err(fail)?;
        let used = granted / held.counting.tokens_per_unit() as f64;
        let shapes = if members == 1 { "shape" } else { "shapes" };
        let cluster = match store.in_a_cluster() {
            true => "; on a Redis Cluster",
            false => "",
        };
        Ok(format!(
            "share {share}: {}; {members} {shapes} on it; in use {}{cluster}",
            describe(&held),
            held.counting.show_rate(used)
        ))
    }

    /// `--remote share:redis://...`: changes the share for every shape on
    /// it as `asked` says, which reads the request as the share counts.
    pub fn change(
        share: &RedisShare,
        asked: impl FnOnce(Counting) -> Result<Adjustment, String>,
    ) -> Result<String, FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let (mut store, held) = existing(share)?;
        let change = asked(held.counting).map_err(|why| FleetError::new(share, why))?;
        // A burst never set follows the rate, as on a single shape.
        let follower = change
            .limit
            .map(|limit| shape_leaves::chunk::default_burst(limit, held.counting));
        // A request that changes nothing only asks.
        if change != Adjustment::default() {
            store
                .update(held.counting, &change, follower)
                .map_err(fail)?;
        }
        let now = store
            .held()
            .map_err(fail)?
            .ok_or_else(|| fail(StoreError::Missing))?;
        Ok(format!("share {share}: {}", describe(&now)))
    }

    /// A connection to `share`, which must exist, and its settings.
    fn existing(share: &RedisShare) -> Result<(Store, Held), FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let mut store = Store::connect(share).map_err(fail)?;
        let held = store.held().map_err(fail)?;
        Ok((store, held.ok_or_else(|| fail(StoreError::Missing))?))
    }

    /// `--reset`: removes the share unless shapes are on it.
    pub fn reset(share: &RedisShare) -> Result<bool, FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let mut store = Store::connect(share).map_err(fail)?;
        match store.members().map_err(fail)? {
            0 => store.remove().map_err(fail),
            n => Err(FleetError::new(
                share,
                format!("{n} running shapes are on it; stop them first"),
            )),
        }
    }
}
