//! A fleet's share as Redis keeps it, and the atomic scripts that change
//! it. The keys of share NAME are `shape:{NAME}:settings` (a hash: rate in
//! tokens a second, 0 for unlimited; burst; paused; what is counted; a
//! generation bumped by every change), `:tat` (the GCRA's theoretical
//! arrival time, in microseconds of Redis's own clock), `:members` (who
//! leased lately) and `:granted` (tokens leased in all, for `--status`).
//! The braces keep them in one slot of a Redis Cluster.
//!
//! The scripts read the time with `TIME` and return only durations, so
//! the clients' clocks never matter; every number in them is an integer
//! below 2^53, where Lua's numbers are exact.

use super::url::RedisShare;
use crate::counting::Counting;
use redis::{Connection, Script};
use shape_bucket::{Limit, Rate};
use std::time::Duration;

/// How long connecting, and each call, may take before Redis counts as
/// unreachable.
const PATIENCE: Duration = Duration::from_secs(2);
/// How long a share's keys outlive their last use: a day.
const KEEP_MS: u64 = 86_400_000;
/// A lease further off than this is not reserved: the client asks again.
const FARTHEST_WAIT_US: u64 = 500_000;
/// Members not seen for this long have left.
const MEMBER_TIMEOUT_US: u64 = 3_000_000;

/// Grants a lease of tokens against the share's GCRA, creating the share
/// with the caller's settings if it does not exist, and notes the caller
/// as a member. Returns granted, wait (us), generation, rate, burst,
/// paused, counting, members; granted is -1 if the share counts something
/// else than the caller.
const LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'rate', 'burst', 'paused', 'counting', 'generation')
if not s[5] then
  redis.call('HSET', KEYS[1], 'rate', ARGV[3], 'burst', ARGV[4], 'paused', 0,
             'counting', ARGV[5], 'generation', 1)
  s = {ARGV[3], ARGV[4], '0', ARGV[5], '1'}
end
local rate, burst, paused = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
local counting, generation = tonumber(s[4]), tonumber(s[5])
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[8]))
local members = redis.call('ZCARD', KEYS[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
local want, granted, wait = tonumber(ARGV[2]), 0, 0
if counting ~= tonumber(ARGV[5]) then
  granted = -1
elseif paused == 1 or want == 0 then
  granted = 0
elseif rate == 0 then
  granted = want
else
  local tat = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tat < now then tat = now end
  local cost = math.ceil(want * 1000000 / rate)
  local tau = math.floor(burst * 1000000 / rate)
  local allow = tat + cost - tau
  if allow > now then wait = allow - now end
  if wait <= tonumber(ARGV[7]) then
    redis.call('SET', KEYS[2], tat + cost, 'PX', ARGV[6])
    granted = want
  end
end
if granted > 0 then
  redis.call('INCRBY', KEYS[4], granted)
  redis.call('PEXPIRE', KEYS[4], ARGV[6])
end
return {granted, wait, generation, rate, burst, paused, counting, members}
";

/// Gives back unused tokens (the first argument) by moving the arrival time back,
/// never before now, and forgets the member (the second).
const GIVE_BACK: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(redis.call('HGET', KEYS[1], 'rate') or '0')
local tat = tonumber(redis.call('GET', KEYS[2]) or '0')
local unused = tonumber(ARGV[1])
if rate > 0 and tat > now and unused > 0 then
  local back = math.floor(unused * 1000000 / rate)
  local earlier = tat - back
  if earlier < now then earlier = now end
  redis.call('SET', KEYS[2], earlier, 'KEEPTTL')
end
if unused > 0 then redis.call('DECRBY', KEYS[4], unused) end
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
";

/// Changes the settings of an existing share that counts the first argument: rate,
/// burst and paused where given (not empty). Returns the generation, or
/// 0 if there is no such share, -1 if it counts something else.
const UPDATE: &str = r"
local s = redis.call('HMGET', KEYS[1], 'counting', 'generation')
if not s[2] then return 0 end
if tonumber(s[1]) ~= tonumber(ARGV[1]) then return -1 end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'rate', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'burst', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'paused', ARGV[4]) end
return redis.call('HINCRBY', KEYS[1], 'generation', 1)
";

/// The settings a share holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub limit: Limit,
    /// In tokens.
    pub burst: u64,
    pub paused: bool,
    pub counting: Counting,
    pub generation: u64,
}

/// What a lease call answered.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    /// Tokens granted; 0 when none were.
    pub granted: u64,
    /// When they may be spent (or, if none were granted, when to ask
    /// again).
    pub wait: Duration,
    pub held: Held,
    /// Shapes that leased in the last few seconds, the caller among them.
    pub members: u64,
}

/// Why Redis could not serve a share.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    #[error("it counts {theirs}, and this shape counts {ours}: a share counts one thing")]
    Counts {
        theirs: &'static str,
        ours: &'static str,
    },
    #[error("no such share")]
    Missing,
    #[error("the share holds settings shape cannot read")]
    Unreadable,
}

/// A connection to the Redis that holds a share.
pub struct Store {
    connection: Connection,
    keys: [String; 4],
    lease: Script,
    give_back: Script,
    update: Script,
}

impl Store {
    /// Connects to `share`'s server, within [`PATIENCE`].
    pub fn connect(share: &RedisShare) -> Result<Store, StoreError> {
        let client = redis::Client::open(share.connection_info())?;
        let connection = client.get_connection_with_timeout(PATIENCE)?;
        connection.set_read_timeout(Some(PATIENCE))?;
        connection.set_write_timeout(Some(PATIENCE))?;
        let key = |part| format!("shape:{{{}}}:{part}", share.name);
        let mut store = Store {
            connection,
            keys: [key("settings"), key("tat"), key("members"), key("granted")],
            lease: Script::new(LEASE),
            give_back: Script::new(GIVE_BACK),
            update: Script::new(UPDATE),
        };
        // Asks something of the server now, so that a wrong password or
        // database is said here, not at the first lease.
        let _: Option<String> = redis::cmd("TYPE")
            .arg(&store.keys[0])
            .query(&mut store.connection)?;
        Ok(store)
    }

    /// The settings the share holds, if it exists.
    pub fn held(&mut self) -> Result<Option<Held>, StoreError> {
        let fields: Vec<Option<u64>> = redis::cmd("HMGET")
            .arg(&self.keys[0])
            .arg(&["rate", "burst", "paused", "counting", "generation"])
            .query(&mut self.connection)?;
        match fields.as_slice() {
            [None, None, None, None, None] => Ok(None),
            [
                Some(rate),
                Some(burst),
                Some(paused),
                Some(counting),
                Some(generation),
            ] => held(*rate, *burst, *paused, *counting, *generation).map(Some),
            _ => Err(StoreError::Unreadable),
        }
    }

    /// Shapes that leased in the last few seconds.
    pub fn members(&mut self) -> Result<u64, StoreError> {
        let now = self.now_us()?;
        let since = now.saturating_sub(MEMBER_TIMEOUT_US);
        Ok(redis::cmd("ZCOUNT")
            .arg(&self.keys[2])
            .arg(since)
            .arg("+inf")
            .query(&mut self.connection)?)
    }

    /// Tokens leased in all, by every member ever.
    pub fn granted(&mut self) -> Result<u64, StoreError> {
        let granted: Option<i64> = redis::cmd("GET")
            .arg(&self.keys[3])
            .query(&mut self.connection)?;
        Ok(granted.unwrap_or(0).max(0) as u64)
    }

    /// Asks for a lease of `want` tokens for member `id`; `start` is what
    /// the share is created with if it does not exist.
    pub fn lease(&mut self, id: &str, want: u64, start: &Held) -> Result<Lease, StoreError> {
        let reply: Vec<i64> = self
            .lease
            .key(&self.keys[..])
            .arg(id)
            .arg(want)
            .arg(tokens_per_second(start.limit))
            .arg(start.burst)
            .arg(start.counting.code())
            .arg(KEEP_MS)
            .arg(FARTHEST_WAIT_US)
            .arg(MEMBER_TIMEOUT_US)
            .invoke(&mut self.connection)?;
        let [
            granted,
            wait,
            generation,
            rate,
            burst,
            paused,
            counting,
            members,
        ] = reply[..]
        else {
            return Err(StoreError::Unreadable);
        };
        let field = |n: i64| u64::try_from(n).map_err(|_| StoreError::Unreadable);
        let held = held(
            field(rate)?,
            field(burst)?,
            field(paused)?,
            field(counting)?,
            field(generation)?,
        )?;
        if granted < 0 {
            return Err(StoreError::Counts {
                theirs: held.counting.units(),
                ours: start.counting.units(),
            });
        }
        Ok(Lease {
            granted: field(granted)?,
            wait: Duration::from_micros(field(wait)?),
            held,
            members: field(members)?,
        })
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

    /// Changes an existing share that counts `counting`.
    pub fn update(
        &mut self,
        counting: Counting,
        limit: Option<Limit>,
        burst: Option<u64>,
        paused: Option<bool>,
    ) -> Result<(), StoreError> {
        let text = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
        let generation: i64 = self
            .update
            .key(&self.keys[0])
            .arg(counting.code())
            .arg(text(limit.map(tokens_per_second)))
            .arg(text(burst))
            .arg(text(paused.map(u64::from)))
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
        redis::pipe()
            .atomic()
            .hset_multiple(
                &self.keys[0],
                &[
                    ("rate", tokens_per_second(settings.limit)),
                    ("burst", settings.burst),
                    ("paused", 0),
                    ("counting", u64::from(settings.counting.code())),
                ],
            )
            .hincr(&self.keys[0], "generation", 1)
            .del(&self.keys[1])
            .query::<()>(&mut self.connection)?;
        Ok(())
    }

    /// Removes the share, whatever it holds.
    pub fn remove(&mut self) -> Result<bool, StoreError> {
        let removed: u64 = redis::cmd("DEL")
            .arg(&self.keys[..])
            .query(&mut self.connection)?;
        Ok(removed > 0)
    }

    /// Microseconds on Redis's clock.
    fn now_us(&mut self) -> Result<u64, StoreError> {
        let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(&mut self.connection)?;
        Ok(seconds * 1_000_000 + micros)
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

/// Settings from the numbers the scripts keep.
fn held(
    rate: u64,
    burst: u64,
    paused: u64,
    counting: u64,
    generation: u64,
) -> Result<Held, StoreError> {
    let limit = match rate {
        0 => Limit::Unlimited,
        rate => Rate::from_whole(rate)
            .map(Limit::Rate)
            .ok_or(StoreError::Unreadable)?,
    };
    let counting = u32::try_from(counting)
        .ok()
        .and_then(Counting::from_code)
        .ok_or(StoreError::Unreadable)?;
    shape_bucket::check_burst(burst).map_err(|_| StoreError::Unreadable)?;
    Ok(Held {
        limit,
        burst,
        paused: paused != 0,
        counting,
        generation,
    })
}
