//! A fleet's share as Redis keeps it, and the atomic scripts that change
//! it. The keys of share NAME are:
//! - `shape:{NAME}:settings`, a hash: rate in tokens a second, 0 for
//!   unlimited; burst; paused; what is counted; a generation bumped by
//!   every change; whether the burst follows the rate. Beside them, what
//!   the share adds up, kept as each call changes it: tokens leased in all
//!   (for `--status`), the slopes counted now, the members, and those
//!   content with less than an even split (their count and demand).
//! - `:member`, a hash: each member's record (its demand, whether it is
//!   counted as content, the number of its last call, and its stretches
//!   in force: slopes in tokens a second, ends in microseconds of Redis's
//!   own clock, and the call that granted each, with its tokens).
//! - `:deadline`, a sorted set: when each member is forgotten unless it
//!   calls again.
//! - `:changes`, a sorted set: when each member's counted slope next
//!   falls.
//!
//! The braces keep them in one slot of a Redis Cluster. No call reads
//! every member: the sorted sets bring each forgotten member and each
//! ended stretch up once, so a call costs the same on a share of ten
//! members and of ten thousand.
//!
//! The scripts read the time with `TIME` and return only durations, so
//! the clients' clocks never matter; every number in them is an integer
//! below 2^53, where Lua's numbers are exact.

use super::connection::{Node, RedisConnection};
use super::plan::{Ask, Held, LeaseReply};
use super::url::RedisShare;
use redis::Script;
use shape_bucket::{Limit, Rate};
use shape_leaves::bucket::Adjustment;
use shape_leaves::counting::Counting;
use std::time::Duration;

mod error;

pub use error::StoreError;
use error::plain_to_tls;

/// How long connecting, and each call, may take before Redis counts as
/// unreachable.
pub const PATIENCE: Duration = Duration::from_secs(1);
/// How long a share's keys outlive their last use: a day.
const KEEP_MS: u64 = 86_400_000;
/// A lease whose first tokens are further off than this, or than two
/// lease times, is not reserved: the client asks again.
const FARTHEST_LEAD_US: u64 = 2_000_000;
/// A member that has not called for two of its lease times and this is
/// forgotten: it claims no part of the rate.
pub const GRACE_US: u64 = 1_000_000;
/// The share's lease time grows by this for every member, so that the
/// members together call about 200 times a second however many they are.
pub const PER_MEMBER_US: u64 = 5_000;
/// The shortest lease time, for a share of 20 members or fewer.
const LEAST_LEASE_US: u64 = 100_000;

/// Grants a lease of tokens and notes the caller as a member with its
/// demand. Creates the share with the caller's settings if it does not
/// exist, and puts them back if the caller knows a later generation of
/// them than Redis (which lost the share).
///
/// Each member has a timeline of its own: a lease is a stretch of it at
/// the member's *slope*, tokens a second, spendable from the stretch's
/// start less the share's burst in time. The slope is the caller's
/// max-min fair part of the rate (members that want less than an even
/// split get what they want, the others split the rest evenly), and never
/// more than what the other members' stretches still running leave of the
/// rate: so the slopes in force never add up to more than the rate, and
/// what all members may spend by any time never exceeds the rate times
/// the time plus the burst, however their calls interleave.
///
/// The lease time grows with the members (by [`PER_MEMBER_US`] each), so
/// that a share sees about the same number of calls a second whatever
/// its size; with leases over a second, a little of the rate (1%, or two
/// members' parts if less) is kept out of the parts, so that a member
/// that joins finds its part free at once rather than when the others'
/// long stretches end. A member given less than its part gets a short
/// stretch, so that its next lease, at a larger slope, is not far off.
///
/// Each call is numbered by its member, and says the last one whose
/// answer it took in: a stretch granted on a call that the member gave up
/// waiting for (a Redis that hung runs the calls queued meanwhile when it
/// wakes) is dropped, and a call older than one already run grants
/// nothing.
///
/// Returns granted, lead (us until the first granted token may be spent;
/// negative if some may be spent already), generation, rate, burst,
/// paused, counting, members, slope, follows, part (the member's fair
/// part, which the slope falls short of when the others' stretches leave
/// no room) and the share's lease time in us; granted is -1 if the share
/// counts something else than the caller, -2 if its settings cannot be
/// read.
const LEASE: &str = include_str!("../scripts/lease.lua");

/// Gives back unused tokens (the first argument) of the member (the
/// second) by ending its stretch earlier, never before now, and forgets
/// the member.
const GIVE_BACK: &str = include_str!("../scripts/give_back.lua");

/// Changes the settings of an existing share that counts the first
/// argument: rate, burst and paused where given (not empty). A burst never
/// set follows the rate: the fifth argument is the burst that goes with
/// the new rate. Returns the generation, or 0 if there is no such share,
/// -1 if it counts something else.
const UPDATE: &str = include_str!("../scripts/update.lua");

/// Starts a share afresh with the settings given (rate, burst, counting,
/// follows), unpaused, as the next generation: one script, so that it is
/// atomic on a cluster too, where MULTI cannot be routed.
const REPLACE: &str = include_str!("../scripts/replace.lua");

/// Shapes on the share whose deadlines are the key: those not yet
/// forgotten, by the clock of the node that holds it.
const MEMBERS: &str = include_str!("../scripts/members.lua");

/// A connection to the Redis that holds a share.
pub struct Store {
    connection: RedisConnection,
    keys: [String; 4],
    lease: Script,
    give_back: Script,
    update: Script,
    replace: Script,
}

impl Store {
    /// Connects to `share`'s server, within [`PATIENCE`].
    pub fn connect(share: &RedisShare) -> Result<Store, StoreError> {
        Store::connect_through(share, &[], false)
    }

    /// Connects as a member: with the scripts a member calls loaded, so
    /// that its calls each take one round trip from the first on (the
    /// round trip is what it plans by).
    /// `known` are nodes of the share's cluster from an earlier
    /// connection, to connect through if the share's own server is down.
    pub fn connect_member(share: &RedisShare, known: &[Node]) -> Result<Store, StoreError> {
        Store::connect_through(share, known, true)
    }

    /// Connects to `share`'s server, or, if it cannot be reached, to its
    /// cluster through the nodes `known`; with a member's scripts loaded
    /// if `member`.
    fn connect_through(
        share: &RedisShare,
        known: &[Node],
        member: bool,
    ) -> Result<Store, StoreError> {
        let connection = RedisConnection::open(share, PATIENCE, known)
            .map_err(|err| plain_to_tls(share, err))?;
        let key = |part| format!("shape:{{{}}}:{part}", share.name);
        let mut store = Store {
            connection,
            keys: [
                key("settings"),
                key("member"),
                key("deadline"),
                key("changes"),
            ],
            lease: Script::new(LEASE),
            give_back: Script::new(GIVE_BACK),
            update: Script::new(UPDATE),
            replace: Script::new(REPLACE),
        };
        // Asks something of the server now, so that a wrong password or
        // database is said here, not at the first lease.
        let mut first = redis::pipe();
        first.cmd("TYPE").arg(&store.keys[0]);
        if !store.connection.is_cluster() {
            if member {
                // In the same round trip: one each, a member 200 ms from
                // Redis took two seconds to make its first call.
                for script in [LEASE, GIVE_BACK] {
                    first.cmd("SCRIPT").arg("LOAD").arg(script).ignore();
                }
            }
            let _: (Option<String>,) = first.query(&mut store.connection)?;
            return Ok(store);
        }
        // A cluster's connection takes no pipeline, and loads a script on
        // every master.
        let _: Option<String> = redis::cmd("TYPE")
            .arg(&store.keys[0])
            .query(&mut store.connection)?;
        if member {
            store.lease.load(&mut store.connection)?;
            store.give_back.load(&mut store.connection)?;
        }
        Ok(store)
    }

    /// The settings the share holds, if it exists.
    pub fn held(&mut self) -> Result<Option<Held>, StoreError> {
        let fields: Vec<Option<String>> = self.held_command().query(&mut self.connection)?;
        self.read_held(&fields)
    }

    /// The settings the share holds, if it exists, and the shapes on it:
    /// in one round trip, for a shape that joins.
    pub fn held_and_members(&mut self) -> Result<(Option<Held>, u64), StoreError> {
        if self.connection.is_cluster() {
            // Its connection takes no pipeline.
            return Ok((self.held()?, self.members()?));
        }
        let (fields, members): (Vec<Option<String>>, u64) = redis::pipe()
            .add_command(self.held_command())
            .add_command(self.members_command())
            .query(&mut self.connection)?;
        Ok((self.read_held(&fields)?, members))
    }

    fn held_command(&self) -> redis::Cmd {
        let mut command = redis::cmd("HMGET");
        command.arg(&self.keys[0]).arg(&[
            "rate",
            "burst",
            "paused",
            "counting",
            "generation",
            "follows",
        ]);
        command
    }

    fn read_held(&self, fields: &[Option<String>]) -> Result<Option<Held>, StoreError> {
        read_held(fields, &self.keys[0])
    }

    /// Shapes on the share: those not yet forgotten.
    pub fn members(&mut self) -> Result<u64, StoreError> {
        Ok(self.members_command().query(&mut self.connection)?)
    }

    /// Sent whole (EVAL), as it is small: it needs no loading, so it
    /// shares a round trip with whatever goes before it.
    fn members_command(&self) -> redis::Cmd {
        let mut command = redis::cmd("EVAL");
        command.arg(MEMBERS).arg(1).arg(&self.keys[2]);
        command
    }

    /// Tokens leased in all, by every member ever.
    pub fn granted(&mut self) -> Result<u64, StoreError> {
        let granted: Option<i64> = redis::cmd("HGET")
            .arg(&self.keys[0])
            .arg("granted")
            .query(&mut self.connection)?;
        Ok(granted.unwrap_or(0).max(0) as u64)
    }

    /// Makes the lease call `ask` for member `id`.
    pub fn lease(&mut self, id: &str, ask: &Ask) -> Result<LeaseReply, StoreError> {
        let start = &ask.settings;
        let reply: Vec<i64> = self
            .lease
            .key(&self.keys[..])
            .arg(id)
            .arg(ask.want)
            .arg(tokens_per_second(start.limit))
            .arg(start.burst)
            .arg(start.counting.code())
            .arg(KEEP_MS)
            .arg(FARTHEST_LEAD_US)
            .arg(GRACE_US)
            .arg(u64::from(start.paused))
            .arg(start.generation)
            .arg(u64::from(start.follows))
            .arg(ask.demand)
            .arg(PER_MEMBER_US)
            .arg(ask.lasting.as_micros() as u64)
            .arg(LEAST_LEASE_US)
            .arg(ask.call)
            .arg(ask.heard)
            .invoke(&mut self.connection)?;
        read_lease(&reply, &self.keys[0], start.counting)
    }

    /// Gives back `unused` tokens and leaves the share.
    pub fn give_back(&mut self, id: &str, unused: u64) -> Result<(), StoreError> {
        let _: i64 = self
            .give_back
            .key(&self.keys[..])
            .arg(unused)
            .arg(id)
            .invoke(&mut self.connection)?;
        Ok(())
    }

    /// Changes an existing share that counts `counting`. `follower` is the
    /// burst that goes with the new limit, for a share whose burst was
    /// never set.
    pub fn update(
        &mut self,
        counting: Counting,
        change: &Adjustment,
        follower: Option<u64>,
    ) -> Result<(), StoreError> {
        let text = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
        let generation: i64 = self
            .update
            .key(&self.keys[0])
            .arg(counting.code())
            .arg(text(change.limit.map(tokens_per_second)))
            .arg(text(change.burst))
            .arg(text(change.paused.map(u64::from)))
            .arg(text(follower))
            .invoke(&mut self.connection)?;
        match generation {
            0 => Err(StoreError::Missing),
            -1 => match self.held()? {
                Some(held) => Err(StoreError::Counts {
                    theirs: held.counting.units(),
                    ours: counting.units(),
                }),
                None => Err(StoreError::Missing),
            },
            _ => Ok(()),
        }
    }

    /// Starts the share afresh with `settings`, for a shape that finds
    /// nobody on it.
    pub fn replace(&mut self, settings: &Held) -> Result<(), StoreError> {
        let _: i64 = self
            .replace
            .key(&self.keys[0])
            .arg(tokens_per_second(settings.limit))
            .arg(settings.burst)
            .arg(settings.counting.code())
            .arg(u64::from(settings.follows))
            .invoke(&mut self.connection)?;
        Ok(())
    }

    /// Whether the share's server is a cluster's node.
    pub fn in_a_cluster(&self) -> bool {
        self.connection.is_cluster()
    }

    /// The nodes of the share's cluster; none for a single server.
    pub fn cluster_nodes(&mut self) -> Vec<Node> {
        self.connection.nodes()
    }

    /// Removes the share, whatever it holds, and what earlier versions
    /// kept for it.
    pub fn remove(&mut self) -> Result<bool, StoreError> {
        let base = self.keys[0].trim_end_matches("settings");
        let earlier =
            ["leases", "members", "granted", "demand"].map(|part| format!("{base}{part}"));
        let removed: u64 = redis::cmd("DEL")
            .arg(&self.keys[..])
            .arg(&earlier[..])
            .query(&mut self.connection)?;
        Ok(removed > 0)
    }
}

/// A limit as the scripts keep it: whole tokens a second (at least one),
/// 0 for unlimited.
fn tokens_per_second(limit: Limit) -> u64 {
    match limit {
        Limit::Unlimited => 0,
        Limit::Rate(rate) => (rate.bytes_per_sec().round() as u64).max(1),
    }
}

/// Reads a lease call's `reply` for the share kept under `key`, for a
/// shape that counts `ours`. The reply is the server's: any numbers may
/// come, and what cannot be a lease is refused as unreadable.
pub fn read_lease(reply: &[i64], key: &str, ours: Counting) -> Result<LeaseReply, StoreError> {
    let [
        granted,
        lead,
        generation,
        rate,
        burst,
        paused,
        counting,
        members,
        slope,
        follows,
        part,
        lease_us,
    ] = reply[..]
    else {
        return Err(StoreError::Unreadable(key.to_string()));
    };
    let field = |n: i64| u64::try_from(n).map_err(|_| StoreError::Unreadable(key.to_string()));
    let held = held(
        [
            field(rate)?,
            field(burst)?,
            field(paused)?,
            field(counting)?,
            field(generation)?,
            field(follows)?,
        ],
        key,
    )?;
    if granted < 0 {
        return Err(StoreError::Counts {
            theirs: held.counting.units(),
            ours: ours.units(),
        });
    }
    Ok(LeaseReply {
        granted: field(granted)?,
        lead: lead.saturating_mul(1000),
        held,
        members: field(members)?,
        slope: field(slope)?,
        part: field(part)?,
        lease_time: Duration::from_micros(field(lease_us)?),
    })
}

/// Reads the `fields` of the share kept under `key` (rate, burst, paused,
/// counting, generation, follows): `None` if it does not exist. Any
/// strings may come, and what cannot be settings is refused as
/// unreadable.
pub fn read_held(fields: &[Option<String>], key: &str) -> Result<Option<Held>, StoreError> {
    let number = |field: &Option<String>| field.as_deref().map(str::parse::<u64>);
    match fields {
        [None, None, None, None, None, _] => Ok(None),
        [rate, burst, paused, counting, generation, follows] => {
            let read = |field| match number(field) {
                Some(Ok(value)) => Ok(value),
                _ => Err(StoreError::Unreadable(key.to_string())),
            };
            let follows = match number(follows) {
                None => 0,
                Some(Ok(value)) => value,
                Some(Err(_)) => return Err(StoreError::Unreadable(key.to_string())),
            };
            held(
                [
                    read(rate)?,
                    read(burst)?,
                    read(paused)?,
                    read(counting)?,
                    read(generation)?,
                    follows,
                ],
                key,
            )
            .map(Some)
        }
        _ => Err(StoreError::Unreadable(key.to_string())),
    }
}

/// Settings from the numbers the scripts keep in `key`: rate, burst,
/// paused, counting, generation, follows.
fn held(fields: [u64; 6], key: &str) -> Result<Held, StoreError> {
    let [rate, burst, paused, counting, generation, follows] = fields;
    let unreadable = || StoreError::Unreadable(key.to_string());
    let limit = match rate {
        0 => Limit::Unlimited,
        rate => Rate::from_whole(rate)
            .map(Limit::Rate)
            .ok_or_else(unreadable)?,
    };
    let counting = u32::try_from(counting)
        .ok()
        .and_then(Counting::from_code)
        .ok_or_else(unreadable)?;
    shape_bucket::check_burst(burst).map_err(|_| unreadable())?;
    Ok(Held {
        limit,
        burst,
        paused: paused != 0,
        counting,
        generation,
        follows: follows != 0,
    })
}
