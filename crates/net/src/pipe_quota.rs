//! What the kernel lets this process hold in pipes, and what it holds.
//!
//! An unprivileged user's pipes share one quota,
//! `/proc/sys/fs/pipe-user-pages-soft` (16,384 pages, 64 MiB, by
//! default). Past it, the kernel gives each new pipe two pages and
//! refuses to grow any: spliced through such pipes, a proxy of 100
//! connections moved 40% less at 2.5 times the CPU. So pipes are sized to
//! what is left of the quota, smaller as it fills, and none is made once
//! less than a default pipe is left: bytes are then copied, which costs
//! what the copy path costs. A user with `CAP_SYS_RESOURCE` (root) has no
//! quota.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes in a page of a pipe.
const PAGE: usize = 4096;
/// The least pipe worth splicing through: the kernel's default size.
pub const LEAST_PAGES: usize = 16;
/// Of what is left of the quota, the share one new pipe may ask for: the
/// first pipes get all they ask, later ones less, so that many fit.
const SHARE_OF_WHAT_IS_LEFT: usize = 8;

/// Pages held in this process's pipes.
static HELD: AtomicUsize = AtomicUsize::new(0);
/// Pages held when the kernel last gave a pipe less than asked: others
/// of the user's processes hold the rest of the quota. No pipe is asked
/// for past it until what is held falls to half of it.
static CEILING: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The pages this process's pipes may hold: `None` without a quota.
fn quota() -> Option<usize> {
    static QUOTA: OnceLock<Option<usize>> = OnceLock::new();
    *QUOTA.get_or_init(|| {
        use rustix::thread::CapabilitySet;
        let privileged = rustix::thread::capabilities(None).is_ok_and(|sets| {
            sets.effective
                .intersects(CapabilitySet::SYS_RESOURCE | CapabilitySet::SYS_ADMIN)
        });
        let soft = std::fs::read_to_string("/proc/sys/fs/pipe-user-pages-soft").ok()?;
        let soft = soft
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&pages| pages > 0)?;
        (!privileged).then_some(soft)
    })
}

/// The bytes a new pipe should ask for when `wanted` are wanted: all of
/// it without a quota, else a share of what is left, but at least a
/// default pipe; `None` once not even that is left. Loops asking at once
/// may each be granted the last of it: the kernel lets a user past its
/// soft quota by what a pipe takes, as the hard quota is what it enforces.
pub fn grant(wanted: usize) -> Option<usize> {
    let limit = quota().map(|quota| quota.min(CEILING.load(Ordering::Relaxed)));
    granted(limit, HELD.load(Ordering::Relaxed), wanted)
}

/// [`grant`] when `held` pages are held of `limit` (`None`: no limit).
fn granted(limit: Option<usize>, held: usize, wanted: usize) -> Option<usize> {
    let Some(limit) = limit else {
        return Some(wanted);
    };
    let left = limit.saturating_sub(held);
    if left < LEAST_PAGES {
        return None;
    }
    // Pipe sizes are whole powers of two pages.
    let share = (left / SHARE_OF_WHAT_IS_LEFT).max(LEAST_PAGES);
    Some(wanted.min((1 << share.ilog2()) * PAGE))
}

/// What one pipe holds of the quota, given back when it is dropped.
#[derive(Debug)]
pub struct PipePages(usize);

impl PipePages {
    /// Takes note of a pipe of `bytes`, which was asked to hold `asked`.
    /// Returns `None` (and holds nothing) if the kernel gave less than a
    /// pipe worth splicing through, where a quota applies.
    pub fn take(bytes: usize, asked: usize) -> Option<PipePages> {
        let pages = bytes / PAGE;
        let held = HELD.fetch_add(pages, Ordering::Relaxed);
        if bytes < asked.min(LEAST_PAGES * PAGE) && quota().is_some() {
            CEILING.store(held, Ordering::Relaxed);
            HELD.fetch_sub(pages, Ordering::Relaxed);
            return None;
        }
        Some(PipePages(pages))
    }
}

impl Drop for PipePages {
    fn drop(&mut self) {
        let held = HELD.fetch_sub(self.0, Ordering::Relaxed) - self.0;
        let ceiling = CEILING.load(Ordering::Relaxed);
        if ceiling != usize::MAX && held <= ceiling / 2 {
            CEILING.store(usize::MAX, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_granted_what_it_wants_or_a_share_of_what_is_left_in_whole_pages() {
        let mib = 1 << 20;
        assert_eq!(granted(None, 1_000_000, mib), Some(mib), "no quota");
        // 64 MiB of quota: 1 MiB pipes while 8 MiB are left, then less.
        assert_eq!(granted(Some(16_384), 0, mib), Some(mib));
        assert_eq!(granted(Some(16_384), 14_336, mib), Some(mib));
        assert_eq!(granted(Some(16_384), 14_337, mib), Some(mib / 2));
        assert_eq!(granted(Some(16_384), 16_000, mib), Some(128 * 1024));
        assert_eq!(granted(Some(16_384), 16_368, mib), Some(64 * 1024));
        assert_eq!(granted(Some(16_384), 16_369, mib), None, "copied instead");
        assert_eq!(
            granted(Some(16_384), 0, 4096),
            Some(4096),
            "no more than wanted"
        );
    }

    #[test]
    fn a_pipe_the_kernel_gave_too_little_is_refused_and_sets_a_ceiling() {
        let held = PipePages::take(1 << 20, 1 << 20).expect("given what it asked");
        assert_eq!(held.0, 256);
        drop(held);
        match quota() {
            // Root: whatever the kernel gave is kept.
            None => assert!(PipePages::take(8192, 1 << 20).is_some()),
            Some(_) => {
                assert!(PipePages::take(8192, 1 << 20).is_none());
                assert_ne!(CEILING.swap(usize::MAX, Ordering::Relaxed), usize::MAX);
            }
        }
    }
}
