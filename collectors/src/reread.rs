//! One way to re-read a `/proc` or `/sys` file that is held open: `pread` from offset 0
//! (which makes the kernel regenerate the text) into a buffer the caller keeps.
//!
//! The buffer grows (doubling) only when the file no longer fits, so once it has grown
//! to the file's size a read allocates nothing: this is what the 1 ms diskstats path and
//! the per-sample `/proc/PID/io` and meminfo reads rely on.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Reads all of `file` from offset 0 into `buf` and returns the number of bytes read
/// (the file's bytes are `buf[..n]`). `buf` must not be empty; it is grown only when
/// the file fills it.
pub(crate) fn pread_whole(file: &File, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    debug_assert!(!buf.is_empty(), "a zero-length buffer would never read");
    let mut off = 0;
    loop {
        if off == buf.len() {
            let n = buf.len() * 2;
            buf.resize(n, 0);
        }
        let n = file.read_at(&mut buf[off..], off as u64)?;
        if n == 0 {
            break;
        }
        off += n;
    }
    Ok(off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_longer_than_the_buffer_grows_it_and_reads_every_byte() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let text: Vec<u8> = (0..100u8).collect();
        std::fs::write(&p, &text).unwrap();
        let f = File::open(&p).unwrap();
        let mut buf = vec![0u8; 8];
        let n = pread_whole(&f, &mut buf).unwrap();
        assert_eq!(&buf[..n], &text[..]);
        assert_eq!(buf.len(), 128);
        // A second read reuses the grown buffer as it is.
        let n = pread_whole(&f, &mut buf).unwrap();
        assert_eq!((n, buf.len()), (100, 128));
    }
}
