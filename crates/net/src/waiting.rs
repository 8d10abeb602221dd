//! How an event loop waits: for its sockets' events or for a moment, to
//! the nanosecond, in one system call a wake.
//!
//! `epoll_pwait2` takes its timeout in nanoseconds, so the loop calls it
//! on mio's own epoll and reads the events' tokens itself. Where the
//! kernel lacks it (before Linux 5.11) or a seccomp profile refuses it,
//! mio's poll counts whole milliseconds and a timerfd ([`Alarm`]) rings
//! for what is finer: three calls a timed wake (set, wait, read) instead
//! of one. At 50 connections of 200 kB/s the loops wake about a thousand
//! times a second for their deadlines, so the two calls are worth saving.

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustix::event::epoll;
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Duration;

/// The most events taken in one wait.
const EVENTS_AT_ONCE: usize = 1024;

/// Waits on a loop's poll, and says which tokens its events came for.
pub struct Waiting {
    how: How,
}

enum How {
    /// `epoll_pwait2`: one call a wake, to the nanosecond. Its events
    /// are taken on the stack: rustix's are not `Send`, and a loop is
    /// made on one thread and run on another.
    Precise,
    /// mio's poll, in milliseconds, and an alarm for what is finer,
    /// registered under its token.
    Alarmed {
        events: Events,
        alarm: Option<(Alarm, Token)>,
    },
}

impl Waiting {
    /// Waits on `poll`. Where only the alarm can wait to the nanosecond,
    /// it is registered there under `alarm_token`, which the loop must
    /// leave free; its events are never handed to the loop.
    pub fn new(poll: &Poll, alarm_token: Token) -> Waiting {
        if precise_waits() {
            return Waiting { how: How::Precise };
        }
        let alarm = Alarm::new().ok().filter(|alarm| {
            let fd = alarm.fd.as_raw_fd();
            poll.registry()
                .register(&mut SourceFd(&fd), alarm_token, Interest::READABLE)
                .is_ok()
        });
        Waiting {
            how: How::Alarmed {
                events: Events::with_capacity(EVENTS_AT_ONCE),
                alarm: alarm.map(|alarm| (alarm, alarm_token)),
            },
        }
    }

    /// Waits until an event comes or the moment `until` (a value of
    /// [`MonotonicClock`](shape_bucket::MonotonicClock); `None`: for an
    /// event alone), and puts the tokens of the events in `tokens`.
    /// `now` is the moment as the loop last read it. An interrupted wait
    /// comes back with no tokens.
    pub fn wait(
        &mut self,
        poll: &mut Poll,
        until: Option<u64>,
        now: u64,
        tokens: &mut Vec<Token>,
    ) -> io::Result<()> {
        tokens.clear();
        let timeout = until.map(|until| Duration::from_nanos(until.saturating_sub(now)));
        let waited = match &mut self.how {
            How::Precise => {
                let mut events = [const { MaybeUninit::<epoll::Event>::uninit() }; EVENTS_AT_ONCE];
                let timeout = timeout.map(|timeout| Timespec {
                    tv_sec: timeout.as_secs() as i64,
                    tv_nsec: i64::from(timeout.subsec_nanos()),
                });
                epoll::wait(poll.registry().as_fd(), &mut events[..], timeout.as_ref())
                    .map_err(io::Error::from)
                    .map(|(events, _)| {
                        let woken = events.iter().map(|event| event.data.u64() as usize);
                        tokens.extend(woken.map(Token));
                    })
            }
            How::Alarmed { events, alarm } => {
                // A moment to come is the alarm's, if it can be set.
                let rings = |alarm: &mut Option<(Alarm, Token)>, at| {
                    alarm.as_mut().is_some_and(|(alarm, _)| alarm.ring_at(at))
                };
                let timeout = match (timeout, until) {
                    (Some(timeout), Some(at)) if !timeout.is_zero() && rings(alarm, at) => None,
                    (timeout, _) => timeout,
                };
                poll.poll(events, timeout).map(|()| {
                    for event in events.iter() {
                        match alarm {
                            Some((alarm, token)) if event.token() == *token => alarm.silence(),
                            _ => tokens.push(event.token()),
                        }
                    }
                })
            }
        };
        match waited {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            waited => waited,
        }
    }
}

/// Whether `epoll_pwait2` can be called here: tried once on an epoll of
/// its own, since a seccomp profile may refuse what the kernel has.
fn precise_waits() -> bool {
    static PRECISE: OnceLock<bool> = OnceLock::new();
    *PRECISE.get_or_init(|| {
        let Ok(epoll) = epoll::create(epoll::CreateFlags::CLOEXEC) else {
            return false;
        };
        let mut events = Vec::with_capacity(1);
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        epoll::wait(
            &epoll,
            rustix::buffer::spare_capacity(&mut events),
            Some(&now),
        )
        .is_ok()
    })
}

/// A timer that wakes poll at a moment on the monotonic clock, to the
/// microsecond: poll's own timeout counts whole milliseconds, which would
/// make every release time and token deadline up to a millisecond late.
struct Alarm {
    fd: OwnedFd,
    /// The moment it is set for, if armed.
    armed: Option<u64>,
}

impl Alarm {
    fn new() -> io::Result<Alarm> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        Ok(Alarm { fd, armed: None })
    }

    /// Rings at `moment` instead of when it was set for. Returns false if
    /// it could not be set.
    fn ring_at(&mut self, moment: u64) -> bool {
        if self.armed == Some(moment) {
            return true;
        }
        let once = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: shape_bucket::clock::timespec(moment),
        };
        let set = timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &once).is_ok();
        self.armed = set.then_some(moment);
        set
    }

    /// Takes note that it rang, so that it can ring again.
    fn silence(&mut self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut count);
        self.armed = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_bucket::{Clock, MonotonicClock};

    /// Both ways of waiting wake at a moment finer than a millisecond,
    /// within a wide margin for a busy machine, and say which token an
    /// event came for.
    #[test]
    fn a_wait_ends_at_its_moment_or_at_an_event_with_its_token() {
        let mut ways = vec![How::Alarmed {
            events: Events::with_capacity(8),
            alarm: Alarm::new().ok().map(|alarm| (alarm, Token(usize::MAX))),
        }];
        if precise_waits() {
            ways.push(How::Precise);
        }
        for how in ways {
            let mut poll = Poll::new().unwrap();
            let mut waiting = Waiting { how };
            if let How::Alarmed {
                alarm: Some((alarm, token)),
                ..
            } = &waiting.how
            {
                let fd = alarm.fd.as_raw_fd();
                poll.registry()
                    .register(&mut SourceFd(&fd), *token, Interest::READABLE)
                    .unwrap();
            }
            let clock = MonotonicClock;
            let mut tokens = Vec::new();
            let start = clock.now();
            let until = start + 1_300_000;
            while tokens.is_empty() && clock.now() < until {
                waiting
                    .wait(&mut poll, Some(until), clock.now(), &mut tokens)
                    .unwrap();
            }
            let waited = clock.now() - start;
            assert!(tokens.is_empty(), "the alarm's event is its own");
            assert!((1_300_000..200_000_000).contains(&waited), "{waited} ns");
            let waker = mio::Waker::new(poll.registry(), Token(7)).unwrap();
            waker.wake().unwrap();
            waiting
                .wait(&mut poll, None, clock.now(), &mut tokens)
                .unwrap();
            assert_eq!(tokens, [Token(7)]);
        }
    }
}
