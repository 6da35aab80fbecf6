//! Compression for archives: the codec choice, and block compression spread over threads.
//!
//! backhand compresses data blocks one after another on the writing thread. To use every
//! core, [`BlockReader`] reads a window of a file ahead, compresses its full blocks on a
//! thread pool and queues the results; [`ParallelCompressor`] (the compressor backhand
//! calls) hands out a queued result when the block it is asked for is the one queued, and
//! compresses directly otherwise (fragments, metadata). The output is byte-identical to a
//! serial write.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::prefetch::Prefetched;

use crate::reader::Reader;
use backhand::compression::{
    CompressionAction, CompressionOptions, Compressor, DefaultCompressor, Lz4, Zstd,
};
use backhand::kind::Kind;
use backhand::{BackhandError, FilesystemCompressor, SuperBlock};
use std::sync::mpsc::{Receiver, sync_channel};

/// The squashfs block size fsd writes (mksquashfs's default).
pub const BLOCK_SIZE: u32 = 128 * 1024;
/// Blocks read and handed to the pool together; memory is bounded by about
/// `WINDOW_BLOCKS × (WINDOWS_AHEAD + 2)` blocks, twice over (input and output).
const WINDOW_BLOCKS: usize = 32;
/// Windows read ahead of the writer.
const WINDOWS_AHEAD: usize = 2;

/// A compression codec for archives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Zstd,
    Lz4,
    Gzip,
}

impl Codec {
    /// Parses the wire name (`zstd`, `lz4`, `gzip`).
    pub fn parse(name: &str) -> Option<Codec> {
        match name {
            "zstd" => Some(Codec::Zstd),
            "lz4" => Some(Codec::Lz4),
            "gzip" => Some(Codec::Gzip),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
            Codec::Gzip => "gzip",
        }
    }

    /// The level fsd uses: zstd 3 (fast, and what `zstd` itself defaults to), gzip 9 and
    /// plain lz4, as mksquashfs does for the latter two.
    pub fn level(self) -> u32 {
        match self {
            Codec::Zstd => 3,
            Codec::Lz4 => 0,
            Codec::Gzip => 9,
        }
    }

    pub(crate) fn filesystem_compressor(self) -> Result<FilesystemCompressor, BackhandError> {
        match self {
            Codec::Zstd => FilesystemCompressor::new(
                Compressor::Zstd,
                Some(CompressionOptions::Zstd(Zstd {
                    compression_level: self.level(),
                })),
            ),
            // version 1 is the only LZ4 format the kernel reads; flags 0 = plain (not HC)
            Codec::Lz4 => FilesystemCompressor::new(
                Compressor::Lz4,
                Some(CompressionOptions::Lz4(Lz4 {
                    version: 1,
                    flags: 0,
                })),
            ),
            Codec::Gzip => FilesystemCompressor::new(Compressor::Gzip, None),
        }
    }
}

/// The squashfs kind fsd writes: little-endian v4 with the parallel compressor of `codec`.
pub(crate) fn kind(codec: Codec) -> Kind {
    Kind::new_v4(match codec {
        Codec::Zstd => &PARALLEL_ZSTD,
        Codec::Lz4 => &PARALLEL_LZ4,
        Codec::Gzip => &PARALLEL_GZIP,
    })
}

static PARALLEL_ZSTD: ParallelCompressor = ParallelCompressor(Codec::Zstd);
static PARALLEL_LZ4: ParallelCompressor = ParallelCompressor(Codec::Lz4);
static PARALLEL_GZIP: ParallelCompressor = ParallelCompressor(Codec::Gzip);

/// One block handed to the pool: its input (to check it is the block asked for) and where
/// its compressed bytes arrive.
struct Pending {
    /// The window the block is in (shared with the pool, not copied) and where in it.
    window: Arc<Vec<u8>>,
    range: std::ops::Range<usize>,
    output: Receiver<Result<Vec<u8>, BackhandError>>,
}

thread_local! {
    /// Blocks being compressed ahead for the archive written on this thread, in file order.
    static QUEUE: RefCell<VecDeque<Pending>> = const { RefCell::new(VecDeque::new()) };
    /// This thread's zstd context, made once: backhand makes one per block, and making and
    /// clearing it was 5% of an archive of large files.
    static ZSTD: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

/// Compresses one block as backhand would with `codec`'s compressor (zstd's output does not
/// depend on `block_size`).
fn compress_block(
    codec: Codec,
    bytes: &[u8],
    fc: FilesystemCompressor,
    block_size: u32,
) -> Result<Vec<u8>, BackhandError> {
    if codec != Codec::Zstd {
        return DefaultCompressor.compress(bytes, fc, block_size);
    }
    ZSTD.with(|slot| {
        let mut slot = slot.borrow_mut();
        let compressor = match slot.as_mut() {
            Some(compressor) => compressor,
            None => slot.insert(zstd::bulk::Compressor::new(codec.level() as i32)?),
        };
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(bytes.len()));
        compressor.compress_to_buffer(bytes, &mut out)?;
        Ok(out)
    })
}

/// The compressor backhand calls: queued results first, direct compression otherwise.
pub(crate) struct ParallelCompressor(Codec);

impl CompressionAction for ParallelCompressor {
    type Error = BackhandError;
    type Compressor = Compressor;
    type FilesystemCompressor = FilesystemCompressor;
    type SuperBlock = SuperBlock;

    fn decompress(
        &self,
        bytes: &[u8],
        out: &mut Vec<u8>,
        compressor: Self::Compressor,
    ) -> Result<(), Self::Error> {
        DefaultCompressor.decompress(bytes, out, compressor)
    }

    fn compress(
        &self,
        bytes: &[u8],
        fc: Self::FilesystemCompressor,
        block_size: u32,
    ) -> Result<Vec<u8>, Self::Error> {
        let queued = QUEUE.with(|queue| {
            let mut queue = queue.borrow_mut();
            match queue.front() {
                Some(front) if front.input() == bytes => queue.pop_front(),
                _ => None,
            }
        });
        match queued.and_then(|pending| pending.output.recv().ok()) {
            Some(Ok(output)) => Ok(output),
            _ => compress_block(self.0, bytes, fc, block_size),
        }
    }

    fn compression_options(
        &self,
        superblock: &mut Self::SuperBlock,
        kind: &Kind,
        fs_compressor: Self::FilesystemCompressor,
    ) -> Result<Option<Vec<u8>>, Self::Error> {
        DefaultCompressor.compression_options(superblock, kind, fs_compressor)
    }
}

impl Pending {
    fn input(&self) -> &[u8] {
        &self.window[self.range.clone()]
    }
}

/// A window of a file and its blocks handed to the pool.
type Window = (Arc<Vec<u8>>, Vec<Pending>);

/// Reads a file for backhand. A reader thread (started on the first read) reads the file
/// in windows and hands each window's full blocks to `pool` for compression, a few windows
/// ahead of the writer, so reading, compressing and writing overlap.
pub(crate) struct BlockReader {
    path: PathBuf,
    reader: Reader,
    started: bool,
    windows: Option<Receiver<io::Result<Window>>>,
    window: Arc<Vec<u8>>,
    position: usize,
    codec: Codec,
    compressor: FilesystemCompressor,
    pool: Arc<rayon::ThreadPool>,
    /// Bytes read so far, for progress.
    on_read: Arc<dyn Fn(u64) + Send + Sync>,
    /// Where a small file's contents come from when it was read ahead.
    prefetched: Option<Arc<Mutex<Prefetched>>>,
}

impl BlockReader {
    pub(crate) fn new(
        path: PathBuf,
        reader: Reader,
        codec: Codec,
        compressor: FilesystemCompressor,
        pool: Arc<rayon::ThreadPool>,
        on_read: Arc<dyn Fn(u64) + Send + Sync>,
    ) -> BlockReader {
        BlockReader {
            path,
            reader,
            started: false,
            windows: None,
            window: Arc::default(),
            position: 0,
            codec,
            compressor,
            pool,
            on_read,
            prefetched: None,
        }
    }

    /// Takes the contents from `prefetched` instead of reading the file.
    pub(crate) fn prefetched(mut self, prefetched: Arc<Mutex<Prefetched>>) -> BlockReader {
        self.prefetched = Some(prefetched);
        self
    }

    fn fill_window(&mut self) -> io::Result<()> {
        self.position = 0;
        if !self.started {
            self.started = true;
            // A new file: whatever is left queued belongs to the last one.
            QUEUE.with(|queue| queue.borrow_mut().clear());
            if let Some(prefetched) = self.prefetched.take() {
                let contents = prefetched.lock().ok().and_then(|mut p| p.take(&self.path));
                if let Some(contents) = contents {
                    self.window = Arc::new(
                        contents.map_err(|e| crate::error::OutsideAt::named(&self.path, e))?,
                    );
                    (self.on_read)(self.window.len() as u64);
                    return Ok(());
                }
            }
            let file = self
                .reader
                .open(&self.path)
                .map_err(|e| crate::error::OutsideAt::named(&self.path, e))?;
            self.windows = Some(self.start_reader(file));
        }
        self.window = Arc::default();
        let Some(windows) = &self.windows else {
            return Ok(());
        };
        if let Ok(next) = windows.recv() {
            let (window, pending) = next?;
            (self.on_read)(window.len() as u64);
            QUEUE.with(|queue| queue.borrow_mut().extend(pending));
            self.window = window;
        }
        Ok(())
    }

    /// Reads `file` window by window on a thread of its own, handing blocks to the pool.
    fn start_reader(&self, mut file: File) -> Receiver<io::Result<Window>> {
        let (tx, rx) = sync_channel(WINDOWS_AHEAD);
        let pool = Arc::clone(&self.pool);
        let (codec, compressor) = (self.codec, self.compressor);
        std::thread::spawn(move || {
            let size = WINDOW_BLOCKS * BLOCK_SIZE as usize;
            loop {
                let mut window = Vec::with_capacity(size);
                let read = (&mut file).take(size as u64).read_to_end(&mut window);
                let item = read.map(|_| {
                    let window = Arc::new(window);
                    let pending = submit(&pool, codec, compressor, &window);
                    (window, pending)
                });
                let last = !matches!(&item, Ok((w, _)) if w.len() == size);
                if tx.send(item).is_err() || last {
                    return;
                }
            }
        });
        rx
    }
}

/// Hands the full, non-zero blocks of `window` to the pool (backhand stores zero blocks as
/// holes and compresses partial ones as fragments, so those are never asked for).
fn submit(
    pool: &rayon::ThreadPool,
    codec: Codec,
    compressor: FilesystemCompressor,
    window: &Arc<Vec<u8>>,
) -> Vec<Pending> {
    let block = BLOCK_SIZE as usize;
    let full: Vec<std::ops::Range<usize>> = (0..window.len() / block)
        .map(|i| i * block..(i + 1) * block)
        .filter(|range| window[range.clone()].iter().any(|b| *b != 0))
        .collect();
    if full.len() < 2 {
        return Vec::new(); // nothing to gain; backhand compresses it directly
    }
    full.into_iter()
        .map(|range| {
            let (tx, output) = sync_channel(1);
            let (job_window, job_range) = (Arc::clone(window), range.clone());
            pool.spawn(move || {
                let input = &job_window[job_range];
                let _ = tx.send(compress_block(codec, input, compressor, BLOCK_SIZE));
            });
            Pending {
                window: Arc::clone(window),
                range,
                output,
            }
        })
        .collect()
}

impl Read for BlockReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.position == self.window.len() {
            self.fill_window().map_err(|e| {
                // A refusal as outside the roots names its path already, and stays one
                // (a 403 for the archive's caller, not a failed write).
                if e.get_ref()
                    .is_some_and(|inner| inner.is::<crate::error::OutsideAt>())
                {
                    return e;
                }
                io::Error::new(e.kind(), format!("{}: {e}", self.path.display()))
            })?;
            if self.window.is_empty() {
                return Ok(0);
            }
        }
        let available = &self.window[self.position..];
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.position += n;
        Ok(n)
    }
}
