//! The conditions of a link that may change while shape runs: the faults
//! of each direction, the delay and the jitter, as set at start and then
//! changed by `--remote`. Those who carry them out look at a generation
//! number, cheap enough to read for every chunk, and take the new
//! conditions when it moves.

use crate::faults::{Change, Faults, Needs, Way};
use shape_leaves::lock::lock;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The conditions in force, shared by all who carry them out.
#[derive(Debug)]
pub struct Conditions {
    /// Moves with every change.
    generation: AtomicU64,
    now: Mutex<InForce>,
    /// Why the faults, or the delay and jitter, cannot change in this
    /// run, if they cannot.
    fixed: Fixed,
}

/// What cannot change in a run, and why.
#[derive(Debug, Default)]
pub struct Fixed {
    /// Every fault.
    pub faults: Option<&'static str>,
    /// The faults that end or hold a stream: `--stall-after`,
    /// `--reset-after`, `--cut-after`, `--slow-close`.
    pub ends: Option<&'static str>,
    pub delay: Option<&'static str>,
    /// A delay of one direction alone (`--delay-up`, `--delay-down`),
    /// where there is one direction.
    pub one_way: Option<&'static str>,
    /// What the faults act on, which refuses those that need the other.
    pub carried: Carried,
}

/// What a run's faults act on: a stream (a TCP proxy's), a pipe's (a
/// copy's, which has no packets), a UDP link's datagrams, or both
/// (`--exec`'s connections and datagrams).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Carried {
    #[default]
    Stream,
    Pipe,
    Datagrams,
    Both,
}

impl Carried {
    /// Why a fault that needs `needs` cannot act on this, if it cannot;
    /// `flag` is its name without dashes.
    pub fn refuses(self, needs: Needs, flag: &str) -> Option<String> {
        match (self, needs) {
            (Carried::Pipe, Needs::Packets) => Some(format!(
                "--{flag} applies to a proxy (--listen with --connect), --exec or a UDP link: \
                 a pipe has no packets to send again (--drop deletes blocks of a copy)"
            )),
            (Carried::Stream | Carried::Pipe, Needs::Datagrams) => Some(format!(
                "--{flag} applies to a UDP link (--listen udp:ADDR with --connect udp:ADDR) or \
                 --exec"
            )),
            (Carried::Datagrams, Needs::Stream | Needs::Ending) => {
                Some(format!("--{flag} does not apply to datagrams (udp:)"))
            }
            _ => None,
        }
    }
}

/// The conditions in force: each direction's delay and faults, and the
/// jitter.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct InForce {
    /// The faults of each direction, up then down (a pipe's is down).
    pub faults: [Faults; 2],
    /// The delay of each direction, up then down (a pipe's is down).
    pub delay: [Duration; 2],
    pub jitter: Duration,
}

impl InForce {
    pub fn faults(&self, direction: Way) -> Faults {
        self.faults[direction as usize]
    }

    pub fn delay(&self, direction: Way) -> Duration {
        self.delay[direction as usize]
    }
}

impl InForce {
    /// What is in force beyond the rate: `delay 200ms, jitter 10ms;
    /// stall-after 2s`; empty if nothing is. A proxy's directions
    /// (`two_ways`) are named where they differ: `up: drop 1%; down: ...`.
    pub fn describe(&self, two_ways: bool) -> String {
        let mut said = Vec::new();
        let [up, down] = self
            .delay
            .map(|delay| humantime::format_duration(delay).to_string());
        let delay = match (two_ways && up != down, self.delay(Way::Down).is_zero()) {
            (true, _) => Some(format!("delay up {up}, down {down}")),
            (false, false) => Some(format!("delay {down}")),
            (false, true) => None,
        };
        if let Some(mut link) = delay {
            if !self.jitter.is_zero() {
                link += &format!(", jitter {}", humantime::format_duration(self.jitter));
            }
            said.push(link);
        }
        let [up, down] = self.faults.map(|faults| faults.to_string());
        if !two_ways || up == down {
            said.extend(Some(down).filter(|faults| !faults.is_empty()));
        } else {
            said.extend(
                [("up", up), ("down", down)]
                    .into_iter()
                    .filter(|(_, faults)| !faults.is_empty())
                    .map(|(way, faults)| format!("{way}: {faults}")),
            );
        }
        said.join("; ")
    }
}

/// A change of the conditions: fault flags, in order, and each
/// direction's delay and the jitter if given.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Retune {
    pub faults: Vec<Change>,
    /// Up, then down.
    pub delay: [Option<Duration>; 2],
    pub jitter: Option<Duration>,
}

impl Retune {
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty() && self.delay == [None; 2] && self.jitter.is_none()
    }
}

impl Conditions {
    pub fn new(now: InForce) -> Conditions {
        Conditions::fixing(now, Fixed::default())
    }

    /// Conditions of which `fixed` cannot change.
    pub fn fixing(now: InForce, fixed: Fixed) -> Conditions {
        Conditions {
            generation: AtomicU64::new(0),
            now: Mutex::new(now),
            fixed,
        }
    }

    /// True if the faults may change while running.
    pub fn faults_may_change(&self) -> bool {
        self.fixed.faults.is_none()
    }

    /// Refuses `retune` if it changes what cannot change, or asks for a
    /// fault that what is carried cannot take, saying why.
    pub fn check(&self, retune: &Retune) -> Result<(), String> {
        if let Some(why) = retune
            .faults
            .iter()
            .find_map(|change| self.fixed.carried.refuses(change.needs(), change.name()))
        {
            return Err(why);
        }
        match (&self.fixed, retune) {
            (
                Fixed {
                    faults: Some(why), ..
                },
                Retune { faults, .. },
            ) if !faults.is_empty() => Err(why.to_string()),
            (
                Fixed {
                    ends: Some(why), ..
                },
                Retune { faults, .. },
            ) if faults.iter().any(Change::ends) => Err(why.to_string()),
            (
                Fixed {
                    delay: Some(why), ..
                },
                Retune { delay, jitter, .. },
            ) if *delay != [None; 2] || jitter.is_some() => Err(why.to_string()),
            (
                Fixed {
                    one_way: Some(why), ..
                },
                Retune {
                    delay: [up, down], ..
                },
            ) if up != down => Err(why.to_string()),
            _ => Ok(()),
        }
    }

    /// The conditions in force.
    pub fn now(&self) -> InForce {
        *lock(&self.now)
    }

    /// Puts `now` in force in place of what was.
    pub fn set(&self, now: InForce) {
        *lock(&self.now) = now;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Applies `retune`, which [`Conditions::check`] has let through.
    pub fn change(&self, retune: &Retune) {
        let mut now = lock(&self.now);
        for change in &retune.faults {
            for direction in Way::BOTH {
                change.apply(&mut now.faults[direction as usize], direction);
            }
        }
        for (delay, new) in now.delay.iter_mut().zip(retune.delay) {
            *delay = new.unwrap_or(*delay);
        }
        now.jitter = retune.jitter.unwrap_or(now.jitter);
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// One reader's view of [`Conditions`]: which generation it has seen.
#[derive(Debug, Default)]
pub struct Watch {
    seen: u64,
}

impl Watch {
    /// The conditions now, marked as seen.
    pub fn now(&mut self, conditions: &Conditions) -> InForce {
        self.seen = conditions.generation.load(Ordering::Acquire);
        conditions.now()
    }

    /// The conditions now, if they changed since last asked.
    pub fn changed(&mut self, conditions: &Conditions) -> Option<InForce> {
        let generation = conditions.generation.load(Ordering::Acquire);
        if generation == self.seen {
            return None;
        }
        self.seen = generation;
        Some(conditions.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_sees_each_change_once() {
        let conditions = Conditions::new(InForce::default());
        let mut watch = Watch::default();
        assert_eq!(watch.changed(&conditions), None);
        let retune = Retune {
            faults: vec![Change::parse("drop", "down:0.5").unwrap()],
            delay: [Some(Duration::from_millis(100)); 2],
            jitter: None,
        };
        conditions.change(&retune);
        let now = watch.changed(&conditions).unwrap();
        assert_eq!(now.faults(Way::Down).drop.rate(), 0.5);
        assert_eq!(now.faults(Way::Up).drop.rate(), 0.0);
        assert_eq!(now.delay, [Duration::from_millis(100); 2]);
        assert_eq!(now.describe(true), "delay 100ms; down: drop 50%");
        assert_eq!(watch.changed(&conditions), None);
        conditions.change(&Retune::default());
        assert_eq!(
            watch.changed(&conditions),
            Some(now),
            "a change to the same"
        );
        conditions.change(&Retune {
            delay: [None, Some(Duration::from_millis(30))],
            ..Retune::default()
        });
        let one_way = watch.changed(&conditions).unwrap();
        let [up, down] = one_way.delay.map(|d| d.as_millis());
        assert_eq!((up, down), (100, 30), "the down direction's alone");
        assert!(
            one_way
                .describe(true)
                .starts_with("delay up 100ms, down 30ms")
        );
        let fixed = Conditions::fixing(
            InForce::default(),
            Fixed {
                faults: Some("no faults here"),
                ..Fixed::default()
            },
        );
        assert_eq!(fixed.check(&retune), Err("no faults here".to_string()));
        let delay_only = Retune {
            faults: Vec::new(),
            ..retune
        };
        assert_eq!(fixed.check(&delay_only), Ok(()));
        let one_way = Conditions::fixing(
            InForce::default(),
            Fixed {
                one_way: Some("one direction here"),
                ..Fixed::default()
            },
        );
        assert_eq!(one_way.check(&delay_only), Ok(()), "both ways alike");
        let up_alone = Retune {
            delay: [Some(Duration::from_millis(5)), None],
            ..Retune::default()
        };
        assert_eq!(
            one_way.check(&up_alone),
            Err("one direction here".to_string())
        );
    }

    #[test]
    fn what_is_carried_refuses_the_faults_it_cannot_take() {
        let asking = |flag: &str, value: &str| Retune {
            faults: vec![Change::parse(flag, value).unwrap()],
            ..Retune::default()
        };
        let stream = Conditions::new(InForce::default());
        let refused = stream.check(&asking("duplicate", "1%")).unwrap_err();
        assert!(
            refused.contains("--duplicate applies to a UDP link"),
            "{refused}"
        );
        assert_eq!(stream.check(&asking("slice", "7")), Ok(()));
        let link = Conditions::fixing(
            InForce::default(),
            Fixed {
                carried: Carried::Datagrams,
                ..Fixed::default()
            },
        );
        assert_eq!(link.check(&asking("duplicate", "1%")), Ok(()));
        assert_eq!(link.check(&asking("mtu", "up:1200:cut")), Ok(()));
        assert_eq!(link.check(&asking("drop", "2%")), Ok(()));
        for (flag, value) in [("slice", "7"), ("cut-after", "1KiB")] {
            let refused = link.check(&asking(flag, value)).unwrap_err();
            assert!(
                refused.contains(&format!("--{flag} does not apply")),
                "{refused}"
            );
        }
    }
}
