//! The share file's layout and its mapping into memory: a versioned
//! `#[repr(C)]` header (magic, version, sizes, what the tokens count)
//! followed by the bucket's cell on cache lines of its own. Also the
//! bucket of a running shape, whose cell is its own or a share's, and
//! what is said when a mapped share is damaged or cut short under it.
//!
//! A file cut short while mapped (`truncate`) makes the next touch of the
//! lost page raise SIGBUS, which would end shape without a word. The
//! mapping therefore answers SIGBUS with one line that names the file and
//! status 1. The line is made when the file is mapped, as nothing may be
//! allocated in a signal handler.

use rustix::mm::{MapFlags, ProtFlags};
use shape_bucket::BucketCell;
use shape_leaves::bucket::{Cell, SharedCell};
use shape_leaves::counting::Counting;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::Once;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// The first bytes of every share file.
pub(super) const MAGIC: [u8; 8] = *b"SHAPEBKT";
/// The layout this shape reads and writes: 2 says what the tokens count.
pub(super) const VERSION: u32 = 2;
/// Where the cell starts: the header has the first cache line to itself.
pub(super) const CELL_OFFSET: usize = 64;
/// The size of a share file: one page.
pub(super) const FILE_SIZE: usize = 4096;

/// The header at the start of a share file.
#[repr(C)]
pub(super) struct Header {
    pub(super) magic: [u8; 8],
    pub(super) version: u32,
    pub(super) header_size: u32,
    pub(super) cell_offset: u32,
    pub(super) cell_size: u32,
    pub(super) file_size: u64,
    /// What one token of the bucket is worth: [`Counting::code`].
    pub(super) counting: u32,
    /// [`BURST_FOLLOWS_RATE`](shape_leaves::bucket::BURST_FOLLOWS_RATE) while
    /// nobody has set the share's burst.
    /// Zero in files made before the flag, whose burst then stays.
    pub(super) flags: AtomicU32,
}

const _: () = assert!(size_of::<Header>() <= CELL_OFFSET);
const _: () = assert!(CELL_OFFSET + size_of::<BucketCell>() <= FILE_SIZE);
const _: () = assert!(CELL_OFFSET % align_of::<BucketCell>() == 0);

impl Header {
    /// The header of a share that counts `counting`, with `flags`.
    pub(super) fn expected(counting: Counting, flags: u32) -> Header {
        Header {
            magic: MAGIC,
            version: VERSION,
            header_size: size_of::<Header>() as u32,
            cell_offset: CELL_OFFSET as u32,
            cell_size: size_of::<BucketCell>() as u32,
            file_size: FILE_SIZE as u64,
            counting: counting.code(),
            flags: AtomicU32::new(flags),
        }
    }
}

/// Which share a file holds and where it is, for messages.
#[derive(Debug, Clone)]
pub(super) struct ShareFile {
    pub(super) name: String,
    pub(super) path: PathBuf,
}

impl ShareFile {
    /// Says that the file is unusable for `why`, and the way out.
    pub(super) fn unusable(&self, why: &str) -> String {
        format!(
            "share {}: {} {why}; end the shapes on it and run 'shape --share {} --reset'",
            self.name,
            self.path.display(),
            self.name
        )
    }
}

/// A share file mapped into memory.
pub struct Mapping {
    base: NonNull<u8>,
    file: ShareFile,
}

// SAFETY: the mapping is only ever accessed through the atomics of the
// cell and the header's flags (the rest of the header is never written
// after creation), so sharing it between threads is as safe as sharing
// the atomics.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the whole of `fd`, which is at least `FILE_SIZE` bytes and
    /// holds `file`.
    pub(super) fn map(fd: impl AsFd, file: ShareFile) -> rustix::io::Result<Mapping> {
        say_on_sigbus(&file);
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
            file,
        })
    }

    /// This mapping as a bucket's cell.
    pub(super) fn into_cell(self) -> Cell {
        Cell::Shared(Box::new(self))
    }

    pub(super) fn header(&self) -> &Header {
        // SAFETY: the mapping is page-aligned and FILE_SIZE bytes long, and
        // Header is plain old data and an atomic, valid for any bit
        // pattern; the only part others write is the atomic.
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    pub(super) fn cell(&self) -> &BucketCell {
        // SAFETY: CELL_OFFSET is aligned for BucketCell and the cell fits
        // in the mapping (checked at compile time above); BucketCell is
        // made of atomics only, valid for any bit pattern, and a cell found
        // in a file is checked with `is_sound` before any bucket uses it.
        unsafe { &*self.base.as_ptr().add(CELL_OFFSET).cast::<BucketCell>() }
    }

    /// Fills a fresh mapping with the header (with `flags`) and `cell`.
    pub(super) fn fill(&mut self, cell: BucketCell, counting: Counting, flags: u32) {
        // SAFETY: as in `header` and `cell`; the file was just created by
        // this process and is not yet visible under its name, so nothing
        // else reads it while it is written.
        unsafe {
            self.base
                .as_ptr()
                .cast::<Header>()
                .write(Header::expected(counting, flags));
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

/// The line SIGBUS prints: about the share mapped last. A shape maps one
/// share at a time (a copy its own, `--status` each in turn), so that is
/// the one whose page went missing. Null until a share is mapped.
static SIGBUS_LINE: AtomicPtr<&'static [u8]> = AtomicPtr::new(std::ptr::null_mut());

/// Every line SIGBUS may say that was leaked for it, one per share file.
static LEAKED_LINES: std::sync::Mutex<Vec<&'static &'static [u8]>> =
    std::sync::Mutex::new(Vec::new());

/// Makes SIGBUS say that `file` was cut short, and end shape with status 1.
fn say_on_sigbus(file: &ShareFile) {
    let line = format!(
        "shape: {}\n",
        file.unusable("was cut short while in use: stopped")
    );
    // Leaked: the handler may read it at any time until the process ends.
    // A process maps few shares, but may map one again and again (found by
    // fuzzing: 74 bytes a time), so each line is leaked once, and said
    // again from there.
    let leaked: &'static &'static [u8] = {
        let mut leaked = shape_leaves::lock::lock(&LEAKED_LINES);
        match leaked.iter().find(|said| ***said == line.as_bytes()) {
            Some(said) => said,
            None => {
                let said: &'static [u8] = Box::leak(line.into_bytes().into_boxed_slice());
                let said: &'static &'static [u8] = Box::leak(Box::new(said));
                leaked.push(said);
                said
            }
        }
    };
    SIGBUS_LINE.store(std::ptr::from_ref(leaked).cast_mut(), Ordering::Release);
    static HANDLER: Once = Once::new();
    HANDLER.call_once(|| {
        // SAFETY: `cut_short` is async-signal-safe, as it must be.
        let registered =
            unsafe { signal_hook::low_level::register(signal_hook::consts::SIGBUS, cut_short) };
        // Without the handler, SIGBUS still ends shape, only silently.
        let _ = registered;
    });
}

/// SIGBUS's action: says [`SIGBUS_LINE`] and exits with status 1. It only
/// loads an atomic pointer to memory that is never freed, writes and exits,
/// all async-signal-safe; it never returns, so the access that faulted is
/// not made again.
fn cut_short() {
    let line = SIGBUS_LINE.load(Ordering::Acquire);
    if !line.is_null() {
        // SAFETY: set by `say_on_sigbus` from a leaked, never freed value.
        let line: &[u8] = unsafe { *line };
        let _ = rustix::io::write(rustix::stdio::stderr(), line);
    }
    signal_hook::low_level::exit(1);
}

impl SharedCell for Mapping {
    fn cell(&self) -> &BucketCell {
        Mapping::cell(self)
    }

    /// The share's [`BURST_FOLLOWS_RATE`](shape_leaves::bucket::BURST_FOLLOWS_RATE)
    /// flag, in the header.
    fn burst_rule(&self) -> &AtomicU32 {
        &self.header().flags
    }

    fn damage_line(&self) -> String {
        self.file
            .unusable("was written over while in use and holds no readable settings: stopped")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_mapped_again_leaks_no_second_line() {
        // Found by fuzzing: each mapping leaked the line SIGBUS says.
        let file = ShareFile {
            name: "mapped-again".into(),
            path: "/nowhere/mapped-again".into(),
        };
        for _ in 0..3 {
            say_on_sigbus(&file);
        }
        let leaked = shape_leaves::lock::lock(&LEAKED_LINES);
        let ours = leaked
            .iter()
            .filter(|line| String::from_utf8_lossy(line).contains("mapped-again"))
            .count();
        assert_eq!(ours, 1);
    }
}
