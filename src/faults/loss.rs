//! What `--drop` loses, datagram by datagram or block by block: at
//! random, each on its own, or in bursts on netem's Gilbert-Elliott
//! model, drawn from a generator the caller owns so that a seed replays
//! every loss.
//!
//! Gilbert-Elliott, as netem's `loss gemodel p [r [1-h [1-k]]]` takes it:
//! a link is good or bad; it turns bad with probability `p` at each
//! datagram and good again with `r` (default `1 - p`); a bad link loses a
//! datagram with `1-h` (default 100%), a good one with `1-k` (default 0).
//! In the long run it is bad `p / (p + r)` of the time, so it loses
//! `(r (1-k) + p (1-h)) / (p + r)` of the datagrams, and with the
//! defaults, in bursts of `1 / r` on average.

use super::parse_probability;

/// How `--drop` loses what passes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Each datagram with this probability, on its own.
    Random(f64),
    /// Bursts, on the Gilbert-Elliott model.
    GilbertElliott {
        /// Good to bad, per datagram.
        p: f64,
        /// Bad to good, per datagram.
        r: f64,
        /// Loss while bad (netem's `1-h`).
        bad_loss: f64,
        /// Loss while good (netem's `1-k`).
        good_loss: f64,
    },
}

impl Default for Loss {
    fn default() -> Loss {
        Loss::Random(0.0)
    }
}

impl std::str::FromStr for Loss {
    type Err = String;

    fn from_str(text: &str) -> Result<Loss, String> {
        Loss::parse(text)
    }
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let percent = |p: f64| format!("{}%", (p * 1e6).round() / 1e4);
        match *self {
            Loss::Random(p) => write!(f, "{}", percent(p)),
            Loss::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => write!(
                f,
                "gemodel:{},{},{},{}",
                percent(p),
                percent(r),
                percent(bad_loss),
                percent(good_loss)
            ),
        }
    }
}

impl Loss {
    /// Reads `PROB` or `gemodel:p[,r[,1-h[,1-k]]]`, each a probability as
    /// `--drop` takes one (`2%`, `0.02`).
    pub fn parse(text: &str) -> Result<Loss, String> {
        let Some(model) = text.strip_prefix("gemodel:") else {
            return parse_probability(text).map(Loss::Random);
        };
        let values = model
            .split(',')
            .map(parse_probability)
            .collect::<Result<Vec<f64>, String>>()?;
        let (p, r, bad_loss, good_loss) = match values[..] {
            [p] => (p, 1.0 - p, 1.0, 0.0),
            [p, r] => (p, r, 1.0, 0.0),
            [p, r, bad] => (p, r, bad, 0.0),
            [p, r, bad, good] => (p, r, bad, good),
            _ => {
                return Err(format!(
                    "gemodel takes one to four probabilities (p, r, 1-h, 1-k), not {}",
                    values.len()
                ));
            }
        };
        if p + r == 0.0 {
            return Err("gemodel needs p or r above 0: the link would never change".into());
        }
        Ok(Loss::GilbertElliott {
            p,
            r,
            bad_loss,
            good_loss,
        })
    }

    /// The share of datagrams lost in the long run.
    pub fn rate(&self) -> f64 {
        match *self {
            Loss::Random(probability) => probability,
            Loss::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => (r * good_loss + p * bad_loss) / (p + r),
        }
    }
}

/// A loss model running: the state of its link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Losing {
    loss: Loss,
    bad: bool,
}

impl Losing {
    /// Starts `loss` good.
    pub fn new(loss: Loss) -> Losing {
        Losing { loss, bad: false }
    }

    /// Whether the next datagram (or block) is lost, drawn from `draws`:
    /// one draw at random, two on Gilbert-Elliott's model.
    pub fn loses(&mut self, draws: &mut fastrand::Rng) -> bool {
        match self.loss {
            Loss::Random(probability) => probability > 0.0 && draws.f64() < probability,
            Loss::GilbertElliott {
                p,
                r,
                bad_loss,
                good_loss,
            } => {
                // As netem: the move is drawn first, the loss after it, at
                // the state the datagram came in.
                let loss = if self.bad { bad_loss } else { good_loss };
                let turn = draws.f64();
                self.bad = if self.bad { turn >= r } else { turn < p };
                draws.f64() < loss
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATAGRAMS: usize = 1_000_000;

    /// The share lost and the mean run of losses over a million datagrams.
    fn measure(loss: Loss, seed: u64) -> (f64, f64) {
        let (mut losing, mut draws) = (Losing::new(loss), fastrand::Rng::with_seed(seed));
        let (mut lost, mut runs, mut in_run) = (0usize, 0usize, false);
        for _ in 0..DATAGRAMS {
            let gone = losing.loses(&mut draws);
            lost += usize::from(gone);
            runs += usize::from(gone && !in_run);
            in_run = gone;
        }
        (
            lost as f64 / DATAGRAMS as f64,
            lost as f64 / runs.max(1) as f64,
        )
    }

    #[test]
    fn random_loss_loses_its_share_each_datagram_on_its_own() {
        let (share, run) = measure(Loss::Random(0.02), 1);
        assert!((share / 0.02 - 1.0).abs() < 0.02, "{share}");
        // Runs of independent losses average 1 / (1 - p).
        assert!((run - 1.0 / 0.98).abs() < 0.01, "{run}");
    }

    #[test]
    fn gilbert_elliott_matches_its_closed_forms_within_two_percent() {
        // Simple Gilbert: bursts of 1/r, a loss rate of p / (p + r). (Some
        // 45,000 bursts in a million datagrams: the spread of the share
        // measured is well under 1%.)
        let simple = Loss::parse("gemodel:5%,50%").unwrap();
        let (share, run) = measure(simple, 2);
        let expected = 0.05 / 0.55;
        assert!(
            (share / expected - 1.0).abs() < 0.02,
            "{share} of {expected}"
        );
        assert!((run / 2.0 - 1.0).abs() < 0.02, "bursts of {run}, not 2");
        // All four parameters: the rate from the stationary states.
        let full = Loss::parse("gemodel:2%,10%,60%,0.5%").unwrap();
        let (share, _) = measure(full, 3);
        assert!(
            (share / full.rate() - 1.0).abs() < 0.02,
            "{share} of {}",
            full.rate()
        );
    }

    #[test]
    fn a_seed_replays_every_loss() {
        let loss = Loss::parse("gemodel:5%,30%").unwrap();
        let run = |seed| {
            let (mut losing, mut draws) = (Losing::new(loss), fastrand::Rng::with_seed(seed));
            (0..10_000)
                .map(|_| losing.loses(&mut draws))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn bad_models_say_why() {
        assert_eq!(
            Loss::parse("gemodel:1%").unwrap(),
            Loss::GilbertElliott {
                p: 0.01,
                r: 0.99,
                bad_loss: 1.0,
                good_loss: 0.0
            }
        );
        assert!(Loss::parse("gemodel:").is_err());
        assert!(
            Loss::parse("gemodel:1%,2%,3%,4%,5%")
                .unwrap_err()
                .contains("one to four")
        );
        assert!(
            Loss::parse("gemodel:0,0")
                .unwrap_err()
                .contains("never change")
        );
        assert!(Loss::parse("gemodel:150%").is_err());
        let model = Loss::parse("gemodel:1%,30%,100%,0%").unwrap();
        assert_eq!(model.to_string().parse::<Loss>(), Ok(model));
    }
}
