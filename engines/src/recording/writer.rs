//! Moving rows from sampler threads to files without slowing the samplers down.
//!
//! A sampler formats rows into a [`ChunkSink`]'s buffer (no allocation once the buffer
//! has grown) and hands full or 50 ms old buffers to a writer thread, which writes them
//! to the file (plain or gzip) and flushes at least every 200 ms. A row therefore
//! reaches the file within 250 ms, so a crash or `kill -9` loses at most that much.
//! Empty buffers come back through a return channel and are reused.
//!
//! A gzip file is a series of gzip members (RFC 1952 allows any number; `zcat`, Python's
//! `gzip`, pandas and flate2's `MultiGzDecoder` read them as one stream): the header is a
//! member of its own, then each flush compresses what came since the previous one into a
//! whole member in memory and appends it with one `write`. The file on disk is therefore
//! always a complete gzip file, even after `kill -9`, never a stream cut inside a member
//! (which `zcat` and Python reject). Starting a member costs ~20 bytes and the
//! compressor's history; at 5 members a second that is a few percent of a 1 ms recording.
//!
//! ## Append mode ([`ChunkSink::append`], [`open_append`])
//! Files that several processes of one run write at once (`load.csv`, `probe.csv` and
//! their `.hlog` files when scenario phases overlap): the file is opened with `O_APPEND`;
//! whoever finds it empty writes the header, under an exclusive `flock` held while
//! checking and writing, so two writers starting together never write two headers; each
//! chunk (whole rows) is then one `write` under the same lock, so rows of two writers
//! never interleave mid-row.
//!
//! Long because its tests (from `mod tests` on) cover each file kind's rotation, locking
//! and recovery; the code is under 690 lines.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the sampler side hands its buffer over.
const HANDOFF_NS: u64 = 50_000_000;
/// How often the writer flushes to the kernel.
const FLUSH_EVERY: Duration = Duration::from_millis(200);
const CHUNK_BYTES: usize = 256 * 1024;

/// The gzip level of the recording's `.csv.gz` files (1 fastest, 9 smallest).
pub(crate) const GZIP_LEVEL: u32 = 3;

/// The sampler-side end: format rows into `buf()`, then call [`ChunkSink::row_done`].
pub struct ChunkSink {
    buf: Vec<u8>,
    tx: Option<SyncSender<Vec<u8>>>,
    free: Receiver<Vec<u8>>,
    last_handoff_ns: u64,
    writer: Option<JoinHandle<std::io::Result<u64>>>,
    path: PathBuf,
}

/// The header line, the error naming the file (a full file system said only "No space
/// left on device").
fn write_header(out: &mut Out, header: &str, path: &Path) -> anyhow::Result<()> {
    out.write_all(header.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

impl ChunkSink {
    /// Creates `path` (gzip-compressed when `gzip`), writes `header` and starts the writer.
    pub fn create(path: &Path, header: &str, gzip: bool) -> anyhow::Result<ChunkSink> {
        Self::create_at(path, header, gzip.then_some(GZIP_LEVEL))
    }

    /// As [`ChunkSink::create`], gzip at `level` (1 fastest, 9 smallest) or plain with
    /// `None`: the trace's block_requests.csv.gz, 100,000 rows a second and more, takes
    /// level 1, which costs its writer about half the CPU of the default (benches/trace.rs).
    pub fn create_at(path: &Path, header: &str, level: Option<u32>) -> anyhow::Result<ChunkSink> {
        let file = File::create(path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        let mut out = if let Some(level) = level {
            Out::gzip(file, level)
        } else {
            Out::Plain(file)
        };
        write_header(&mut out, header, path)?;
        Self::start(path, out)
    }

    /// As [`ChunkSink::create_at`] (gzip at `level`, plain with `None`), the file cut
    /// into chunks by `rotate` (see [`Rotate`]): rows whose `t_ns` (each row's first
    /// cell) passes the chunk's end go to the next chunk.
    pub(crate) fn create_rotating(
        path: &Path,
        header: &str,
        level: Option<u32>,
        rotate: Rotate,
    ) -> anyhow::Result<ChunkSink> {
        let file = File::create(path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        let mut out = Out::new(file, level);
        write_header(&mut out, header, path)?;
        let r = Rotating {
            rotate,
            header: header.to_string(),
            path: path.to_path_buf(),
            level,
            seq: 1,
            first_t: None,
            last_t: 0,
            rows: 0,
            floor_t: 0,
        };
        Self::start_with(path, out, Some(r))
    }

    fn start(path: &Path, out: Out) -> anyhow::Result<ChunkSink> {
        Self::start_with(path, out, None)
    }

    fn start_with(path: &Path, out: Out, rot: Option<Rotating>) -> anyhow::Result<ChunkSink> {
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(64);
        let (free_tx, free) = mpsc::sync_channel::<Vec<u8>>(64);
        for _ in 0..4 {
            let _ = free_tx.try_send(Vec::with_capacity(CHUNK_BYTES + 4096));
        }
        let writer = std::thread::Builder::new()
            .name(format!(
                "write-{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            ))
            .spawn(move || write_loop(out, rx, free_tx, rot))?;
        Ok(ChunkSink {
            buf: Vec::with_capacity(CHUNK_BYTES + 4096),
            tx: Some(tx),
            free,
            last_handoff_ns: 0,
            writer: Some(writer),
            path: path.to_path_buf(),
        })
    }

    /// Rows go to `tx` instead of a file: each handed-over chunk (whole rows, at most
    /// 50 ms of them) is copied into a new buffer on the writer thread and sent, so the
    /// sampler side stays as allocation-free as with a file. `label` names it in errors.
    /// The agent ([`crate::agent`]) batches these for the wire.
    pub(crate) fn to_channel(label: &str, tx: mpsc::Sender<Vec<u8>>) -> anyhow::Result<ChunkSink> {
        Self::start(Path::new(label), Out::Channel(tx))
    }

    /// Appends to `path` (plain text), writing `header` only when the file is new or
    /// empty; every chunk is one locked `write` (see the module doc).
    pub fn append(path: &Path, header: &str) -> anyhow::Result<ChunkSink> {
        Self::start(path, Out::Append(SharedAppend::open(path, header)?))
    }

    /// The buffer to append one row to (the row must end with `\n`).
    #[inline]
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Call after each row (or group of rows) with the current run time.
    #[inline]
    pub fn row_done(&mut self, t_ns: u64) {
        if self.buf.len() >= CHUNK_BYTES || t_ns.saturating_sub(self.last_handoff_ns) >= HANDOFF_NS
        {
            self.handoff();
            self.last_handoff_ns = t_ns;
        }
    }

    fn handoff(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let next = self
            .free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES + 4096));
        let full = std::mem::replace(&mut self.buf, next);
        if let Some(tx) = &self.tx {
            // If the writer has died (disk full), rows are dropped; finish() reports why.
            let _ = tx.send(full);
        }
    }

    /// Hands over what is left, closes the file; returns bytes written (uncompressed).
    pub fn finish(mut self) -> anyhow::Result<u64> {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> anyhow::Result<u64> {
        self.handoff();
        self.tx = None;
        match self.writer.take() {
            Some(h) => match h.join() {
                Ok(r) => r.map_err(|e| anyhow::anyhow!("writing {}: {e}", self.path.display())),
                Err(_) => anyhow::bail!("writer thread for {} panicked", self.path.display()),
            },
            None => Ok(0),
        }
    }
}

impl Drop for ChunkSink {
    fn drop(&mut self) {
        if self.writer.is_some() {
            let _ = self.finish_inner();
        }
    }
}

/// Holds an exclusive `flock` on a file until dropped.
struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    fn new(f: &'a File) -> std::io::Result<Locked<'a>> {
        // SAFETY: flock on a file descriptor this File owns.
        loop {
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Locked(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: as above; closing the file would release it too.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Opens `path` for appending (created when missing); writes `header` and a newline
/// when the file is empty, under an exclusive lock, so of several writers starting
/// together exactly one writes it.
fn open_append(path: &Path, header: &str) -> anyhow::Result<File> {
    let f = File::options()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot open {} to append: {e}", path.display()))?;
    let lock =
        Locked::new(&f).map_err(|e| anyhow::anyhow!("cannot lock {}: {e}", path.display()))?;
    let empty = f.metadata().map(|m| m.len() == 0)?;
    if empty {
        let mut line = Vec::with_capacity(header.len() + 1);
        line.extend_from_slice(header.as_bytes());
        line.push(b'\n');
        (&f).write_all(&line)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    drop(lock);
    Ok(f)
}

/// Whether `f` is still the file at `path` (same device and inode); `false` when
/// `path` is gone (renamed into a chunk and not recreated yet).
fn is_at(f: &File, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let a = f.metadata()?;
    match std::fs::metadata(path) {
        Ok(b) => Ok(a.dev() == b.dev() && a.ino() == b.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// A file several processes append to while a recorder may rotate it
/// ([`rotate_shared`]): `load.csv` and `load.hlog` under `record -- diskpulse load` and
/// in `run` phases.
///
/// The protocol: the recorder renames the file only while holding the `flock` the
/// appenders take ([`rotate_shared`]). An appender, under its lock before each write,
/// checks that its descriptor is still the file at the path (fstat against stat:
/// device and inode); when it is not, it drops the lock, reopens the path through
/// [`open_append`] (which creates it and writes the header when it is empty) and
/// tries again. A write therefore lands either in the file the rotation closed (it
/// came before the rename) or in the new one (after), never in a chunk after it was
/// closed, and each file has its header once.
pub(crate) struct SharedAppend {
    file: File,
    path: PathBuf,
    header: String,
    reopened: u64,
}

impl SharedAppend {
    /// Opens (creates) `path` to append, writing `header` when it is empty.
    pub fn open(path: &Path, header: &str) -> anyhow::Result<SharedAppend> {
        Ok(SharedAppend {
            file: open_append(path, header)?,
            path: path.to_path_buf(),
            header: header.to_string(),
            reopened: 0,
        })
    }

    /// Appends `bytes` (whole rows) in one write, under the lock, to the file that is
    /// at the path now (see the type's doc).
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        loop {
            {
                let _lock = Locked::new(&self.file)?;
                if is_at(&self.file, &self.path)? {
                    let mut w = &self.file;
                    return w.write_all(bytes);
                }
            }
            self.file = open_append(&self.path, &self.header)
                .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
            self.reopened += 1;
        }
    }

    /// How many times a rotation made this appender reopen the path.
    #[cfg(test)]
    pub(crate) fn reopened(&self) -> u64 {
        self.reopened
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Moves the shared file at `path` to `to` (a closed chunk) under the appenders' lock
/// ([`SharedAppend`]): opens `path`, locks it, checks that it is still the file at
/// `path` (an appender may have just recreated it), fsyncs and renames it. The next
/// appender to write recreates `path` with its header. `Ok(false)` and nothing moved
/// when `path` is missing or holds no row past `header_bytes` (a chunk of a header
/// alone is not worth a file).
pub(crate) fn rotate_shared(path: &Path, to: &Path, header_bytes: u64) -> std::io::Result<bool> {
    loop {
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let _lock = Locked::new(&f)?;
        if !is_at(&f, path)? {
            continue;
        }
        if f.metadata()?.len() <= header_bytes {
            return Ok(false);
        }
        f.sync_all()?;
        std::fs::rename(path, to)?;
        return Ok(true);
    }
}

/// Where the writer thread puts rows: a plain file, a file shared with other writers
/// (append mode), or a gzip file written member by member.
enum Out {
    Plain(File),
    Append(SharedAppend),
    /// Chunks sent on (the agent's wire batches).
    Channel(mpsc::Sender<Vec<u8>>),
    Gzip {
        file: File,
        /// The member being compressed since the last flush (in memory).
        member: Option<Box<flate2::write::GzEncoder<Vec<u8>>>>,
        /// The previous member's buffer, reused.
        spare: Vec<u8>,
        level: flate2::Compression,
    },
}

impl Out {
    /// Gzip at `level`, or plain with `None`.
    fn new(file: File, level: Option<u32>) -> Out {
        match level {
            Some(l) => Out::gzip(file, l),
            None => Out::Plain(file),
        }
    }

    fn gzip(file: File, level: u32) -> Out {
        Out::Gzip {
            file,
            member: None,
            spare: Vec::new(),
            level: flate2::Compression::new(level),
        }
    }

    /// Bytes on disk plus those compressed into the member not yet written.
    fn len(&self) -> u64 {
        let pending = match self {
            Out::Gzip {
                member: Some(m), ..
            } => m.get_ref().len() as u64,
            _ => 0,
        };
        self.file().metadata().map(|m| m.len()).unwrap_or(0) + pending
    }

    /// The file (for its size and fsync). Only rotating sinks ask, and those are files:
    /// [`ChunkSink::to_channel`] has no rotation.
    fn file(&self) -> &File {
        match self {
            Out::Plain(f) => f,
            Out::Append(a) => a.file(),
            Out::Gzip { file, .. } => file,
            Out::Channel(_) => unreachable!("a channel sink (the agent's) is never rotated"),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Plain(f) => f.write_all(bytes),
            Out::Append(a) => a.append(bytes),
            Out::Channel(tx) => tx.send(bytes.to_vec()).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the batcher has stopped")
            }),
            Out::Gzip {
                member,
                spare,
                level,
                ..
            } => member
                .get_or_insert_with(|| {
                    Box::new(flate2::write::GzEncoder::new(std::mem::take(spare), *level))
                })
                .write_all(bytes),
        }
    }

    /// Plain: the data is already in the kernel (File is unbuffered). Gzip: closes the
    /// member and appends it whole.
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Plain(f) => f.flush(),
            Out::Append(_) => Ok(()),
            Out::Channel(_) => Ok(()),
            Out::Gzip {
                file,
                member,
                spare,
                ..
            } => {
                if let Some(m) = member.take() {
                    let mut bytes = m.finish()?;
                    file.write_all(&bytes)?;
                    bytes.clear();
                    *spare = bytes;
                }
                Ok(())
            }
        }
    }
}

fn write_loop(
    mut out: Out,
    rx: Receiver<Vec<u8>>,
    free: SyncSender<Vec<u8>>,
    mut rot: Option<Rotating>,
) -> std::io::Result<u64> {
    let mut total = 0u64;
    let mut dirty = false;
    let mut last_flush = Instant::now();
    loop {
        match rx.recv_timeout(FLUSH_EVERY) {
            Ok(mut chunk) => {
                match rot.as_mut() {
                    Some(r) => r.write(&mut out, &chunk)?,
                    None => out.write_all(&chunk)?,
                }
                total += chunk.len() as u64;
                dirty = true;
                chunk.clear();
                let _ = free.try_send(chunk);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if dirty && last_flush.elapsed() >= FLUSH_EVERY {
            out.flush()?;
            dirty = false;
            last_flush = Instant::now();
        }
    }
    out.flush()?;
    if let Some(r) = rot.as_mut() {
        r.finish(&mut out)?;
    }
    Ok(total)
}

/// How a [`ChunkSink::create_rotating`] file is cut, and who hears of each closed chunk.
pub struct Rotate {
    /// Rows of one aligned span of `t_ns` per chunk (`[k * every_ns, (k + 1) * every_ns)`).
    pub every_ns: Option<u64>,
    /// A chunk closes once its file holds this many bytes (checked between hand-overs).
    pub every_bytes: Option<u64>,
    /// Where closed chunks go, and the name of closed chunk `seq` (1-based) there.
    pub dir: PathBuf,
    pub name: Box<dyn Fn(u64) -> String + Send>,
    /// Called on the writer thread with each chunk as it closes, and with the last one
    /// (still at the sink's path) when the sink finishes.
    pub(crate) on_close: Box<dyn FnMut(&Closed) + Send>,
    /// Which cell of a row holds its `t_ns` (0: the first; the agents' files, which
    /// begin with `node`, 1). The cell must come before any quoted one.
    pub(crate) t_cell: usize,
}

/// A chunk that was closed: fsynced, renamed into [`Rotate::dir`] (or, the last one,
/// left at the sink's path), never written again.
#[derive(Debug, Clone)]
pub struct Closed {
    pub path: PathBuf,
    pub first_t_ns: u64,
    pub last_t_ns: u64,
    pub rows: u64,
    pub bytes: u64,
    /// The sink finished: this is the last chunk, at the sink's own path.
    pub last: bool,
}

/// The writer thread's side of a rotating sink.
struct Rotating {
    rotate: Rotate,
    header: String,
    path: PathBuf,
    level: Option<u32>,
    /// The number the current chunk gets when it closes.
    seq: u64,
    first_t: Option<u64>,
    last_t: u64,
    rows: u64,
    /// The end of the last chunk closed by time: the next one spans from there at least,
    /// so a late row (envelopes' 10 s windows come after later 10 ms ones) that opens a
    /// chunk does not give it an old span and a cut at the very next row.
    floor_t: u64,
}

/// The `t_ns` of a row (its cell `cell`, 0 the first); 0 when it is not a number.
fn row_t(line: &[u8], cell: usize) -> u64 {
    let mut line = line;
    for _ in 0..cell {
        match line.iter().position(|&b| b == b',' || b == b'\n') {
            Some(i) if line[i] == b',' => line = &line[i + 1..],
            _ => return 0,
        }
    }
    let mut v = 0u64;
    for &b in line {
        if !b.is_ascii_digit() {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add((b - b'0') as u64);
    }
    v
}

/// The last row of whole rows (ending in `\n`).
fn last_row(buf: &[u8]) -> &[u8] {
    let body = buf.strip_suffix(b"\n").unwrap_or(buf);
    match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => &body[i + 1..],
        None => body,
    }
}

/// Where the first row whose `t_ns` (cell `cell`) is at least `end` begins
/// (`buf.len()`: none).
fn split_at_t(buf: &[u8], end: u64, cell: usize) -> usize {
    let mut at = 0;
    while at < buf.len() {
        if row_t(&buf[at..], cell) >= end {
            return at;
        }
        match buf[at..].iter().position(|&b| b == b'\n') {
            Some(i) => at += i + 1,
            None => return buf.len(),
        }
    }
    buf.len()
}

impl Rotating {
    /// Writes whole rows, closing the chunk where they pass its end.
    fn write(&mut self, out: &mut Out, buf: &[u8]) -> std::io::Result<()> {
        let mut rest = buf;
        let cell = self.rotate.t_cell;
        while !rest.is_empty() {
            if self.rows > 0 && self.rotate.every_bytes.is_some_and(|b| out.len() >= b) {
                self.close(out)?;
            }
            let cut = match self.rotate.every_ns {
                Some(e) if e > 0 => {
                    let first = self
                        .first_t
                        .unwrap_or_else(|| row_t(rest, cell))
                        .max(self.floor_t);
                    let end = (first / e).saturating_add(1).saturating_mul(e);
                    if row_t(last_row(rest), cell) < end {
                        rest.len()
                    } else {
                        split_at_t(rest, end, cell)
                    }
                }
                _ => rest.len(),
            };
            if cut == 0 {
                // The first row already belongs to the next chunk (rows > 0 here: an
                // empty chunk takes its end from this very row).
                if let Some(e) = self.rotate.every_ns.filter(|e| *e > 0) {
                    let first = self.first_t.unwrap_or(0).max(self.floor_t);
                    self.floor_t = (first / e).saturating_add(1).saturating_mul(e);
                }
                self.close(out)?;
                continue;
            }
            let part = &rest[..cut];
            out.write_all(part)?;
            self.rows += part.iter().filter(|&&b| b == b'\n').count() as u64;
            self.first_t.get_or_insert_with(|| row_t(part, cell));
            self.last_t = row_t(last_row(part), cell);
            rest = &rest[cut..];
            if !rest.is_empty() {
                if let Some(e) = self.rotate.every_ns.filter(|e| *e > 0) {
                    let first = self.first_t.unwrap_or(0).max(self.floor_t);
                    self.floor_t = (first / e).saturating_add(1).saturating_mul(e);
                }
                self.close(out)?;
            }
        }
        Ok(())
    }

    /// Closes the current chunk: its last member written, fsynced, renamed into the
    /// chunk directory (the directory fsynced), then a new file at the sink's path with
    /// the header. A crash in between leaves every row in one whole file or the other.
    fn close(&mut self, out: &mut Out) -> std::io::Result<()> {
        out.flush()?;
        out.file().sync_all()?;
        let bytes = out.file().metadata().map(|m| m.len()).unwrap_or(0);
        std::fs::create_dir_all(&self.rotate.dir)?;
        let to = self.rotate.dir.join((self.rotate.name)(self.seq));
        std::fs::rename(&self.path, &to)?;
        File::open(&self.rotate.dir)?.sync_all()?;
        let file = File::create(&self.path)?;
        *out = Out::new(file, self.level);
        out.write_all(self.header.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()?;
        if let Some(parent) = self.path.parent() {
            File::open(parent)?.sync_all()?;
        }
        let closed = Closed {
            path: to,
            first_t_ns: self.first_t.unwrap_or(0),
            last_t_ns: self.last_t,
            rows: self.rows,
            bytes,
            last: false,
        };
        self.seq += 1;
        self.first_t = None;
        self.last_t = 0;
        self.rows = 0;
        (self.rotate.on_close)(&closed);
        Ok(())
    }

    /// The sink finished: fsyncs the last chunk and reports it (it stays at its path).
    fn finish(&mut self, out: &mut Out) -> std::io::Result<()> {
        out.file().sync_all()?;
        let closed = Closed {
            path: self.path.clone(),
            first_t_ns: self.first_t.unwrap_or(0),
            last_t_ns: self.last_t,
            rows: self.rows,
            bytes: out.file().metadata().map(|m| m.len()).unwrap_or(0),
            last: true,
        };
        (self.rotate.on_close)(&closed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::csv::put_u64;
    use std::io::Read;

    #[test]
    fn rows_reach_a_gzip_file_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.csv.gz");
        let mut s = ChunkSink::create(&p, "t_ns,v", true).unwrap();
        for i in 0..100_000u64 {
            let b = s.buf();
            put_u64(b, i * 1_000_000);
            b.push(b',');
            put_u64(b, i);
            b.push(b'\n');
            s.row_done(i * 1_000_000);
        }
        s.finish().unwrap();
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(File::open(&p).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 100_001);
        assert_eq!(lines[0], "t_ns,v");
        assert_eq!(lines[100_000], "99999000000,99999");
    }

    #[test]
    fn a_gzip_file_is_whole_while_the_writer_runs() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.csv.gz");
        let mut s = ChunkSink::create(&p, "t_ns", true).unwrap();
        let clock = collectors::clock::Clock::start();
        for i in 0..3u64 {
            put_u64(s.buf(), i);
            s.buf().push(b'\n');
            s.row_done(clock.now_ns() + HANDOFF_NS);
            std::thread::sleep(Duration::from_millis(300));
        }
        // Not finished: a strict reader (one that fails on a member cut short, as zcat
        // and Python do) reads every row handed over so far.
        let raw = std::fs::read(&p).unwrap();
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "t_ns\n0\n1\n2\n");
        // Several members, each complete: the gzip magic appears more than once.
        let members = raw.windows(3).filter(|w| w == &[0x1f, 0x8b, 8]).count();
        assert!(members >= 4, "{members} members");
        s.finish().unwrap();
    }

    /// Rows `t_ns,i` every ms for `n` ms through a rotating sink; the chunks closed.
    fn rotated(every_ns: Option<u64>, every_bytes: Option<u64>, n: u64) -> Vec<(PathBuf, Closed)> {
        let d = tempfile::tempdir().unwrap().keep();
        let p = d.join("x.csv.gz");
        let closed = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
        let c2 = closed.clone();
        let mut s = ChunkSink::create_rotating(
            &p,
            "t_ns,i",
            Some(1),
            Rotate {
                every_ns,
                every_bytes,
                dir: d.join("chunks"),
                name: Box::new(|k| format!("x.{k:06}.csv.gz")),
                on_close: Box::new(move |c| c2.lock().unwrap().push(c.clone())),
                t_cell: 0,
            },
        )
        .unwrap();
        for i in 0..n {
            let b = s.buf();
            put_u64(b, i * 1_000_000);
            b.push(b',');
            // Digits that do not compress away, so sizes grow.
            put_u64(b, i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            b.push(b'\n');
            s.row_done(i * 1_000_000);
        }
        s.finish().unwrap();
        let v = closed.lock().unwrap().clone();
        v.into_iter().map(|c| (c.path.clone(), c)).collect()
    }

    fn rows_in(p: &Path) -> Vec<u64> {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(File::open(p).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let mut l = text.lines();
        assert_eq!(l.next(), Some("t_ns,i"));
        l.map(|r| r.split(',').next().unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn a_time_rotation_cuts_exactly_at_the_aligned_boundaries() {
        let chunks = rotated(Some(100_000_000), None, 1000);
        assert_eq!(chunks.len(), 10);
        let mut all = vec![];
        for (k, (p, c)) in chunks.iter().enumerate() {
            let rows = rows_in(p);
            assert_eq!(rows.len() as u64, c.rows);
            assert_eq!(rows.first(), Some(&c.first_t_ns));
            assert_eq!(rows.last(), Some(&c.last_t_ns));
            let k = k as u64;
            assert!(rows.iter().all(|&t| t / 100_000_000 == k), "chunk {k}");
            assert_eq!(c.last, k == 9);
            all.extend(rows);
        }
        assert_eq!(all, (0..1000).map(|i| i * 1_000_000).collect::<Vec<_>>());
    }

    #[test]
    fn a_size_rotation_closes_chunks_of_about_the_size_asked() {
        let chunks = rotated(None, Some(64 << 10), 60_000);
        assert!(chunks.len() >= 5, "{} chunks", chunks.len());
        let mut all = vec![];
        for (p, c) in &chunks {
            let rows = rows_in(p);
            assert_eq!(rows.len() as u64, c.rows);
            // Checked between hand-overs (at most 256 KiB of rows, ~100 KiB gzip).
            if !c.last {
                assert!(
                    c.bytes >= 64 << 10 && c.bytes < 512 << 10,
                    "{} bytes",
                    c.bytes
                );
            }
            all.extend(rows);
        }
        assert_eq!(all.len(), 60_000);
        assert!(all.windows(2).all(|w| w[0] < w[1]));
    }

    /// The reopen protocol: 4 appenders (each its own open file description, as separate
    /// processes would have) race a rotator that renames the file into chunks every
    /// ~0.5 ms. Every row lands exactly once, in whole, in a file with exactly one
    /// header; each writer's rows run in order across the chunks then the current file;
    /// and the appenders did reopen (the race happened).
    #[test]
    fn appenders_follow_a_rotation_every_row_once_and_one_header_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("load.csv");
        let header = "t_ns,writer,seq";
        const WRITERS: u64 = 4;
        const ROWS: u64 = 3000;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let path = path.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut a = SharedAppend::open(&path, header).unwrap();
                    let mut buf = Vec::new();
                    for seq in 0..ROWS {
                        buf.extend_from_slice(format!("{seq},{w},{seq}\n").as_bytes());
                        if seq % 3 == 2 {
                            a.append(&buf).unwrap();
                            buf.clear();
                            std::thread::sleep(Duration::from_micros(100));
                        }
                    }
                    a.append(&buf).unwrap();
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    a.reopened()
                })
            })
            .collect();
        let chunks = dir.path().join("chunks");
        std::fs::create_dir(&chunks).unwrap();
        let mut n = 0u64;
        while done.load(std::sync::atomic::Ordering::SeqCst) < WRITERS {
            let to = chunks.join(format::csv::chunk_name_of("load.csv", n));
            if rotate_shared(&path, &to, header.len() as u64 + 1).unwrap() {
                n += 1;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        let reopened: u64 = writers.into_iter().map(|t| t.join().unwrap()).sum();
        let files = format::csv::chunked_files(dir.path(), "load.csv");
        // The last rotation may come after the last row: then there is no current file.
        assert_eq!(
            files.len() as u64,
            n + path.exists() as u64,
            "every chunk then the current file"
        );
        assert!(n >= 3, "the rotator cut only {n} chunks");
        assert!(
            reopened >= 1,
            "no appender ever reopened: the race did not happen"
        );
        let mut next = [0u64; WRITERS as usize];
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            assert!(text.ends_with('\n'), "{} ends mid-row", f.display());
            let mut lines = text.lines();
            assert_eq!(
                lines.next(),
                Some(header),
                "{} starts with its header",
                f.display()
            );
            for l in lines {
                let c: Vec<u64> = l
                    .split(',')
                    .map(|x| x.parse().unwrap_or_else(|_| panic!("torn row {l:?}")))
                    .collect();
                assert_eq!(c.len(), 3, "torn row {l:?} in {}", f.display());
                let w = c[1] as usize;
                assert_eq!(
                    c[2],
                    next[w],
                    "writer {w}: row {} where {} was due (a gap, a duplicate or out of order) in {}",
                    c[2],
                    next[w],
                    f.display()
                );
                next[w] += 1;
            }
        }
        assert_eq!(next, [ROWS; WRITERS as usize], "every row of every writer");
    }

    #[test]
    fn writers_appending_together_write_one_header_and_whole_rows() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.csv");
        let threads: Vec<_> = (0..4u64)
            .map(|w| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let mut s = ChunkSink::append(&p, "t_ns,writer").unwrap();
                    for i in 0..20_000u64 {
                        let b = s.buf();
                        put_u64(b, i);
                        b.push(b',');
                        put_u64(b, w);
                        b.push(b'\n');
                        // Hand over often so chunks of the four writers race.
                        s.row_done(i * HANDOFF_NS);
                    }
                    s.finish().unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.iter().filter(|l| **l == "t_ns,writer").count(), 1);
        assert_eq!(lines[0], "t_ns,writer");
        assert_eq!(lines.len(), 1 + 4 * 20_000);
        let mut per = [0u64; 4];
        for l in &lines[1..] {
            let (i, w) = l.split_once(',').expect("a whole row");
            let w: usize = w.parse().unwrap();
            assert_eq!(
                i.parse::<u64>().unwrap(),
                per[w],
                "rows of writer {w} in order"
            );
            per[w] += 1;
        }
    }

    #[test]
    fn a_late_row_that_opens_a_chunk_does_not_cut_it_at_the_next_row() {
        // Rows every ms, and every 100 ms a late row 1.5 s old (as envelopes.csv.gz's
        // 10 s windows come after later 10 ms ones), plain text, 1 s chunks.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.csv");
        let closed = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
        let c2 = closed.clone();
        let mut s = ChunkSink::create_rotating(
            &p,
            "t_ns",
            None,
            Rotate {
                every_ns: Some(1_000_000_000),
                every_bytes: None,
                dir: d.path().join("chunks"),
                name: Box::new(|k| format!("x.{k:06}.csv")),
                on_close: Box::new(move |c| c2.lock().unwrap().push(c.clone())),
                t_cell: 0,
            },
        )
        .unwrap();
        let mut rows = 0u64;
        for ms in 0..4000u64 {
            let t = ms * 1_000_000;
            let b = s.buf();
            if ms >= 1500 && ms % 100 == 0 {
                put_u64(b, t - 1_500_000_000);
                b.push(b'\n');
                rows += 1;
            }
            put_u64(b, t);
            b.push(b'\n');
            rows += 1;
            s.row_done(t);
        }
        s.finish().unwrap();
        let v = closed.lock().unwrap().clone();
        // Four seconds, four chunks (the last the file itself), every row once.
        assert_eq!(v.len(), 4, "{v:#?}");
        assert!(v.iter().all(|c| c.rows >= 900), "{v:#?}");
        assert_eq!(v.iter().map(|c| c.rows).sum::<u64>(), rows);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("t_ns\n"), "plain, with its header");
    }

    #[test]
    fn a_row_time_read_from_another_cell_cuts_at_its_boundaries() {
        assert_eq!(row_t(b"n1,1234,5\n", 1), 1234);
        assert_eq!(row_t(b"1234,n1\n", 0), 1234);
        assert_eq!(row_t(b"n1\n9,9\n", 1), 0, "the cell is past the row's end");
        // Rows `node,t_ns,i` of two nodes every ms for 3 s, 1 s chunks by the second cell.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.csv");
        let closed = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
        let c2 = closed.clone();
        let mut s = ChunkSink::create_rotating(
            &p,
            "node,t_ns,i",
            None,
            Rotate {
                every_ns: Some(1_000_000_000),
                every_bytes: None,
                dir: d.path().join("chunks"),
                name: Box::new(|k| format!("a.{k:06}.csv")),
                on_close: Box::new(move |c| c2.lock().unwrap().push(c.clone())),
                t_cell: 1,
            },
        )
        .unwrap();
        for ms in 0..3000u64 {
            let t = ms * 1_000_000 + 1;
            for node in ["a", "b"] {
                let b = s.buf();
                b.extend_from_slice(node.as_bytes());
                b.push(b',');
                put_u64(b, t);
                b.extend_from_slice(b",7\n");
            }
            s.row_done(t);
        }
        s.finish().unwrap();
        let v = closed.lock().unwrap().clone();
        assert_eq!(v.len(), 3, "{v:#?}");
        for (k, c) in v.iter().enumerate() {
            let k = k as u64;
            assert_eq!(c.rows, 2000, "{c:?}");
            assert_eq!(c.first_t_ns, k * 1_000_000_000 + 1, "{c:?}");
            assert_eq!(c.last_t_ns, k * 1_000_000_000 + 999_000_001, "{c:?}");
        }
    }

    #[test]
    fn rows_are_on_disk_within_250ms_while_running() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.csv");
        let mut s = ChunkSink::create(&p, "t_ns", false).unwrap();
        let clock = collectors::clock::Clock::start();
        s.buf().extend_from_slice(b"1\n");
        s.row_done(clock.now_ns() + HANDOFF_NS);
        std::thread::sleep(Duration::from_millis(300));
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "t_ns\n1\n");
        s.finish().unwrap();
    }
}
