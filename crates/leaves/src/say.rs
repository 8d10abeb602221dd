//! The one sink every part of shape says a line through: standard error,
//! a line at a time, each line escaped so that what it quotes cannot
//! break it, and a progress bar, if one is drawn, lifted out of the way.

use indicatif::ProgressBar;

/// Prints a line on standard error without breaking a progress bar.
#[derive(Clone, Default)]
pub struct Printer(Option<ProgressBar>);

impl Printer {
    /// A printer that lifts `bar` out of the way of each line, if given.
    pub fn over(bar: Option<ProgressBar>) -> Printer {
        Printer(bar)
    }

    /// Prints `line`, lifting the bar out of the way if there is one.
    pub fn line(&self, line: &str) {
        // One line, whatever it quotes: a value from outside (an API
        // request, a peer) cannot break it or drive the terminal.
        let line = crate::message::escape_controls(line);
        match &self.0 {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }
}
