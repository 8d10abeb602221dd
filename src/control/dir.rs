//! The private control directory: where running shapes register, where
//! control messages travel and where shares live. Only the user can enter
//! it, and every file in it is opened relative to it, without following
//! links, checked to be the user's own, and created whole or not at all.

use super::protocol::MAGIC;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;
use shape_leaves::message::one_line;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a file or directory is not fit for shape to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// It is a link, which shape never follows.
    #[error("is a symbolic link")]
    Symlink,
    /// It is not what was expected.
    #[error("is not a {0}")]
    NotA(&'static str),
    /// Another user owns it.
    #[error("belongs to user {0}")]
    Foreign(u32),
    /// Others may read or write it.
    #[error("is open to others (mode {0:o})")]
    OpenToOthers(u32),
}

/// Checks that `stat` is a `kind` (a regular file or a directory) of this
/// user's, and if `private`, closed to everyone else.
pub fn check_own(stat: &Stat, kind: FileType, private: bool) -> Result<(), Unfit> {
    if FileType::from_raw_mode(stat.st_mode) != kind {
        return Err(Unfit::NotA(match kind {
            FileType::Directory => "directory",
            _ => "regular file",
        }));
    }
    if stat.st_uid != rustix::process::geteuid().as_raw() {
        return Err(Unfit::Foreign(stat.st_uid));
    }
    if private && stat.st_mode & 0o077 != 0 {
        return Err(Unfit::OpenToOthers(stat.st_mode & 0o777));
    }
    Ok(())
}

/// The largest message file read.
const MAX_MESSAGE: u64 = 4096;

/// The private control directory, held open.
pub struct ControlDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl ControlDir {
    /// Opens the user's control directory, creating it if needed, and
    /// checks that it is private: `$XDG_RUNTIME_DIR/shape`, or
    /// `/tmp/shape-UID` without one.
    ///
    /// In the shared temporary directory another user can take the name
    /// first; the message then says how to use a directory of one's own.
    pub fn open() -> io::Result<ControlDir> {
        match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(runtime) if !runtime.is_empty() => {
                Self::open_at(PathBuf::from(runtime).join("shape"))
            }
            _ => {
                let uid = rustix::process::geteuid().as_raw();
                Self::open_at(std::env::temp_dir().join(format!("shape-{uid}"))).map_err(|err| {
                    let why = format!(
                        "{}; set XDG_RUNTIME_DIR to a directory of your own to use another",
                        shape_leaves::message::one_line(&err)
                    );
                    io::Error::new(err.kind(), why)
                })
            }
        }
    }

    /// Opens `path` as a control directory, creating it (mode 0700) if
    /// needed.
    pub fn open_at(path: PathBuf) -> io::Result<ControlDir> {
        match rustix::fs::mkdir(&path, Mode::RWXU) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(err) => {
                let err = io::Error::from(err);
                let why = shape_leaves::message::one_line(&err);
                return Err(io::Error::new(
                    err.kind(),
                    format!("{}: {why}", path.display()),
                ));
            }
        }
        let refuse = |why: String| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} {why}; it must be a directory of this user's only",
                    path.display()
                ),
            )
        };
        let fd = rustix::fs::open(
            &path,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| {
            let is_link = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_symlink());
            match is_link {
                true => refuse("is a symlink".into()),
                false => refuse(format!(
                    "cannot be opened as a directory ({})",
                    shape_leaves::message::one_line(&io::Error::from(err))
                )),
            }
        })?;
        check_own(&rustix::fs::fstat(&fd)?, FileType::Directory, true)
            .map_err(|unfit| refuse(unfit.to_string()))?;
        Ok(ControlDir { path, fd })
    }

    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory, for opening files in it relative to it.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Creates `name` whole or not at all: as a fresh file of mode 0600
    /// under a temporary name, filled by `fill`, then renamed into place.
    /// Never through a link, and never over an existing `name` (that is
    /// `AlreadyExists`), so two processes racing to create it agree on one.
    pub fn create_with<T>(
        &self,
        name: &str,
        fill: impl FnOnce(&File) -> io::Result<T>,
    ) -> io::Result<T> {
        let temporary = format!(".{name}.{}.tmp", std::process::id());
        let flags =
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, temporary.as_str(), flags, Mode::RUSR | Mode::WUSR)?;
        let file = File::from(fd);
        let created = fill(&file).and_then(|filled| {
            rustix::fs::renameat_with(
                &self.fd,
                temporary.as_str(),
                &self.fd,
                name,
                RenameFlags::NOREPLACE,
            )?;
            Ok(filled)
        });
        if created.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, temporary.as_str(), AtFlags::empty());
        }
        created
    }

    /// Creates `name` holding `text`, as [`ControlDir::create_with`] does.
    pub fn create(&self, name: &str, text: &str) -> io::Result<()> {
        self.create_with(name, |mut file| file.write_all(text.as_bytes()))
    }

    /// Reads `name` if it is a small regular file of this user's and not a
    /// link; removes it either way if `consume` is set.
    pub fn read(&self, name: &str, consume: bool) -> Result<String, String> {
        let result = (|| {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd =
                rustix::fs::openat(&self.fd, name, flags, Mode::empty()).map_err(
                    |err| match err {
                        Errno::LOOP => format!("it {}", Unfit::Symlink),
                        err => err.to_string(),
                    },
                )?;
            let stat = rustix::fs::fstat(&fd).map_err(|e| e.to_string())?;
            check_own(&stat, FileType::RegularFile, false)
                .map_err(|unfit| format!("it {unfit}"))?;
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
            self.remove(name);
        }
        result
    }

    /// Removes `name`, if it is there.
    pub fn remove(&self, name: &str) {
        let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
    }

    /// Whether `name` exists (as anything).
    pub fn exists(&self, name: &str) -> bool {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// A watch on the directory for files that arrive in it (whole, by
    /// rename), to wait for one without looking again and again. Made
    /// before whatever is to arrive is asked for, so that none is missed.
    pub fn watch_arrivals(&self) -> io::Result<Arrivals> {
        use rustix::fs::inotify::{CreateFlags, WatchFlags, add_watch, init};
        let inotify = init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        add_watch(&inotify, &self.path, WatchFlags::MOVED_TO)?;
        Ok(Arrivals { inotify })
    }

    /// The names in the directory.
    fn names(&self) -> Vec<String> {
        let Ok(dir) = Dir::read_from(&self.fd) else {
            return Vec::new();
        };
        dir.filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string))
            .filter(|name| name != "." && name != "..")
            .collect()
    }

    /// The names in the directory that start with `prefix`.
    pub fn names_starting(&self, prefix: &str) -> Vec<String> {
        let mut names = self.names();
        names.retain(|name| name.starts_with(prefix));
        names
    }

    /// Registers the running shape `pid`; the registration is removed when
    /// dropped, or by [`ControlDir::unregister`]. The registration names
    /// the share the shape spends from, if any, so that
    /// [`ControlDir::spenders`] can count it.
    pub fn register(self: &Arc<Self>, pid: u32, share: Option<&str>) -> io::Result<Registration> {
        let name = marker_name(pid);
        let started = start_time(pid)?;
        self.sweep();
        // A marker left by a process that died and whose PID came round
        // again is stale: replace it.
        self.remove(&name);
        let share = share
            .map(|share| format!("share {share}\n"))
            .unwrap_or_default();
        self.create(&name, &format!("{MAGIC}\nstarted {started}\n{share}"))
            .map_err(|err| {
                let path = self.path.join(&name);
                io::Error::new(
                    err.kind(),
                    format!("{}: {}", path.display(), one_line(&err)),
                )
            })?;
        Ok(Registration {
            dir: self.clone(),
            name,
        })
    }

    /// Removes the registration of `pid`: for a shape about to be ended by
    /// a signal, which runs no destructors.
    pub fn unregister(&self, pid: u32) {
        self.remove(&marker_name(pid));
    }

    /// How many running shapes of this user spend from share `share`.
    pub fn spenders(&self, share: &str) -> usize {
        let wanted = format!("share {share}");
        self.names()
            .iter()
            .filter_map(|name| name.strip_suffix(".shape")?.parse::<u32>().ok())
            .filter(|&pid| self.is_running_shape(pid))
            .filter(|&pid| {
                self.read(&marker_name(pid), false)
                    .is_ok_and(|text| text.lines().any(|l| l == wanted))
            })
            .count()
    }

    /// True if `pid` registered here and is still the process that did.
    pub fn is_running_shape(&self, pid: u32) -> bool {
        let Ok(text) = self.read(&marker_name(pid), false) else {
            return false;
        };
        let registered = text
            .lines()
            .find_map(|l| l.strip_prefix("started "))
            .map(str::trim);
        matches!((registered, start_time(pid)), (Some(r), Ok(now)) if r == now)
    }

    /// Removes what shapes that are no longer running left behind (ended
    /// by a signal, they cannot tidy up): their markers and messages.
    fn sweep(&self) {
        for name in self.names() {
            let Some(pid) = name.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if !self.is_running_shape(pid) {
                self.remove(&name);
            }
        }
    }
}

/// The registration of a running shape, removed when dropped.
pub struct Registration {
    dir: Arc<ControlDir>,
    name: String,
}

impl Registration {
    /// What removes the registration from another thread, for a shape
    /// about to end there without unwinding.
    pub fn remover(&self) -> impl FnOnce() + Send + 'static {
        let (dir, name) = (self.dir.clone(), self.name.clone());
        move || dir.remove(&name)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.dir.remove(&self.name);
    }
}

fn marker_name(pid: u32) -> String {
    format!("{pid}.shape")
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

/// A watch on the control directory (inotify) for files arriving.
pub struct Arrivals {
    inotify: OwnedFd,
}

impl Arrivals {
    /// Sleeps until something arrives in the directory or `deadline`
    /// passes, whichever is first.
    pub fn wait(&self, deadline: std::time::Instant) {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.inotify, PollFlags::IN)];
        let _ = poll(&mut fds, Some(&timeout));
        // What arrived is looked at by name: the events only wake.
        let mut buffer = [0u8; 4096];
        while matches!(rustix::io::read(&self.inotify, &mut buffer), Ok(n) if n > 0) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_open_directory_is_not_private() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("control");
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = ControlDir::open_at(path).err().expect("refused");
        assert!(
            err.to_string().contains("is open to others (mode 755)"),
            "{err}"
        );
    }

    #[test]
    fn a_file_arriving_wakes_a_wait_and_nothing_arriving_lasts_to_the_deadline() {
        use std::time::{Duration, Instant};
        let scratch = tempfile::tempdir().unwrap();
        let dir = Arc::new(ControlDir::open_at(scratch.path().join("control")).unwrap());
        let arrivals = dir.watch_arrivals().unwrap();
        let start = Instant::now();
        arrivals.wait(start + Duration::from_millis(100));
        assert!(
            start.elapsed() >= Duration::from_millis(100),
            "woken by nothing"
        );
        let sender = dir.clone();
        let sending = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            sender.create("answer", "done").unwrap();
        });
        let start = Instant::now();
        arrivals.wait(start + Duration::from_secs(30));
        // Loose: woken by the arrival, seconds before the deadline.
        assert!(start.elapsed() < Duration::from_secs(20));
        assert!(dir.exists("answer"));
        sending.join().unwrap();
    }

    #[test]
    fn files_are_created_whole_once_and_read_only_if_they_are_fit() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = ControlDir::open_at(scratch.path().join("control")).unwrap();
        dir.create("a", "first").unwrap();
        let again = dir.create("a", "second").unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(dir.read("a", false).as_deref(), Ok("first"));
        assert_eq!(dir.names(), ["a"], "no temporary file is left behind");
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("link")).unwrap();
        assert_eq!(dir.read("link", true), Err("it is a symbolic link".into()));
        assert!(!dir.exists("link"), "consumed");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(
            dir.read("sub", false),
            Err("it is not a regular file".into())
        );
    }

    #[test]
    fn start_times_name_processes() {
        let mine = start_time(std::process::id()).unwrap();
        assert!(mine.parse::<u64>().is_ok(), "{mine}");
        assert!(start_time(u32::MAX).is_err());
    }
}
