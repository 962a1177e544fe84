//! Opening a run's files: only regular files (issue 25, class 3). A FIFO named
//! `meta.json` would block a plain `open` forever (no writer), and a directory, socket or
//! device where a file should be reads as garbage or as "empty". Every reader of a run
//! directory opens through [`open`]: the file is opened with `O_NONBLOCK` (a FIFO then
//! opens at once), its type checked on the open descriptor (no race with a rename), and
//! anything but a regular file refused with what it is. `O_NONBLOCK` changes nothing for
//! a regular file's reads.

use std::fs::File;
use std::io::{Error, ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a file type is, in words, when it is not a regular file.
pub fn not_regular(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else {
        Some("not a regular file")
    }
}

/// The error for a path that is `what` instead of a regular file.
fn refused(what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file (a recording holds only files; put the file diskpulse wrote back)"),
    )
}

/// Opens `p` for reading if it is a regular file; otherwise an `InvalidInput` error
/// saying what it is. Never blocks on a FIFO.
pub fn open(p: &Path) -> std::io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)?;
    match not_regular(f.metadata()?.file_type()) {
        None => Ok(f),
        Some(what) => Err(refused(what)),
    }
}

/// `Err(what it is)` when `p` exists and is not a regular file (symlinks followed), for
/// readers that check before they open.
pub fn check(p: &Path) -> Result<(), String> {
    match std::fs::metadata(p) {
        Ok(m) => match not_regular(m.file_type()) {
            None => Ok(()),
            Some(what) => Err(format!(
                "{} is {what}, not a regular file; a recording holds only files (put the file diskpulse wrote back, or remove it)",
                p.display()
            )),
        },
        Err(_) => Ok(()),
    }
}

/// A file the user names as an input (a scenario, a fio job file, an NKey seed), as text:
/// a regular file only, at most `max_bytes`. A FIFO or `/dev/zero` named by mistake
/// (or by `NATS_NKEY`) blocked or read forever; the error says what the path is, for the
/// caller to put after its flag and before its fix: "it is a FIFO (named pipe), not a
/// regular file".
pub fn read_input(p: &Path, max_bytes: u64) -> std::io::Result<String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)?;
    if let Some(what) = not_regular(f.metadata()?.file_type()) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("it is {what}, not a regular file"),
        ));
    }
    let mut out = vec![];
    f.take(max_bytes + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max_bytes {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("it is larger than {max_bytes} bytes, too large for what it should hold"),
        ));
    }
    String::from_utf8(out).map_err(|_| Error::new(ErrorKind::InvalidData, "not text (UTF-8)"))
}

/// What `p` is when it exists and is not a regular file (symlinks followed): "a FIFO
/// (named pipe)", "a directory", ...; `None` for a regular file or no file at all.
pub fn what_else(p: &Path) -> Option<&'static str> {
    std::fs::metadata(p)
        .ok()
        .and_then(|m| not_regular(m.file_type()))
}

/// The whole of `p` as bytes, through [`open`].
pub fn read(p: &Path) -> std::io::Result<Vec<u8>> {
    let mut out = vec![];
    open(p)?.read_to_end(&mut out)?;
    Ok(out)
}

/// The whole of `p` as text, through [`open`]; not UTF-8 is an `InvalidData` error.
pub fn read_to_string(p: &Path) -> std::io::Result<String> {
    String::from_utf8(read(p)?).map_err(|_| Error::new(ErrorKind::InvalidData, "not text (UTF-8)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_at_once_and_a_file_reads() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("meta.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(check(&fifo).unwrap_err().contains("FIFO"));
        let e = read(d.path()).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let f = d.path().join("a.csv");
        std::fs::write(&f, "t_ns\n").unwrap();
        assert_eq!(read_to_string(&f).unwrap(), "t_ns\n");
        let e = read_input(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read_input(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        assert_eq!(read_input(&f, 5).unwrap(), "t_ns\n");
        assert!(read_input(&f, 4)
            .unwrap_err()
            .to_string()
            .contains("larger than 4"));
        assert_eq!(what_else(d.path()), Some("a directory"));
        assert_eq!(what_else(&f), None);
    }
}
