//! One limit shared by many processes: every shape of the user that names
//! the same share (`--share NAME`) spends from one bucket, kept in a small
//! file `NAME.share` in the private control directory and mapped into each
//! process ([`mapping`] says how the file is laid out).
//!
//! A share file is created whole or not at all, so two processes racing to
//! create it agree on one. A file that is too short, of another version,
//! not built as expected, corrupt, a link, open to others or another
//! user's is refused with a message that names the file and the remedy,
//! never read blindly. The bucket is lock-free: a participant killed at any
//! instant never blocks the others.

#[allow(unsafe_code)]
mod mapping;

use shape_leaves::bucket::{BURST_FOLLOWS_RATE, Bucket};

use super::dir::{ControlDir, Unfit, check_own};
use mapping::{FILE_SIZE, Header, MAGIC, Mapping, ShareFile, VERSION};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use shape_bucket::{BucketCell, Clock, Fill, Limit, MonotonicClock, TokenBucket};
use shape_leaves::bucket::Settings;
use shape_leaves::counting::Counting;
use shape_leaves::message::one_line;
use std::io::{self, Write};
use std::sync::atomic::Ordering;

/// Why a share could not be used.
#[derive(Debug, thiserror::Error)]
#[error("share {name}: {why}")]
pub struct ShareError {
    name: String,
    why: String,
}

impl ShareError {
    fn new(name: &str, why: impl Into<String>) -> ShareError {
        ShareError {
            name: name.to_string(),
            why: why.into(),
        }
    }

    /// A share file that cannot be used as it is: the message names the
    /// file and the way out.
    fn unusable(dir: &ControlDir, name: &str, refusal: Unusable) -> ShareError {
        let path = share_file(dir, name).path;
        let why = match refusal {
            Unusable::Missing | Unusable::System(_) => refusal.to_string(),
            refusal => format!(
                "{} {refusal}; remove it with 'shape --share {name} --reset'",
                path.display()
            ),
        };
        ShareError::new(name, why)
    }
}

/// Whether [`open`] made the share or found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    Created,
    Attached,
}

/// The settings a shape brings to a share: they become the share's if
/// the shape makes it, or finds it with nobody on it.
#[derive(Debug, Clone, Copy)]
pub struct Offer {
    pub limit: Limit,
    pub burst: u64,
    /// A rate, a burst or a rate file was given, not only defaults.
    pub settings_given: bool,
    /// The burst was given: it stays when the rate changes. One never
    /// given follows the rate, as for a shape of its own.
    pub burst_given: bool,
}

impl Offer {
    /// The share's flags that say what `offer` says of its burst.
    fn flags(&self) -> u32 {
        match self.burst_given {
            true => 0,
            false => BURST_FOLLOWS_RATE,
        }
    }
}

/// Opens share `name` in `dir`, creating it with `offer` if it does not
/// exist yet. A share counts one thing: a share that counts something
/// other than `counting` is refused.
pub fn open(
    dir: &ControlDir,
    name: &str,
    offer: &Offer,
    counting: Counting,
) -> Result<(Bucket, Opened), ShareError> {
    loop {
        match attach(dir, name) {
            Ok((_, theirs)) if theirs != counting => {
                return Err(ShareError::new(
                    name,
                    format!(
                        "it counts {}, and this shape counts {}: a share counts one thing",
                        theirs.units(),
                        counting.units()
                    ),
                ));
            }
            Ok((mapping, _)) => {
                return Ok((
                    TokenBucket::from_cell(mapping.into_cell(), MonotonicClock),
                    Opened::Attached,
                ));
            }
            Err(Unusable::Missing) => {}
            Err(refusal) => return Err(ShareError::unusable(dir, name, refusal)),
        }
        match create(dir, name, offer, counting) {
            Ok(mapping) => {
                return Ok((
                    TokenBucket::from_cell(mapping.into_cell(), MonotonicClock),
                    Opened::Created,
                ));
            }
            // Another process created it first: attach to theirs.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => {
                let path = share_file(dir, name).path;
                let why = format!("{}: {}", path.display(), one_line(&err));
                return Err(ShareError::new(name, why));
            }
        }
    }
}

/// Opens share `name` for a shape about to spend from it, with `offer` if
/// it creates it. A share that others are on keeps its settings: if
/// settings were given and they differ, the notice returned says so. A
/// share nobody is on any more starts afresh with the offer.
pub fn join(
    dir: &ControlDir,
    name: &str,
    offer: &Offer,
    counting: Counting,
) -> Result<(Bucket, Option<String>), ShareError> {
    let (bucket, opened) = open(dir, name, offer, counting)?;
    let differs = bucket.limit() != offer.limit || bucket.burst() != offer.burst;
    if opened == Opened::Created || !offer.settings_given || !differs {
        return Ok((bucket, None));
    }
    if dir.spenders(name) == 0 {
        // A share left by shapes that have all ended.
        bucket
            .set(offer.limit, offer.burst)
            .map_err(|err| ShareError::new(name, err.to_string()))?;
        if let Some(rule) = bucket.cell().shared_burst_rule() {
            rule.store(offer.flags(), Ordering::Release);
        }
        return Ok((bucket, None));
    }
    let notice = format!(
        "share {name} is at {}; using that (change it with --remote share:{name})",
        Settings::of(&bucket, counting)
    );
    Ok((bucket, Some(notice)))
}

/// Opens share `name` only if it exists, and says what it counts.
pub fn find(dir: &ControlDir, name: &str) -> Result<(Bucket, Counting), ShareError> {
    attach(dir, name)
        .map(|(mapping, counting)| {
            let bucket = TokenBucket::from_cell(mapping.into_cell(), MonotonicClock);
            (bucket, counting)
        })
        .map_err(|refusal| ShareError::unusable(dir, name, refusal))
}

/// Removes share `name`'s file, whatever it holds, so that the next shape
/// on the share creates it afresh; refused while a running shape is on it.
/// Returns whether there was a file to remove.
pub fn reset(dir: &ControlDir, name: &str) -> Result<bool, ShareError> {
    match dir.spenders(name) {
        0 => {}
        1 => {
            return Err(ShareError::new(
                name,
                "a running shape is on it; stop it first",
            ));
        }
        n => {
            return Err(ShareError::new(
                name,
                format!("{n} running shapes are on it; stop them first"),
            ));
        }
    }
    match rustix::fs::unlinkat(
        dir.fd(),
        file_name(name).as_str(),
        rustix::fs::AtFlags::empty(),
    ) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(err) => Err(ShareError::new(
            name,
            format!("{}: {err}", share_file(dir, name).path.display()),
        )),
    }
}

/// The file that holds share `name`, in the control directory.
fn file_name(name: &str) -> String {
    format!("{name}.share")
}

/// Share `name`'s file in `dir`, for messages.
/// Where share `name`'s file is in `dir`.
pub fn file_path(dir: &ControlDir, name: &str) -> std::path::PathBuf {
    share_file(dir, name).path
}

fn share_file(dir: &ControlDir, name: &str) -> ShareFile {
    ShareFile {
        name: name.to_string(),
        path: dir.path().join(file_name(name)),
    }
}

/// Why a share file was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Unusable {
    #[error("no such share")]
    Missing,
    #[error("{0}")]
    Unfit(Unfit),
    #[error("is too short (a share file is {FILE_SIZE} bytes)")]
    TooShort,
    #[error("is not a shape share file")]
    NotAShare,
    #[error("is of another version (this shape reads version {VERSION})")]
    OtherVersion,
    #[error("has a header that does not match this shape's layout")]
    OtherLayout,
    #[error("holds a corrupt bucket")]
    Corrupt,
    #[error("{0}")]
    System(Errno),
}

impl From<Errno> for Unusable {
    fn from(err: Errno) -> Self {
        match err {
            Errno::NOENT => Unusable::Missing,
            Errno::LOOP => Unusable::Unfit(Unfit::Symlink),
            err => Unusable::System(err),
        }
    }
}

/// Maps an existing share file after checking it, and says what it
/// counts.
fn attach(dir: &ControlDir, name: &str) -> Result<(Mapping, Counting), Unusable> {
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir.fd(), file_name(name).as_str(), flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    check_own(&stat, FileType::RegularFile, true).map_err(Unusable::Unfit)?;
    if (stat.st_size as u64) < FILE_SIZE as u64 {
        return Err(Unusable::TooShort);
    }
    let mapping = Mapping::map(&fd, share_file(dir, name))?;
    let header = mapping.header();
    if header.magic != MAGIC {
        return Err(Unusable::NotAShare);
    }
    if header.version != VERSION {
        return Err(Unusable::OtherVersion);
    }
    let layout = |h: &Header| (h.header_size, h.cell_offset, h.cell_size, h.file_size);
    if layout(header) != layout(&Header::expected(Counting::Bytes, 0)) {
        return Err(Unusable::OtherLayout);
    }
    let counting = Counting::from_code(header.counting).ok_or(Unusable::Corrupt)?;
    if !mapping.cell().is_sound(MonotonicClock.now()) {
        return Err(Unusable::Corrupt);
    }
    Ok((mapping, counting))
}

/// Builds a share file whole and puts it in place, failing with
/// `AlreadyExists` if one appeared meanwhile.
fn create(dir: &ControlDir, name: &str, offer: &Offer, counting: Counting) -> io::Result<Mapping> {
    let cell = BucketCell::new(offer.limit, offer.burst, Fill::Full, MonotonicClock.now())
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?;
    dir.create_with(&file_name(name), |mut fd| {
        // Written, not made sparse by ftruncate: on a full disk the write
        // fails here, where a sparse file would only fail on the first
        // touch of the mapping, with SIGBUS.
        fd.write_all(&[0; FILE_SIZE])?;
        let mut mapping = Mapping::map(fd, share_file(dir, name))?;
        mapping.fill(cell, counting, offer.flags());
        Ok(mapping)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Settings given in full, as `--rate` with `--burst`.
    pub(super) fn offer(limit: Limit, burst: u64) -> Offer {
        Offer {
            limit,
            burst,
            settings_given: true,
            burst_given: true,
        }
    }

    /// A control directory of its own, removed with the guard.
    fn dir() -> (ControlDir, std::path::PathBuf, tempfile::TempDir) {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("control");
        (ControlDir::open_at(path.clone()).unwrap(), path, scratch)
    }

    #[test]
    fn the_first_creates_and_the_second_attaches_to_the_same_bucket() {
        let (dir, path, _scratch) = dir();
        let (first, opened) = open(
            &dir,
            "backup",
            &offer(Limit::per_second(8 << 20), 1 << 20),
            Counting::Bytes,
        )
        .unwrap();
        assert_eq!(opened, Opened::Created);
        let (second, opened) = open(
            &dir,
            "backup",
            &offer(Limit::per_second(1 << 20), 10),
            Counting::Bytes,
        )
        .unwrap();
        assert_eq!(opened, Opened::Attached);
        assert_eq!(
            (second.limit(), second.burst()),
            (Limit::per_second(8 << 20), 1 << 20)
        );
        assert_eq!(first.try_acquire(1 << 20), Ok(()));
        assert!(
            second.try_acquire(1024).is_err(),
            "the second sees the first's spending"
        );
        second.set_limit(Limit::per_second(2 << 20));
        assert_eq!(first.limit(), Limit::per_second(2 << 20));
        let mode = std::fs::metadata(path.join("backup.share"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_share_counts_one_thing() {
        let (dir, _path, _scratch) = dir();
        let lines = Counting::Lines;
        let (_, opened) = open(
            &dir,
            "crawl",
            &offer(Limit::per_second(2 << 20), 1 << 20),
            lines,
        )
        .unwrap();
        assert_eq!(opened, Opened::Created);
        let refused = open(
            &dir,
            "crawl",
            &offer(Limit::per_second(1000), 10),
            Counting::Bytes,
        )
        .err()
        .unwrap();
        assert_eq!(
            refused.to_string(),
            "share crawl: it counts lines, and this shape counts bytes: a share counts one thing"
        );
        let (found, counting) = find(&dir, "crawl").unwrap();
        assert_eq!(
            (found.limit(), counting),
            (Limit::per_second(2 << 20), lines)
        );
    }

    #[test]
    fn bad_files_are_refused_with_their_reason() {
        let (dir, path, _scratch) = dir();
        let good = || {
            let _ = std::fs::remove_file(path.join("s.share"));
            drop(
                open(
                    &dir,
                    "s",
                    &offer(Limit::per_second(1 << 20), 1000),
                    Counting::Bytes,
                )
                .unwrap(),
            );
            std::fs::read(path.join("s.share")).unwrap()
        };
        let refused = |bytes: &[u8]| {
            std::fs::write(path.join("s.share"), bytes).unwrap();
            find(&dir, "s").expect_err("refused").why
        };
        let bytes = good();
        assert!(refused(&bytes[..100]).contains("too short"));
        let mut version = bytes.clone();
        version[8] = 9;
        assert!(refused(&version).contains("another version"));
        let mut magic = bytes.clone();
        magic[0] = b'X';
        assert!(refused(&magic).contains("not a shape share file"));
        let mut layout = bytes.clone();
        layout[16] = 0xff;
        assert!(refused(&layout).contains("layout"));
        let mut corrupt = bytes.clone();
        corrupt[mapping::CELL_OFFSET + 64..mapping::CELL_OFFSET + 400].fill(0xff);
        assert!(refused(&corrupt).contains("corrupt"));
        std::fs::write(path.join("s.share"), &bytes).unwrap();
        std::fs::set_permissions(path.join("s.share"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        assert!(
            find(&dir, "s")
                .err()
                .unwrap()
                .why
                .contains("is open to others")
        );
        std::fs::remove_file(path.join("s.share")).unwrap();
        std::os::unix::fs::symlink(path.join("elsewhere"), path.join("s.share")).unwrap();
        assert!(find(&dir, "s").err().unwrap().why.contains("symbolic link"));
        assert!(
            find(&dir, "none")
                .err()
                .unwrap()
                .why
                .contains("no such share")
        );
    }
}

#[cfg(test)]
mod noise {
    //! Share files whose header is sound and whose cell is noise: opening
    //! one either refuses it or gives a bucket whose every call returns
    //! at once (none of them sleeps on a rate, since nothing waits here).
    use super::tests::offer;
    use super::*;
    use proptest::prelude::*;

    /// Opens a share file holding `cell` after a sound header, and calls
    /// everything a shape calls on a bucket.
    fn open_noise(cell: &[u8], current_stamp: bool) -> Result<(), ShareError> {
        let scratch = tempfile::tempdir().unwrap();
        let dir = ControlDir::open_at(scratch.path().join("control")).unwrap();
        drop(
            open(
                &dir,
                "n",
                &offer(Limit::per_second(1 << 20), 1000),
                Counting::Bytes,
            )
            .unwrap(),
        );
        let path = dir.path().join("n.share");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = mapping::CELL_OFFSET;
        bytes[at..at + cell.len()].copy_from_slice(cell);
        if current_stamp {
            // The current slot stamped with the generation, so that the
            // noise behind the stamp is reached.
            let generation = u32::from_ne_bytes(bytes[at + 64..at + 68].try_into().unwrap());
            let slot = at + 80 + 48 * (generation as usize % 4);
            bytes[slot..slot + 8].copy_from_slice(&u64::from(generation).to_ne_bytes());
        }
        std::fs::write(&path, bytes).unwrap();
        let (bucket, _) = find(&dir, "n")?;
        let _ = (bucket.limit(), bucket.burst(), bucket.available());
        let _ = bucket.try_acquire(10);
        let mut paid = bucket.reserve(10);
        let _ = bucket.deadline(&paid);
        bucket.give_back(&mut paid, 10);
        let _ = bucket.set(Limit::per_second(1 << 20), 4096);
        bucket.set_paused(false);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn a_noisy_cell_is_refused_or_used_never_spun_on(
            cell in proptest::collection::vec(any::<u8>(), 272),
            current_stamp in any::<bool>(),
        ) {
            let started = std::time::Instant::now();
            match open_noise(&cell, current_stamp) {
                Ok(()) => {}
                Err(refused) => prop_assert!(
                    refused.to_string().contains("holds a corrupt bucket"),
                    "{refused}"
                ),
            }
            prop_assert!(started.elapsed() < std::time::Duration::from_secs(1));
        }
    }
}
