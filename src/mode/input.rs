//! Where a copy's bytes come from: the files named, standard input, or one
//! connection accepted on an address.

use shape_leaves::say::Printer;
use shape_net::Address;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// One input.
#[derive(Clone)]
pub enum Input {
    /// A file, or `-` for standard input.
    Path(PathBuf),
    /// One connection accepted on an address.
    Listen(Address),
}

impl Input {
    /// The sum of the sizes of `inputs`, if every one is a regular file.
    pub fn known_total(inputs: &[Input]) -> Option<u64> {
        inputs.iter().try_fold(0u64, |sum, input| match input {
            Input::Path(path) if path != Path::new("-") => {
                let meta = std::fs::metadata(path).ok()?;
                meta.is_file().then(|| sum + meta.len())
            }
            _ => None,
        })
    }

    /// Opens the input; `-` is a fresh handle on standard input. A listener
    /// says where it listens through `say` before it waits.
    pub fn open(&self, say: Option<&Printer>) -> io::Result<File> {
        match self {
            Input::Path(path) if path == Path::new("-") => {
                Ok(File::from(io::stdin().as_fd().try_clone_to_owned()?))
            }
            Input::Path(path) => File::open(path),
            Input::Listen(address) => {
                let listening = address.listen()?;
                if let Some(say) = say {
                    say.line(&format!("shape: listening on {}", listening.local()));
                }
                listening.accept_one()
            }
        }
    }
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::Path(path) => write!(f, "{}", path.display()),
            Input::Listen(address) => write!(f, "listen on {address}"),
        }
    }
}
