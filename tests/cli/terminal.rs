//! `--exec` on a terminal, under `script` (a pty of its own): the command
//! owns the screen. Without `--progress` shape draws nothing; with it, its
//! bar is pinned to the last row, below the region the command's lines
//! scroll in, so that no byte of theirs shares a line with the bar, and
//! the row and the region are given back at the end.

use crate::harness::*;
use std::process::{Command, Stdio};

/// What `shape ARGS` wrote to a terminal of 10 rows and 80 columns.
fn on_a_terminal(args: &str) -> String {
    let shape = env!("CARGO_BIN_EXE_shape");
    let line = format!("stty rows 10 cols 80; {shape} {args}");
    let output = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The command: a line, a wait long enough for frames, another line.
const COMMAND: &str = "--exec sh -c 'echo test 1 ok; sleep 0.5; echo 3 passed'";

#[test]
fn without_progress_the_command_has_the_terminal_to_itself() {
    if !installed("script") {
        return;
    }
    let written = on_a_terminal(&format!("--link slow-4g {COMMAND}"));
    assert_eq!(written, "test 1 ok\r\n3 passed\r\n");
}

#[test]
fn a_bar_asked_for_is_pinned_below_the_commands_lines_and_given_back() {
    if !installed("script") {
        return;
    }
    let written = on_a_terminal(&format!("--progress bar --link slow-4g {COMMAND}"));
    // Every frame is drawn with the cursor saved and put back, in the
    // last row: none holds the command's words.
    let frames: Vec<&str> = written
        .split("\x1b7")
        .skip(1)
        .map(|frame| frame.split("\x1b8").next().unwrap())
        .collect();
    let bars: Vec<&&str> = frames
        .iter()
        .filter(|f| f.starts_with("\x1b[10;1H"))
        .collect();
    assert!(bars.len() >= 2, "{written:?}");
    for bar in &bars {
        assert!(!bar.contains("test") && !bar.contains("passed"), "{bar:?}");
    }
    // Both ways' limits, in the mode's own words from the first frame.
    assert!(
        bars[0].contains("up 0 B/s, down 0 B/s (limit up "),
        "{:?}",
        bars[0]
    );
    // The command's lines are whole, outside every frame.
    let outside: String = written
        .split("\x1b7")
        .map(|piece| piece.split_once("\x1b8").map_or(piece, |(_, after)| after))
        .collect();
    assert!(outside.contains("test 1 ok\r\n"), "{outside:?}");
    assert!(outside.contains("3 passed\r\n"), "{outside:?}");
    // The region is the rows above the bar, and the end gives back the
    // whole screen and clears the bar's row.
    assert!(written.contains("\x1b[1;9r"), "{written:?}");
    assert!(
        written.ends_with("\x1b7\x1b[r\x1b8\x1b7\x1b[10;1H\x1b[2K\x1b8"),
        "{written:?}"
    );
}
