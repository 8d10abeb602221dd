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
//!
//! netem's 4-state model, as `loss state p13 [p31 [p32 [p23 [p14]]]]`
//! takes it: datagrams pass in a gap (state 1) or in a burst (2), and are
//! lost in a burst (3) or alone in a gap (4). From 1 a datagram is lost
//! alone with `p14` or begins a burst of losses with `p13`; from 3 the
//! burst ends with `p31`, or passes one datagram with `p32`, and goes on
//! losing otherwise; from 2 it loses again with `p23`; after 4 the next
//! passes. The defaults, as tc's: `p31 = 1 - p13`, `p32 = 0`, `p23 = 1`,
//! `p14 = 0`. It is at 1, 2, 3, 4 in the ratio `1 : p13 p32 / (p31 p23) :
//! p13 / p31 : p14`, and loses the share at 3 and 4.

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
    /// netem's 4-state model: a burst of losses begins with `p13`, ends
    /// with `p31`, passes one with `p32` (and from there loses again with
    /// `p23`); a loss alone with `p14`.
    FourState {
        p13: f64,
        p31: f64,
        p32: f64,
        p23: f64,
        p14: f64,
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
            Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => write!(
                f,
                "state:{},{},{},{},{}",
                percent(p13),
                percent(p31),
                percent(p32),
                percent(p23),
                percent(p14)
            ),
        }
    }
}

impl Loss {
    /// Reads `PROB`, `gemodel:p[,r[,1-h[,1-k]]]` or
    /// `state:p13[,p31[,p32[,p23[,p14]]]]`, each a probability as `--drop`
    /// takes one (`2%`, `0.02`).
    pub fn parse(text: &str) -> Result<Loss, String> {
        if let Some(model) = text.strip_prefix("state:") {
            return Loss::four_states(&probabilities(model)?);
        }
        let Some(model) = text.strip_prefix("gemodel:") else {
            return parse_probability(text).map(Loss::Random);
        };
        let values = probabilities(model)?;
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

    /// The 4-state model of `values` (`p13` and what follows of `p31`,
    /// `p32`, `p23`, `p14`), with tc's defaults for the rest.
    fn four_states(values: &[f64]) -> Result<Loss, String> {
        if values.is_empty() || values.len() > 5 {
            return Err(format!(
                "state takes one to five probabilities (p13, p31, p32, p23, p14), not {}",
                values.len()
            ));
        }
        let given = |at: usize, default: f64| values.get(at).copied().unwrap_or(default);
        let p13 = values[0];
        let (p31, p32, p23, p14) = (
            given(1, 1.0 - p13),
            given(2, 0.0),
            given(3, 1.0),
            given(4, 0.0),
        );
        if p13 + p14 > 1.0 || p31 + p32 > 1.0 {
            return Err("state's p13 + p14 and p31 + p32 are at most 100% each".into());
        }
        if p31 == 0.0 {
            return Err(
                "state needs p31 above 0: a burst would never end (--drop 100% loses all)".into(),
            );
        }
        if p32 > 0.0 && p23 == 0.0 {
            return Err("state needs p23 above 0 when p32 is: a burst would pass for ever".into());
        }
        Ok(Loss::FourState {
            p13,
            p31,
            p32,
            p23,
            p14,
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
            Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                // Each state's weight against the gap's.
                let burst_lost = p13 / p31;
                let burst_passed = if p32 > 0.0 {
                    burst_lost * p32 / p23
                } else {
                    0.0
                };
                (burst_lost + p14) / (1.0 + burst_passed + burst_lost + p14)
            }
        }
    }
}

/// Probabilities parted by commas: `1%,30%`.
fn probabilities(list: &str) -> Result<Vec<f64>, String> {
    list.split(',').map(parse_probability).collect()
}

/// A loss model running: the state of its link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Losing {
    loss: Loss,
    /// Gilbert-Elliott's: the link is bad.
    bad: bool,
    /// The 4-state model's: 1 to 4, as netem numbers them.
    state: u8,
}

impl Losing {
    /// Starts `loss` good (in a gap).
    pub fn new(loss: Loss) -> Losing {
        Losing {
            loss,
            bad: false,
            state: 1,
        }
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
            // As netem: one draw moves the link, and the state it moves
            // to says whether the datagram is lost (3 and 4).
            Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                let draw = draws.f64();
                self.state = match self.state {
                    1 if draw < p14 => 4,
                    1 if draw < p14 + p13 => 3,
                    2 if draw < p23 => 3,
                    3 if draw < p32 => 2,
                    3 if draw < p32 + p31 => 1,
                    4 => 1,
                    state => state,
                };
                self.state >= 3
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
    fn the_four_state_model_loses_its_stationary_share() {
        // Bursts of losses begun with 1% and ended with 30% (passing one
        // with 20% on the way), and losses alone with 0.5%.
        let model = Loss::parse("state:1%,30%,20%,40%,0.5%").unwrap();
        // Weights 1 : 0.01 * 0.2 / (0.3 * 0.4) : 0.01 / 0.3 : 0.005.
        let weights = [1.0, 0.002 / 0.12, 0.01 / 0.3, 0.005];
        let expected = (weights[2] + weights[3]) / weights.iter().sum::<f64>();
        assert!((model.rate() - expected).abs() < 1e-12);
        let (share, _) = measure(model, 4);
        assert!(
            (share / expected - 1.0).abs() < 0.02,
            "{share} of {expected}"
        );
        // p13 alone: bursts of losses that end at once at 1 - p13, so each
        // loss is a burst of 1 / p31 on average.
        let simple = Loss::parse("state:2%").unwrap();
        let (share, run) = measure(simple, 5);
        assert!((share / simple.rate() - 1.0).abs() < 0.02, "{share}");
        assert!((run - 1.0 / 0.98).abs() < 0.01, "{run}");
        assert_eq!(simple.to_string().parse::<Loss>(), Ok(simple));
        assert!(Loss::parse("state:1%,0").unwrap_err().contains("p31"));
        assert!(Loss::parse("state:60%,30%,20%,40%,50%").is_err());
        assert!(Loss::parse("state:1,2,3,4,5,6").is_err());
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
