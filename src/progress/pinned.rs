//! A bar pinned to the terminal's last row, for `--exec --progress`: the
//! command writes to the same terminal, its lines scrolling above the bar
//! and never onto it. The rows above the last are made the scrolling
//! region (DECSTBM), each frame is drawn in the last row with the cursor
//! saved and put back, and the end gives the row and the region back, so
//! that the command's screen is as it left it.

use std::io::Write;

/// Escape sequences: save and restore the cursor (DECSC, DECRC), clear a
/// line, and the whole screen as the scrolling region.
const SAVE: &str = "\x1b7";
const RESTORE: &str = "\x1b8";
const CLEAR_LINE: &str = "\x1b[2K";
const WHOLE_REGION: &str = "\x1b[r";

/// The bar's row and the region kept above it.
pub struct Pinned {
    /// The terminal's rows and columns when the region was last set.
    size: Option<(u16, u16)>,
    /// Whether a terminal of no known size was said once.
    said: bool,
}

impl Pinned {
    /// A bar not drawn yet: the region is set with the first frame.
    pub fn new() -> Pinned {
        Pinned {
            size: None,
            said: false,
        }
    }

    /// Draws `text` in the last row, first making the rows above it the
    /// scrolling region if the terminal is new or its size changed.
    pub fn draw(&mut self, text: &str) {
        let term = console::Term::stderr();
        let Some((rows, columns)) = term.size_checked().filter(|(rows, _)| *rows >= 2) else {
            // No row to pin the bar to, that the command's lines would
            // not land on: said once, and nothing drawn.
            if !self.said {
                self.said = true;
                write_all(
                    "shape: the terminal says no size, so the bar has no row of its own: none is \
                     drawn (stty rows N cols M gives it one)\n",
                );
            }
            return;
        };
        let mut frame = String::new();
        if self.size != Some((rows, columns)) {
            // A line is made free below the cursor first (a newline, then
            // back up), so that the cursor is inside the region; setting
            // the region moves the cursor home, hence the save.
            if self.size.is_none() {
                frame += "\n\x1b[1A";
            }
            frame += &format!("{SAVE}\x1b[1;{}r{RESTORE}", rows - 1);
            self.size = Some((rows, columns));
        }
        let shown: String = text
            .chars()
            .take(usize::from(columns.saturating_sub(1)))
            .collect();
        frame += &format!("{SAVE}\x1b[{rows};1H{CLEAR_LINE}{shown}{RESTORE}");
        write_all(&frame);
    }

    /// Gives the last row and the whole region back.
    pub fn clear(&mut self) {
        let Some((rows, _)) = self.size.take() else {
            return;
        };
        write_all(&format!(
            "{SAVE}{WHOLE_REGION}{RESTORE}{SAVE}\x1b[{rows};1H{CLEAR_LINE}{RESTORE}"
        ));
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        self.clear();
    }
}

fn write_all(frame: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(frame.as_bytes());
    let _ = stderr.flush();
}
