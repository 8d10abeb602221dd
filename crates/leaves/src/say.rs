//! The one sink every part of shape says a line through: standard error,
//! a line at a time, each line escaped so that what it quotes cannot
//! break it, and a progress bar, if one is drawn, lifted out of the way
//! (by whoever draws it: this crate knows no bar).

use std::sync::Arc;

/// What lifts a progress bar out of the way while a line is printed: it
/// runs the printing it is handed, with the bar cleared, and draws the bar
/// again after.
pub type Lift = Arc<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

/// Prints a line on standard error without breaking a progress bar.
#[derive(Clone, Default)]
pub struct Printer(Option<Lift>);

impl Printer {
    /// A printer that lifts a bar out of the way of each line with `lift`.
    pub fn lifting(lift: Lift) -> Printer {
        Printer(Some(lift))
    }

    /// Prints `line`, lifting the bar out of the way if there is one.
    pub fn line(&self, line: &str) {
        // One line, whatever it quotes: a value from outside (an API
        // request, a peer) cannot break it or drive the terminal.
        let line = crate::message::escape_controls(line);
        match &self.0 {
            Some(lift) => lift(&mut || eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }
}
