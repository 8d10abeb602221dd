//! The private channel through which `shape --remote PID` changes a running
//! shape: both sides of it.
//!
//! Messages are small files in a directory only the user can enter:
//! `$XDG_RUNTIME_DIR/shape`, or `/tmp/shape-UID` (mode 0700) otherwise. The
//! directory is checked before use (a real directory, not a link, owned by
//! the user, closed to everyone else) and every file in it is opened
//! relative to it without following links and created exclusively, so
//! nobody can plant or redirect a message.
//!
//! A running shape registers as `PID.shape`, holding its start time, so a
//! remote can tell it from another process that later got the same PID. A
//! remote writes its request as `PID.req.TAG` (written under a temporary
//! name, then renamed, so it is never read half-written) and sends SIGUSR2;
//! the running shape validates the request (a regular file of the user's,
//! small, well-formed), applies it to its bucket, answers with `PID.ack.TAG`
//! holding the settings now in force, and deletes the request. Anything
//! else is refused with one line on standard error and never acted on.

use crate::bucket::{BucketCell, InvalidBurst, TokenBucket, check_burst};
use crate::clock::Clock;
use crate::rate::{Limit, Rate};
use rustix::fs::{AtFlags, Dir, Mode, OFlags};
use rustix::io::Errno;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// First line of every message, so that a stray file is never mistaken
/// for one.
const MAGIC: &str = "shape-control 1";
/// The largest message accepted.
const MAX_MESSAGE: u64 = 4096;

/// What a request changes; `None` keeps the current value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Request {
    pub limit: Option<Limit>,
    pub burst: Option<u64>,
    pub paused: Option<bool>,
}

/// The settings in force, as an acknowledgement reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub limit: Limit,
    pub burst: u64,
    pub paused: bool,
}

impl Settings {
    /// The settings of `bucket` now.
    pub fn of<C: Clock, S: Deref<Target = BucketCell>>(bucket: &TokenBucket<C, S>) -> Settings {
        Settings {
            limit: bucket.limit(),
            burst: bucket.burst(),
            paused: bucket.paused(),
        }
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate {}, burst {}",
            self.limit,
            crate::size::human_bytes(self.burst)
        )?;
        if self.paused {
            f.write_str(", paused")?;
        }
        Ok(())
    }
}

/// Why a remote change did not happen.
#[derive(Debug)]
pub enum RemoteError {
    /// No shape of this user runs as that PID.
    NotRunning(u32),
    /// The shape did not answer in time.
    NoAnswer(u32, Duration),
    /// The shape refused the request.
    Refused(String),
    /// The control directory or a message could not be used.
    Io(io::Error),
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::NotRunning(pid) => write!(f, "{pid} is not a running shape of this user"),
            RemoteError::NoAnswer(pid, after) => {
                write!(f, "shape {pid} did not answer within {after:?}")
            }
            RemoteError::Refused(why) => write!(f, "refused: {why}"),
            RemoteError::Io(err) => write!(f, "control directory: {err}"),
        }
    }
}

impl std::error::Error for RemoteError {}

impl From<io::Error> for RemoteError {
    fn from(err: io::Error) -> Self {
        RemoteError::Io(err)
    }
}

/// The private control directory, held open.
pub struct ControlDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl ControlDir {
    /// Opens the user's control directory, creating it if needed, and
    /// checks that it is private.
    pub fn open() -> io::Result<ControlDir> {
        let path = match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(runtime) if !runtime.is_empty() => PathBuf::from(runtime).join("shape"),
            _ => {
                std::env::temp_dir().join(format!("shape-{}", rustix::process::geteuid().as_raw()))
            }
        };
        Self::open_at(path)
    }

    /// Opens `path` as a control directory, creating it (mode 0700) if
    /// needed.
    pub fn open_at(path: PathBuf) -> io::Result<ControlDir> {
        match rustix::fs::mkdir(&path, Mode::RWXU) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(err) => return Err(err.into()),
        }
        let fd = rustix::fs::open(
            &path,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| private_error(&path, &format!("cannot be opened as a directory ({err})")))?;
        let stat = rustix::fs::fstat(&fd)?;
        if stat.st_uid != rustix::process::geteuid().as_raw() {
            return Err(private_error(&path, "belongs to another user"));
        }
        if stat.st_mode & 0o077 != 0 {
            return Err(private_error(
                &path,
                &format!("is open to others (mode {:o})", stat.st_mode & 0o777),
            ));
        }
        Ok(ControlDir { path, fd })
    }

    /// Where the directory is.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The open directory, for opening files in it relative to it.
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// Registers the running shape `pid`; the registration is removed when
    /// dropped, or by [`ControlDir::unregister`].
    /// The registration names the share the shape spends from, if any, so
    /// that [`ControlDir::spenders`] can count it.
    pub fn register(self: &Arc<Self>, pid: u32, share: Option<&str>) -> io::Result<Registration> {
        let name = marker_name(pid);
        let started = start_time(pid)?;
        self.sweep();
        // A marker left by a process that died and whose PID came round
        // again is stale: replace it.
        let _ = rustix::fs::unlinkat(&self.fd, name.as_str(), AtFlags::empty());
        let share = share
            .map(|share| format!("share {share}\n"))
            .unwrap_or_default();
        self.create(&name, &format!("{MAGIC}\nstarted {started}\n{share}"))?;
        Ok(Registration {
            dir: self.clone(),
            name,
        })
    }

    /// How many running shapes of this user spend from share `share`.
    pub fn spenders(&self, share: &str) -> usize {
        let Ok(dir) = Dir::read_from(&self.fd) else {
            return 0;
        };
        let wanted = format!("share {share}");
        dir.filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string))
            .filter_map(|name| name.strip_suffix(".shape")?.parse::<u32>().ok())
            .filter(|&pid| self.is_running_shape(pid))
            .filter(|&pid| {
                self.read(&marker_name(pid), false)
                    .is_ok_and(|text| text.lines().any(|l| l == wanted))
            })
            .count()
    }

    /// Removes what shapes that are no longer running left behind (ended
    /// by a signal, they cannot tidy up): their markers and messages.
    fn sweep(&self) {
        let Ok(dir) = Dir::read_from(&self.fd) else {
            return;
        };
        let names: Vec<String> = dir
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string))
            .collect();
        for name in names {
            let Some(pid) = name.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if !self.is_running_shape(pid) {
                let _ = rustix::fs::unlinkat(&self.fd, name.as_str(), AtFlags::empty());
            }
        }
    }

    /// Creates `name` exclusively with `text`, never through a link: under
    /// a temporary name first, then renamed, so it is read whole or not at
    /// all.
    fn create(&self, name: &str, text: &str) -> io::Result<()> {
        let temporary = format!(".{name}.tmp");
        let flags =
            OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::WRONLY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, temporary.as_str(), flags, Mode::RUSR | Mode::WUSR)?;
        let written = File::from(fd).write_all(text.as_bytes());
        let renamed = written.and_then(|()| {
            Ok(rustix::fs::renameat(
                &self.fd,
                temporary.as_str(),
                &self.fd,
                name,
            )?)
        });
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, temporary.as_str(), AtFlags::empty());
        }
        renamed
    }

    /// Reads `name` if it is a regular file of this user's, small, and not
    /// a link; removes it either way if `consume` is set.
    fn read(&self, name: &str, consume: bool) -> Result<String, String> {
        let result = (|| {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd =
                rustix::fs::openat(&self.fd, name, flags, Mode::empty()).map_err(
                    |err| match err {
                        Errno::LOOP => "it is a symbolic link".to_string(),
                        err => err.to_string(),
                    },
                )?;
            let stat = rustix::fs::fstat(&fd).map_err(|e| e.to_string())?;
            if stat.st_mode & 0o170000 != 0o100000 {
                return Err("it is not a regular file".to_string());
            }
            if stat.st_uid != rustix::process::geteuid().as_raw() {
                return Err(format!("it belongs to user {}", stat.st_uid));
            }
            if stat.st_size as u64 > MAX_MESSAGE {
                return Err("it is too large".to_string());
            }
            let mut text = String::new();
            File::from(fd)
                .take(MAX_MESSAGE)
                .read_to_string(&mut text)
                .map_err(|e| e.to_string())?;
            Ok(text)
        })();
        if consume {
            let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
        }
        result
    }

    /// Whether `name` exists (as anything).
    fn exists(&self, name: &str) -> bool {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Sends `request` to the shape running as `pid` and waits up to
    /// `patience` for its answer.
    pub fn send(
        &self,
        pid: u32,
        request: &Request,
        patience: Duration,
    ) -> Result<Settings, RemoteError> {
        if !self.is_running_shape(pid) {
            return Err(RemoteError::NotRunning(pid));
        }
        let tag = format!("{}-{}", std::process::id(), clock_tag());
        let request_name = format!("{pid}.req.{tag}");
        let answer_name = format!("{pid}.ack.{tag}");
        self.create(&request_name, &encode_request(request))?;
        let pid_handle =
            rustix::process::Pid::from_raw(pid as i32).ok_or(RemoteError::NotRunning(pid))?;
        if rustix::process::kill_process(pid_handle, rustix::process::Signal::USR2).is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, request_name.as_str(), AtFlags::empty());
            return Err(RemoteError::NotRunning(pid));
        }
        let deadline = Instant::now() + patience;
        // The answer is a file; a remote is a one-off command, so it looks
        // for it every few milliseconds rather than setting up a watch.
        while Instant::now() < deadline {
            if self.exists(&answer_name) {
                let text = self
                    .read(&answer_name, true)
                    .map_err(RemoteError::Refused)?;
                return decode_answer(&text);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = rustix::fs::unlinkat(&self.fd, request_name.as_str(), AtFlags::empty());
        Err(RemoteError::NoAnswer(pid, patience))
    }

    /// True if `pid` registered here and is still the process that did.
    fn is_running_shape(&self, pid: u32) -> bool {
        let Ok(text) = self.read(&marker_name(pid), false) else {
            return false;
        };
        let registered = text
            .lines()
            .find_map(|l| l.strip_prefix("started "))
            .map(str::trim);
        matches!((registered, start_time(pid)), (Some(r), Ok(now)) if r == now)
    }

    /// Serves every request waiting for the shape running as `pid`:
    /// carries out the valid ones with `apply`, answers each with what
    /// `settings` then says, or with why it was refused (malformed, or
    /// refused by `apply`), and returns a line for each one refused.
    pub fn serve(
        &self,
        pid: u32,
        apply: &dyn Fn(&Request) -> Result<(), String>,
        settings: &dyn Fn() -> Settings,
    ) -> Vec<String> {
        let prefix = format!("{pid}.req.");
        let mut refusals = Vec::new();
        let Ok(dir) = Dir::read_from(&self.fd) else {
            return vec![format!("cannot list {}", self.path.display())];
        };
        let names: Vec<String> = dir
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string))
            .filter(|name| name.starts_with(&prefix))
            .collect();
        for name in names {
            let tag = &name[prefix.len()..];
            let answer = match self
                .read(&name, true)
                .and_then(|text| decode_request(&text))
                .and_then(|request| apply(&request))
            {
                Ok(()) => encode_answer(&Ok(settings())),
                Err(why) => {
                    refusals.push(format!(
                        "refused control message {}: {why}",
                        self.path.join(&name).display()
                    ));
                    encode_answer(&Err(why))
                }
            };
            let _ = self.create(&format!("{pid}.ack.{tag}"), &answer);
        }
        refusals
    }
}

impl ControlDir {
    /// Removes the registration of `pid`: for a shape about to be ended by a
    /// signal, which runs no destructors.
    pub fn unregister(&self, pid: u32) {
        let _ = rustix::fs::unlinkat(&self.fd, marker_name(pid).as_str(), AtFlags::empty());
    }
}

/// The registration of a running shape, removed when dropped.
pub struct Registration {
    dir: Arc<ControlDir>,
    name: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = rustix::fs::unlinkat(&self.dir.fd, self.name.as_str(), AtFlags::empty());
    }
}

fn private_error(path: &std::path::Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} {why}; it must be a directory of this user's only",
            path.display()
        ),
    )
}

fn marker_name(pid: u32) -> String {
    format!("{pid}.shape")
}

/// Nanoseconds on the monotonic clock, to make message names unique.
fn clock_tag() -> u64 {
    use crate::clock::{Clock, MonotonicClock};
    MonotonicClock.now()
}

/// When `pid` started, in clock ticks since boot (field 22 of
/// `/proc/PID/stat`): with the PID, it names one process for good.
fn start_time(pid: u32) -> io::Result<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name in parentheses may hold spaces: count after it.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after_name
        .split_whitespace()
        .nth(19)
        .map(str::to_string)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed /proc stat"))
}

/// Applies `request` to `bucket` as one change where it can. A burst the
/// bucket cannot take refuses the whole request, before anything changes.
pub fn apply<C: Clock, S: Deref<Target = BucketCell>>(
    bucket: &TokenBucket<C, S>,
    request: &Request,
) -> Result<(), InvalidBurst> {
    if let Some(burst) = request.burst {
        check_burst(burst)?;
    }
    match (request.limit, request.burst) {
        (Some(limit), Some(burst)) => bucket.set(limit, burst)?,
        (Some(limit), None) => bucket.set_limit(limit),
        (None, Some(burst)) => bucket.set_burst(burst)?,
        (None, None) => {}
    }
    if let Some(paused) = request.paused {
        bucket.set_paused(paused);
    }
    Ok(())
}

fn encode_limit(limit: Limit) -> String {
    match limit {
        Limit::Unlimited => "unlimited".into(),
        Limit::Rate(rate) => rate.fixed().to_string(),
    }
}

fn decode_limit(text: &str) -> Result<Limit, String> {
    if text == "unlimited" {
        return Ok(Limit::Unlimited);
    }
    text.parse::<u64>()
        .ok()
        .and_then(Rate::from_fixed)
        .map(Limit::Rate)
        .ok_or_else(|| format!("bad rate '{}'", text.escape_debug()))
}

/// A burst as a number of bytes; whether the bucket can take it is the
/// bucket's to say, in [`apply`].
fn decode_burst(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("bad burst '{}'", text.escape_debug()))
}

fn encode_request(request: &Request) -> String {
    let mut text = format!("{MAGIC}\n");
    if let Some(limit) = request.limit {
        text += &format!("rate {}\n", encode_limit(limit));
    }
    if let Some(burst) = request.burst {
        text += &format!("burst {burst}\n");
    }
    if let Some(paused) = request.paused {
        text += if paused { "pause\n" } else { "resume\n" };
    }
    text
}

/// Parses a request strictly: the magic line, then at most one of each
/// field, nothing else.
fn decode_request(text: &str) -> Result<Request, String> {
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err("not a shape control message".into());
    }
    let mut request = Request::default();
    for line in lines {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match (key, value) {
            ("rate", value) if request.limit.is_none() => {
                request.limit = Some(decode_limit(value)?)
            }
            ("burst", value) if request.burst.is_none() => {
                request.burst = Some(decode_burst(value)?)
            }
            ("pause", "") if request.paused.is_none() => request.paused = Some(true),
            ("resume", "") if request.paused.is_none() => request.paused = Some(false),
            _ => return Err(format!("unexpected line '{}'", line.escape_debug())),
        }
    }
    Ok(request)
}

fn encode_answer(answer: &Result<Settings, String>) -> String {
    match answer {
        Ok(s) => format!(
            "{MAGIC}\nrate {}\nburst {}\n{}\n",
            encode_limit(s.limit),
            s.burst,
            if s.paused { "paused" } else { "running" }
        ),
        Err(why) => format!("{MAGIC}\nrefused {why}\n"),
    }
}

fn decode_answer(text: &str) -> Result<Settings, RemoteError> {
    let malformed = || RemoteError::Refused("malformed answer".into());
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err(malformed());
    }
    let first = lines.next().ok_or_else(malformed)?;
    if let Some(why) = first.strip_prefix("refused ") {
        return Err(RemoteError::Refused(why.to_string()));
    }
    let limit = decode_limit(first.strip_prefix("rate ").ok_or_else(malformed)?)
        .map_err(|_| malformed())?;
    let burst = decode_burst(
        lines
            .next()
            .and_then(|l| l.strip_prefix("burst "))
            .ok_or_else(malformed)?,
    )
    .map_err(|_| malformed())?;
    let paused = match lines.next() {
        Some("paused") => true,
        Some("running") => false,
        _ => return Err(malformed()),
    };
    Ok(Settings {
        limit,
        burst,
        paused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_survive_the_trip() {
        let request = Request {
            limit: Some(Limit::per_second(4 << 20)),
            burst: Some(65_536),
            paused: Some(false),
        };
        assert_eq!(decode_request(&encode_request(&request)), Ok(request));
        let lift = Request {
            limit: Some(Limit::Unlimited),
            ..Request::default()
        };
        assert_eq!(decode_request(&encode_request(&lift)), Ok(lift));
        let settings = Settings {
            limit: Limit::per_second(1 << 20),
            burst: 7,
            paused: true,
        };
        assert_eq!(
            decode_answer(&encode_answer(&Ok(settings))).unwrap(),
            settings
        );
        assert!(
            matches!(decode_answer(&encode_answer(&Err("no".into()))), Err(RemoteError::Refused(w)) if w == "no")
        );
    }

    #[test]
    fn malformed_requests_are_refused() {
        for text in [
            "",
            "rate 1\n",
            "shape-control 2\nrate 65536\n",
            "shape-control 1\nrate 0\n",
            "shape-control 1\nrate fast\n",
            "shape-control 1\nburst -5\n",
            "shape-control 1\nburst 99999999999999999999\n",
            "shape-control 1\nrate 65536\nrate 65536\n",
            "shape-control 1\npause\nresume\n",
            "shape-control 1\nexec rm -rf /\n",
            "shape-control 1\npause now\n",
        ] {
            assert!(decode_request(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn settings_read_as_a_person_would_write_them() {
        let settings = Settings {
            limit: Limit::per_second(4 << 20),
            burst: 65_536,
            paused: false,
        };
        assert_eq!(settings.to_string(), "rate 4.00 MiB/s, burst 64.00 KiB");
        let paused = Settings {
            limit: Limit::Unlimited,
            burst: 1,
            paused: true,
        };
        assert_eq!(paused.to_string(), "rate unlimited, burst 1 B, paused");
    }

    #[test]
    fn an_open_directory_is_not_private() {
        let path = std::env::temp_dir().join(format!("shape-control-open-{}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        rustix::fs::chmod(&path, Mode::from_raw_mode(0o755)).unwrap();
        let err = ControlDir::open_at(path.clone()).err().expect("refused");
        assert!(err.to_string().contains("open to others"), "{err}");
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn start_times_name_processes() {
        let mine = start_time(std::process::id()).unwrap();
        assert!(mine.parse::<u64>().is_ok(), "{mine}");
        assert!(start_time(u32::MAX).is_err());
    }
}
