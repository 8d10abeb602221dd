//! One limit shared by many processes: every shape of the user that names
//! the same share (`--share NAME`) spends from one bucket, kept in a small
//! file `NAME.share` in the private control directory and mapped into each
//! process.
//!
//! The file is a versioned `#[repr(C)]` header (magic, version, sizes)
//! followed by the bucket's cell on cache lines of its own. It is built
//! whole under a temporary name and renamed into place without replacing,
//! so a share file is either complete or absent, and two processes racing
//! to create it agree on one. A file that is too short, of another version,
//! not built as expected, a link, open to others or another user's is
//! refused with a message, never read blindly. The bucket is lock-free:
//! a participant killed at any instant never blocks the others.

use crate::bucket::{BucketCell, Fill, TokenBucket};
use crate::clock::{Clock, MonotonicClock};
use crate::control::ControlDir;
use crate::rate::Limit;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};
use std::fmt;
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;

/// The first bytes of every share file.
const MAGIC: [u8; 8] = *b"SHAPEBKT";
/// The layout this shape reads and writes.
const VERSION: u32 = 1;
/// Where the cell starts: the header has the first cache line to itself.
const CELL_OFFSET: usize = 64;
/// The size of a share file: one page.
const FILE_SIZE: usize = 4096;

/// The header at the start of a share file.
#[repr(C)]
struct Header {
    magic: [u8; 8],
    version: u32,
    header_size: u32,
    cell_offset: u32,
    cell_size: u32,
    file_size: u64,
}

const _: () = assert!(size_of::<Header>() <= CELL_OFFSET);
const _: () = assert!(CELL_OFFSET + size_of::<BucketCell>() <= FILE_SIZE);
const _: () = assert!(CELL_OFFSET % align_of::<BucketCell>() == 0);

impl Header {
    fn expected() -> Header {
        Header {
            magic: MAGIC,
            version: VERSION,
            header_size: size_of::<Header>() as u32,
            cell_offset: CELL_OFFSET as u32,
            cell_size: size_of::<BucketCell>() as u32,
            file_size: FILE_SIZE as u64,
        }
    }
}

/// The bucket of a running shape: its own, or a share's.
pub type Bucket = TokenBucket<MonotonicClock, Cell>;

/// Where a bucket's cell lives.
pub enum Cell {
    /// In this process only.
    Own(Box<BucketCell>),
    /// In a share file mapped into this process.
    Shared(Mapping),
}

impl Deref for Cell {
    type Target = BucketCell;
    fn deref(&self) -> &BucketCell {
        match self {
            Cell::Own(cell) => cell,
            Cell::Shared(mapping) => mapping.cell(),
        }
    }
}

/// A bucket of this process's own.
pub fn own(limit: Limit, burst: u64) -> Result<Bucket, crate::bucket::InvalidBurst> {
    let cell = BucketCell::new(limit, burst, Fill::Full, MonotonicClock.now())?;
    Ok(TokenBucket::from_cell(
        Cell::Own(Box::new(cell)),
        MonotonicClock,
    ))
}

/// A share file mapped into memory.
pub struct Mapping {
    base: NonNull<u8>,
}

// SAFETY: the mapping is only ever accessed through the atomics of the
// cell (and the header, read once and never written after creation), so
// sharing it between threads is as safe as sharing the atomics.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the whole of `fd`, which is at least `FILE_SIZE` bytes.
    fn map(fd: &OwnedFd) -> rustix::io::Result<Mapping> {
        // SAFETY: a fresh shared mapping of a file of FILE_SIZE bytes, at an
        // address the kernel picks; nothing else in this process refers to
        // that memory.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                FILE_SIZE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        Ok(Mapping {
            base: NonNull::new(base.cast()).expect("mmap never returns null on success"),
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is page-aligned and FILE_SIZE bytes long, and
        // Header is plain old data valid for any bit pattern.
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    fn cell(&self) -> &BucketCell {
        // SAFETY: CELL_OFFSET is aligned for BucketCell and the cell fits
        // in the mapping (checked at compile time above); BucketCell is
        // made of atomics only, valid for any bit pattern, and a cell found
        // in a file is checked with `is_sound` before any bucket uses it.
        unsafe { &*self.base.as_ptr().add(CELL_OFFSET).cast::<BucketCell>() }
    }

    /// Fills a fresh mapping with the header and `cell`.
    fn fill(&mut self, cell: BucketCell) {
        // SAFETY: as in `header` and `cell`; the file was just created by
        // this process and is not yet visible under its name, so nothing
        // else reads it while it is written.
        unsafe {
            self.base
                .as_ptr()
                .cast::<Header>()
                .write(Header::expected());
            self.base
                .as_ptr()
                .add(CELL_OFFSET)
                .cast::<BucketCell>()
                .write(cell);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this length, and no
        // reference into it outlives the Mapping that hands them out.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), FILE_SIZE) };
    }
}

/// Why a share could not be used.
#[derive(Debug)]
pub struct ShareError {
    pub name: String,
    pub why: String,
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
    fn unusable(dir: &ControlDir, name: &str, refusal: Refusal) -> ShareError {
        let path = dir.path().join(file_name(name));
        let why = match refusal {
            Refusal::Missing | Refusal::System(_) => refusal.to_string(),
            refusal => format!(
                "{} {refusal}; remove it with 'shape --share {name} --reset'",
                path.display()
            ),
        };
        ShareError::new(name, why)
    }
}

impl fmt::Display for ShareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "share {}: {}", self.name, self.why)
    }
}

impl std::error::Error for ShareError {}

/// Checks a share name: letters, digits, `.`, `_` and `-`, not starting
/// with a dot, at most 64 characters.
pub fn check_name(name: &str) -> Result<String, String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if valid {
        Ok(name.to_string())
    } else {
        Err(
            "a share name is 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
                .into(),
        )
    }
}

/// Whether [`open`] made the share or found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    Created,
    Attached,
}

/// Opens share `name` in `dir`, creating it with `limit` and `burst` if it
/// does not exist yet.
pub fn open(
    dir: &ControlDir,
    name: &str,
    limit: Limit,
    burst: u64,
) -> Result<(Bucket, Opened), ShareError> {
    let file = file_name(name);
    loop {
        match attach(dir, &file) {
            Ok(mapping) => {
                return Ok((
                    TokenBucket::from_cell(Cell::Shared(mapping), MonotonicClock),
                    Opened::Attached,
                ));
            }
            Err(Refusal::Missing) => {}
            Err(refusal) => return Err(ShareError::unusable(dir, name, refusal)),
        }
        match create(dir, &file, limit, burst) {
            Ok(mapping) => {
                return Ok((
                    TokenBucket::from_cell(Cell::Shared(mapping), MonotonicClock),
                    Opened::Created,
                ));
            }
            // Another process created it first: attach to theirs.
            Err(Errno::EXIST) => continue,
            Err(err) => return Err(ShareError::new(name, err.to_string())),
        }
    }
}

/// Opens share `name` only if it exists.
pub fn find(dir: &ControlDir, name: &str) -> Result<Bucket, ShareError> {
    attach(dir, &file_name(name))
        .map(|mapping| TokenBucket::from_cell(Cell::Shared(mapping), MonotonicClock))
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
    match rustix::fs::unlinkat(dir.fd(), file_name(name).as_str(), AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(err) => Err(ShareError::new(
            name,
            format!("{}: {err}", dir.path().join(file_name(name)).display()),
        )),
    }
}

/// The file that holds share `name`, in the control directory.
fn file_name(name: &str) -> String {
    format!("{name}.share")
}

/// Why a share file was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Missing,
    Link,
    NotAFile,
    Foreign,
    OpenToOthers,
    TooShort,
    NotAShare,
    OtherVersion,
    OtherLayout,
    Corrupt,
    System(Errno),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Missing => f.write_str("no such share"),
            Refusal::Link => f.write_str("is a symbolic link"),
            Refusal::NotAFile => f.write_str("is not a regular file"),
            Refusal::Foreign => f.write_str("belongs to another user"),
            Refusal::OpenToOthers => f.write_str("is open to other users"),
            Refusal::TooShort => write!(f, "is too short (a share file is {FILE_SIZE} bytes)"),
            Refusal::NotAShare => f.write_str("is not a shape share file"),
            Refusal::OtherVersion => write!(
                f,
                "is of another version (this shape reads version {VERSION})"
            ),
            Refusal::OtherLayout => {
                f.write_str("has a header that does not match this shape's layout")
            }
            Refusal::Corrupt => f.write_str("holds a corrupt bucket"),
            Refusal::System(err) => write!(f, "{err}"),
        }
    }
}

impl From<Errno> for Refusal {
    fn from(err: Errno) -> Self {
        match err {
            Errno::NOENT => Refusal::Missing,
            Errno::LOOP => Refusal::Link,
            err => Refusal::System(err),
        }
    }
}

/// Maps an existing share file after checking it.
fn attach(dir: &ControlDir, file: &str) -> Result<Mapping, Refusal> {
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir.fd(), file, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    if stat.st_mode & 0o170000 != 0o100000 {
        return Err(Refusal::NotAFile);
    }
    if stat.st_uid != rustix::process::geteuid().as_raw() {
        return Err(Refusal::Foreign);
    }
    if stat.st_mode & 0o077 != 0 {
        return Err(Refusal::OpenToOthers);
    }
    if (stat.st_size as u64) < FILE_SIZE as u64 {
        return Err(Refusal::TooShort);
    }
    let mapping = Mapping::map(&fd)?;
    let header = mapping.header();
    let expected = Header::expected();
    if header.magic != MAGIC {
        return Err(Refusal::NotAShare);
    }
    if header.version != VERSION {
        return Err(Refusal::OtherVersion);
    }
    let layout = |h: &Header| (h.header_size, h.cell_offset, h.cell_size, h.file_size);
    if layout(header) != layout(&expected) {
        return Err(Refusal::OtherLayout);
    }
    if !mapping.cell().is_sound() {
        return Err(Refusal::Corrupt);
    }
    Ok(mapping)
}

/// Builds a share file under a temporary name and renames it into place,
/// failing with EEXIST if one appeared meanwhile.
fn create(dir: &ControlDir, file: &str, limit: Limit, burst: u64) -> Result<Mapping, Errno> {
    let temporary = format!(".{file}.{}.tmp", std::process::id());
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir.fd(), temporary.as_str(), flags, Mode::RUSR | Mode::WUSR)?;
    let built = (|| {
        rustix::fs::ftruncate(&fd, FILE_SIZE as u64)?;
        let mut mapping = Mapping::map(&fd)?;
        let cell = BucketCell::new(limit, burst, Fill::Full, MonotonicClock.now())
            .map_err(|_| Errno::INVAL)?;
        mapping.fill(cell);
        rustix::fs::renameat_with(
            dir.fd(),
            temporary.as_str(),
            dir.fd(),
            file,
            RenameFlags::NOREPLACE,
        )?;
        Ok(mapping)
    })();
    if built.is_err() {
        let _ = rustix::fs::unlinkat(dir.fd(), temporary.as_str(), AtFlags::empty());
    }
    built
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> (ControlDir, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("shape-share-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        (ControlDir::open_at(path.clone()).unwrap(), path)
    }

    #[test]
    fn the_first_creates_and_the_second_attaches_to_the_same_bucket() {
        let (dir, path) = dir("pair");
        let (first, opened) = open(&dir, "backup", Limit::per_second(8 << 20), 1 << 20).unwrap();
        assert_eq!(opened, Opened::Created);
        let (second, opened) = open(&dir, "backup", Limit::per_second(1 << 20), 10).unwrap();
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
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn bad_files_are_refused_with_their_reason() {
        let (dir, path) = dir("bad");
        let good = || {
            let _ = std::fs::remove_file(path.join("s.share"));
            drop(open(&dir, "s", Limit::per_second(1 << 20), 1000).unwrap());
            std::fs::read(path.join("s.share")).unwrap()
        };
        let refused = |bytes: &[u8]| {
            std::fs::write(path.join("s.share"), bytes).unwrap();
            find(&dir, "s").expect_err("refused").why
        };
        let bytes = good();
        assert!(refused(&bytes[..100]).contains("too short"));
        let mut version = bytes.clone();
        version[8] = 2;
        assert!(refused(&version).contains("another version"));
        let mut magic = bytes.clone();
        magic[0] = b'X';
        assert!(refused(&magic).contains("not a shape share file"));
        let mut layout = bytes.clone();
        layout[16] = 0xff;
        assert!(refused(&layout).contains("layout"));
        let mut corrupt = bytes.clone();
        corrupt[CELL_OFFSET + 64..CELL_OFFSET + 400].fill(0xff);
        assert!(refused(&corrupt).contains("corrupt"));
        std::fs::write(path.join("s.share"), &bytes).unwrap();
        std::fs::set_permissions(path.join("s.share"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        assert!(
            find(&dir, "s")
                .err()
                .unwrap()
                .why
                .contains("open to other users")
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
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn names_are_plain() {
        for good in ["backup", "crawl-1", "a.b_c"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "../x", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
