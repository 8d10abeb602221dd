//! The buckets a proxy's connections spend from together: each shared
//! bandwidth's, and each recorded link's with the thread that follows its
//! trace. Kept from one change of the proxy's toxics to the next, so that
//! a change that leaves a toxic's bucket alone leaves what its
//! connections spent, and where its trace is, as they were.

use shape_bucket::Limit;
use shape_impair::trace::Trace;
use shape_impair::trace::follow::{self, Following};
use shape_leaves::bucket::Bucket;
use std::sync::Arc;

/// A bucket that a proxy's connections spend from together, as a toxic
/// asks for one.
#[derive(Clone)]
pub enum Wanted {
    /// A shared bandwidth's: this limit and burst.
    Bandwidth { limit: Limit, burst: u64 },
    /// A recorded link's, following the trace.
    Trace(Arc<Trace>),
}

/// One toxic's bucket.
struct Kept {
    id: u64,
    bucket: Arc<Bucket>,
    /// A recorded link's trace, followed until this is dropped.
    following: Option<(Arc<Trace>, Following)>,
}

/// A proxy's shared buckets, by toxic.
#[derive(Default)]
pub struct SharedBuckets(Vec<Kept>);

/// What is called when a trace resumes a bucket it paused: the event
/// loop's "settings changed", which steps its waiting connections again.
pub type Changed = Arc<dyn Fn() + Send + Sync>;

impl SharedBuckets {
    /// Starts a change of the proxy's toxics: every bucket asked for with
    /// [`Keeping::bucket`] is kept, and those not asked for are let go
    /// (a trace no longer followed) when the change is dropped. A new
    /// trace's bucket calls `changed` when the trace resumes it.
    pub fn change(&mut self, changed: Changed) -> Keeping<'_> {
        let before = std::mem::take(&mut self.0);
        Keeping {
            buckets: self,
            before,
            changed,
        }
    }
}

/// A change of a proxy's toxics under way.
pub struct Keeping<'a> {
    buckets: &'a mut SharedBuckets,
    before: Vec<Kept>,
    changed: Changed,
}

impl Keeping<'_> {
    /// The bucket toxic `id` asks for as `wanted`: the one it had if that
    /// still serves (a bandwidth's given the new limit; a trace's if it
    /// is the same trace), or a new one. None if none can be made.
    pub fn bucket(&mut self, id: u64, wanted: Wanted) -> Option<Arc<Bucket>> {
        let had = self.before.iter().position(|kept| {
            kept.id == id
                && match (&wanted, &kept.following) {
                    (Wanted::Bandwidth { .. }, None) => true,
                    (Wanted::Trace(trace), Some((followed, _))) => Arc::ptr_eq(trace, followed),
                    _ => false,
                }
        });
        let kept = match had {
            Some(at) => self.before.swap_remove(at),
            None => made(id, &wanted, &self.changed)?,
        };
        if let Wanted::Bandwidth { limit, burst } = wanted
            && kept.bucket.limit_and_burst() != (limit, burst)
        {
            let _ = kept.bucket.set(limit, burst);
        }
        let bucket = kept.bucket.clone();
        self.buckets.0.push(kept);
        Some(bucket)
    }
}

/// A new bucket for toxic `id`, following its trace if it has one.
fn made(id: u64, wanted: &Wanted, changed: &Changed) -> Option<Kept> {
    let (limit, burst) = match wanted {
        Wanted::Bandwidth { limit, burst } => (*limit, *burst),
        // Set to the trace's first window at once.
        Wanted::Trace(_) => (Limit::Unlimited, 1),
    };
    let bucket = Arc::new(shape_leaves::bucket::own(limit, burst).ok()?);
    let following = match wanted {
        Wanted::Bandwidth { .. } => None,
        Wanted::Trace(trace) => Some((trace.clone(), {
            let changed = changed.clone();
            follow::follow_bucket(trace.clone(), bucket.clone(), move || changed()).ok()?
        })),
    };
    Some(Kept {
        id,
        bucket,
        following,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_is_kept_while_asked_for_and_a_new_trace_gets_a_new_one() {
        let mut buckets = SharedBuckets::default();
        let bandwidth = |rate| Wanted::Bandwidth {
            limit: Limit::per_second(rate),
            burst: 10,
        };
        let trace = Arc::new(Trace::read("t", "1\n").unwrap());
        let (first, traced) = {
            let mut change = buckets.change(Arc::new(|| {}));
            (
                change.bucket(1, bandwidth(1000)).unwrap(),
                change.bucket(2, Wanted::Trace(trace.clone())).unwrap(),
            )
        };
        // Its first window (0 to 9 ms) has nine opportunities.
        assert_eq!(traced.limit(), Limit::per_second(1_350_000));
        let (again, traced_again) = {
            let mut change = buckets.change(Arc::new(|| {}));
            (
                change.bucket(1, bandwidth(2000)).unwrap(),
                change.bucket(2, Wanted::Trace(trace.clone())).unwrap(),
            )
        };
        assert!(Arc::ptr_eq(&first, &again), "a bandwidth keeps its bucket");
        assert_eq!(again.limit(), Limit::per_second(2000));
        assert!(
            Arc::ptr_eq(&traced, &traced_again),
            "so does the same trace"
        );
        let other = Arc::new(Trace::read("u", "1\n").unwrap());
        let mut change = buckets.change(Arc::new(|| {}));
        let new = change.bucket(2, Wanted::Trace(other)).unwrap();
        assert!(!Arc::ptr_eq(&traced, &new), "another trace, another bucket");
        drop(change);
        assert_eq!(buckets.0.len(), 1, "toxic 1, not asked for, is let go");
    }
}
