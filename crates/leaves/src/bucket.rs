//! The bucket a run spends from: `shape-bucket`'s token bucket on the
//! machine's monotonic clock, over a cell of this process's own or one
//! that something else keeps (a share file mapped into memory). What owns
//! a shared cell says what to call it when it is damaged, and keeps the
//! share's rule for its burst; this module knows neither files nor
//! shares. It also says what a change of a bucket's settings is
//! ([`Adjustment`]), applies one, and shows the settings in force
//! ([`Settings`]).

use crate::counting::Counting;
use shape_bucket::{BucketCell, Clock, Fill, InvalidBurst, Limit, MonotonicClock, TokenBucket};
use std::fmt;
use std::io;
use std::ops::Deref;
use std::sync::atomic::AtomicU32;

/// The bucket of a running shape: its own, or a share's.
pub type Bucket = TokenBucket<MonotonicClock, Cell>;

/// A cell kept by something other than this process alone.
pub trait SharedCell: Send + Sync {
    /// The cell itself.
    fn cell(&self) -> &BucketCell;
    /// Whether the burst follows the rate: a flag that every user of the
    /// cell reads and clears, so that they keep one rule.
    fn burst_rule(&self) -> &AtomicU32;
    /// What to say when the cell is found damaged: where it is, and the
    /// way out.
    fn damage_line(&self) -> String;
}

/// The flag of a shared cell whose burst nobody set: a change of rate
/// gives it the default burst of the new rate.
pub const BURST_FOLLOWS_RATE: u32 = 1;

/// Where a bucket's cell lives.
pub enum Cell {
    /// In this process only.
    Own(Box<BucketCell>),
    /// Somewhere others reach too.
    Shared(Box<dyn SharedCell>),
}

impl Deref for Cell {
    type Target = BucketCell;
    fn deref(&self) -> &BucketCell {
        match self {
            Cell::Own(cell) => cell,
            Cell::Shared(shared) => shared.cell(),
        }
    }
}

impl Cell {
    /// The shared rule for the burst, if the cell is shared; `None` for a
    /// cell of this process's own, whose owner keeps the rule.
    pub fn shared_burst_rule(&self) -> Option<&AtomicU32> {
        match self {
            Cell::Own(_) => None,
            Cell::Shared(shared) => Some(shared.burst_rule()),
        }
    }
}

/// What to say when `bucket` is found damaged.
pub fn damage_line(bucket: &Bucket) -> String {
    match bucket.cell() {
        Cell::Shared(shared) => shared.damage_line(),
        Cell::Own(_) => shape_bucket::Damaged.to_string(),
    }
}

/// A bucket of this process's own, starting full.
pub fn own(limit: Limit, burst: u64) -> Result<Bucket, InvalidBurst> {
    own_filled(limit, burst, Fill::Full)
}

/// A bucket of this process's own, starting empty: for tokens that come
/// from elsewhere (a fleet's leases).
pub fn own_empty(limit: Limit, burst: u64) -> Result<Bucket, InvalidBurst> {
    own_filled(limit, burst, Fill::Empty)
}

fn own_filled(limit: Limit, burst: u64, fill: Fill) -> Result<Bucket, InvalidBurst> {
    let cell = BucketCell::new(limit, burst, fill, MonotonicClock.now())?;
    Ok(TokenBucket::from_cell(
        Cell::Own(Box::new(cell)),
        MonotonicClock,
    ))
}

/// Calls `wake` whenever `bucket`'s settings change, on a
/// thread asleep on its generation (a futex, reached from any process).
pub fn watch_for_changes(
    bucket: std::sync::Arc<Bucket>,
    wake: impl Fn() + Send + 'static,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("settings-watch".into())
        .spawn(move || {
            let mut seen = bucket.generation();
            loop {
                bucket.sleep_until_changed(seen);
                let now = bucket.generation();
                if now != seen {
                    seen = now;
                    wake();
                }
            }
        })?;
    Ok(())
}

/// A change of a bucket's settings, in its tokens; `None` keeps the
/// current value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Adjustment {
    pub limit: Option<Limit>,
    pub burst: Option<u64>,
    pub paused: Option<bool>,
}

/// Applies `change` to `bucket` as one change where it can. A burst the
/// bucket cannot take refuses the whole change, before anything changes.
pub fn apply<C: Clock, S: Deref<Target = BucketCell>>(
    bucket: &TokenBucket<C, S>,
    change: &Adjustment,
) -> Result<(), String> {
    if let Some(burst) = change.burst {
        shape_bucket::check_burst(burst).map_err(|err| err.to_string())?;
    }
    let refused = |err: shape_bucket::InvalidBurst| err.to_string();
    match (change.limit, change.burst) {
        (Some(limit), Some(burst)) => bucket.set(limit, burst).map_err(refused)?,
        (Some(limit), None) => bucket.set_limit(limit),
        (None, Some(burst)) => bucket.set_burst(burst).map_err(refused)?,
        (None, None) => {}
    }
    if let Some(paused) = change.paused {
        bucket.set_paused(paused);
    }
    Ok(())
}

/// The settings in force, as an acknowledgement reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub limit: Limit,
    /// In tokens.
    pub burst: u64,
    pub paused: bool,
    pub counting: Counting,
}

impl Settings {
    /// The settings of `bucket`, which counts `counting`, now.
    pub fn of<C: Clock, S: Deref<Target = BucketCell>>(
        bucket: &TokenBucket<C, S>,
        counting: Counting,
    ) -> Settings {
        let (limit, burst) = bucket.limit_and_burst();
        Settings {
            limit,
            burst,
            paused: bucket.paused(),
            counting,
        }
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counting = self.counting;
        write!(
            f,
            "rate {}, burst {}",
            counting.show_limit(self.limit),
            counting.show_tokens(self.burst)
        )?;
        if self.paused {
            f.write_str(", paused")?;
        }
        Ok(())
    }
}
