//! A timer that wakes poll to the microsecond.

use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};
use std::io;
use std::os::fd::OwnedFd;

/// A timer that wakes poll at a moment on the monotonic clock, to the
/// microsecond: poll's own timeout counts whole milliseconds, which would
/// make every release time and token deadline up to a millisecond late.
pub struct Alarm {
    pub fd: OwnedFd,
    /// The moment it is set for, if armed.
    armed: Option<u64>,
}

impl Alarm {
    pub fn new() -> io::Result<Alarm> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        Ok(Alarm { fd, armed: None })
    }

    /// Rings at `moment` (a value of [`MonotonicClock`](shape_bucket::MonotonicClock)) instead of when
    /// it was set for. Returns false if it could not be set.
    pub fn ring_at(&mut self, moment: u64) -> bool {
        if self.armed == Some(moment) {
            return true;
        }
        let at = shape_bucket::clock::timespec(moment);
        let once = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: at,
        };
        let set = timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &once).is_ok();
        self.armed = set.then_some(moment);
        set
    }

    /// Takes note that it rang, so that it can ring again.
    pub fn silence(&mut self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut count);
        self.armed = None;
    }
}
