//! The binary side of tracefs: an event's layout from `events/SYS/NAME/format`, and the
//! pages `per_cpu/cpuN/trace_pipe_raw` hands out (the kernel's ring-buffer sub-buffers,
//! described by `events/header_page` and `events/header_event`).
//!
//! A page: `u64 timestamp` (the trace clock at the page's first event, ns), `u64 commit`
//! (bytes of event data; bit 31 set = events were lost before this page, bit 30 set = their
//! count follows the data as a u64), then the events. An event: a u32 header
//! (`type_len` 5 bits, `time_delta` 27 bits: ns since the previous event), then by
//! `type_len`: 1..=28 data of `type_len * 4` bytes; 0 a u32 length (covering itself) and
//! the data; 29 padding (a discarded event, or the end of the page when its delta is 0);
//! 30 a time extension (`delta = array[0] << 27 | time_delta`); 31 an absolute timestamp.
//! libtraceevent's `kbuffer-parse.c` reads it the same way. Timestamps are exact ns.

use std::collections::HashMap;

/// One field of an event's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
    /// `__data_loc`: the field holds a u32 (offset | length << 16) pointing at the data.
    data_loc: bool,
}

/// An event's id and fields, from its `format` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EventFormat {
    pub id: u16,
    pub fields: HashMap<String, Field>,
}

impl EventFormat {
    /// Parses a `format` file (`ID: 1021` and `field:unsigned int fd;\toffset:16;\tsize:8;...`).
    pub fn parse(text: &str) -> Option<EventFormat> {
        let mut f = EventFormat::default();
        let mut have_id = false;
        for line in text.lines() {
            let line = line.trim();
            if let Some(id) = line.strip_prefix("ID:") {
                f.id = id.trim().parse().ok()?;
                have_id = true;
            } else if let Some(rest) = line.strip_prefix("field:") {
                let mut parts = rest.split(';');
                let decl = parts.next()?.trim();
                // The name is the last word, without an array suffix (`char rwbs[10]`).
                let name = decl.rsplit(' ').next()?;
                let name = name.split('[').next()?.to_string();
                let mut offset = None;
                let mut size = None;
                for p in parts {
                    let p = p.trim();
                    if let Some(v) = p.strip_prefix("offset:") {
                        offset = v.parse().ok();
                    } else if let Some(v) = p.strip_prefix("size:") {
                        size = v.parse().ok();
                    }
                }
                f.fields.insert(
                    name,
                    Field {
                        offset: offset?,
                        size: size?,
                        data_loc: decl.starts_with("__data_loc"),
                    },
                );
            }
        }
        have_id.then_some(f)
    }

    /// A field by name, or why not (a kernel whose tracepoint lacks it).
    pub fn field(&self, name: &str) -> Result<Field, String> {
        self.fields
            .get(name)
            .copied()
            .ok_or_else(|| format!("event {} has no field '{name}'", self.id))
    }
}

/// Reads an unsigned little-endian field of up to 8 bytes (0 when the data is short).
pub(crate) fn read_u(data: &[u8], f: Field) -> u64 {
    let Some(b) = data.get(f.offset..f.offset + f.size) else {
        return 0;
    };
    let mut v = [0u8; 8];
    let n = f.size.min(8);
    v[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(v)
}

/// Reads a signed field (sign-extended from its size).
pub(crate) fn read_i(data: &[u8], f: Field) -> i64 {
    let u = read_u(data, f);
    match f.size {
        1 => u as u8 as i8 as i64,
        2 => u as u16 as i16 as i64,
        4 => u as u32 as i32 as i64,
        _ => u as i64,
    }
}

/// Reads a string field up to its NUL: a fixed char array (`char comm[16]`) or a
/// `__data_loc char[]`.
pub(crate) fn read_str(data: &[u8], f: Field) -> &str {
    let (start, len) = if f.data_loc {
        let v = read_u(data, f);
        ((v & 0xffff) as usize, ((v >> 16) & 0xffff) as usize)
    } else {
        (f.offset, f.size)
    };
    let Some(b) = data.get(start..start + len) else {
        return "";
    };
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).unwrap_or("")
}

/// The common header every event starts with: `common_type` (u16 at 0) and
/// `common_pid` (i32 at 4: the thread id).
pub(crate) fn common_type(data: &[u8]) -> u16 {
    data.get(0..2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .unwrap_or(0)
}

pub(crate) fn common_pid(data: &[u8]) -> u32 {
    data.get(4..8)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0)
}

const RB_MISSED_EVENTS: u64 = 1 << 31;
const RB_MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 30) - 1;
const PAGE_HEADER: usize = 16;

/// What a page said besides its events.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageInfo {
    /// Events lost before this page: `None` when none were; `Some(n)` when the kernel
    /// counted them, `Some(u64::MAX)` when it only flagged the loss.
    pub missed: Option<u64>,
}

/// Calls `f(timestamp_ns, payload)` for every data event of one page.
pub(crate) fn parse_page(page: &[u8], mut f: impl FnMut(u64, &[u8])) -> PageInfo {
    let mut info = PageInfo::default();
    if page.len() < PAGE_HEADER {
        return info;
    }
    let u64_at = |i: usize| u64::from_le_bytes(page[i..i + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |i: usize| -> u32 {
        page.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0)
    };
    let mut ts = u64_at(0);
    let commit = u64_at(8);
    let len = ((commit & COMMIT_MASK) as usize).min(page.len() - PAGE_HEADER);
    if commit & RB_MISSED_EVENTS != 0 {
        info.missed = Some(u64::MAX);
        if commit & RB_MISSED_STORED != 0 && PAGE_HEADER + len + 8 <= page.len() {
            info.missed = Some(u64_at(PAGE_HEADER + len));
        }
    }
    let end = PAGE_HEADER + len;
    let mut i = PAGE_HEADER;
    while i + 4 <= end {
        let h = u32_at(i);
        let type_len = h & 0x1f;
        let delta = (h >> 5) as u64;
        match type_len {
            29 => {
                // Padding: a discarded event (skip its length) or the end of the page.
                if delta == 0 {
                    break;
                }
                ts += delta;
                let l = u32_at(i + 4) as usize;
                i += 4 + l.max(4);
            }
            30 => {
                ts += ((u32_at(i + 4) as u64) << 27) | delta;
                i += 8;
            }
            31 => {
                let abs = ((u32_at(i + 4) as u64) << 27) | delta;
                // The kernel stores 59 bits; the top bits are those of the page's time.
                ts = abs | (ts & (0x1f << 59));
                i += 8;
            }
            0 => {
                ts += delta;
                let l = u32_at(i + 4) as usize;
                if l < 4 || i + 4 + l > end {
                    break;
                }
                f(ts, &page[i + 8..i + 4 + l]);
                i += 4 + ((l + 3) & !3);
            }
            n => {
                ts += delta;
                let l = n as usize * 4;
                if i + 4 + l > end {
                    break;
                }
                f(ts, &page[i + 4..i + 4 + l]);
                i += 4 + l;
            }
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    const FSYNC_FORMAT: &str = "name: sys_enter_fsync\nID: 1021\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n";

    #[test]
    fn a_format_file_gives_the_id_and_field_offsets() {
        let f = EventFormat::parse(FSYNC_FORMAT).unwrap();
        assert_eq!(f.id, 1021);
        assert_eq!(
            f.field("fd").unwrap(),
            Field {
                offset: 16,
                size: 8,
                data_loc: false,
            }
        );
        assert_eq!(
            f.field("rwbs").unwrap(),
            Field {
                offset: 34,
                size: 10,
                data_loc: false,
            }
        );
        assert!(f.field("ret").is_err());
        assert!(EventFormat::parse("name: x\n").is_none());
    }

    fn header(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    #[test]
    fn a_page_gives_each_event_its_ns_timestamp_and_counts_missed_events() {
        let mut data = vec![];
        // Event 1: 8 bytes of payload, 100 ns after the page's time.
        data.extend(header(2, 100));
        data.extend([1u8, 0, 0, 0, 7, 0, 0, 0]);
        // A time extension of (1 << 27) + 5 ns.
        data.extend(header(30, 5));
        data.extend(1u32.to_le_bytes());
        // Event 2: a long event (type_len 0), 12 bytes of payload, 3 ns later.
        data.extend(header(0, 3));
        data.extend(16u32.to_le_bytes());
        data.extend([2u8, 0, 0, 0, 8, 0, 0, 0, 9, 9, 9, 9]);
        // A discarded event of 8 bytes, 10 ns later, then event 3 1 ns later.
        data.extend(header(29, 10));
        data.extend(8u32.to_le_bytes());
        data.extend([0u8; 4]);
        data.extend(header(1, 1));
        data.extend([3u8, 0, 0, 0]);
        let mut page = vec![];
        page.extend(1_000_000u64.to_le_bytes());
        page.extend((data.len() as u64 | RB_MISSED_EVENTS | RB_MISSED_STORED).to_le_bytes());
        page.extend(&data);
        page.extend(42u64.to_le_bytes());
        page.resize(4096, 0);
        let mut seen = vec![];
        let info = parse_page(&page, |ts, p| seen.push((ts, common_type(p), p.len())));
        let ext = (1u64 << 27) | 5;
        assert_eq!(
            seen,
            vec![
                (1_000_100, 1, 8),
                (1_000_100 + ext + 3, 2, 12),
                (1_000_100 + ext + 3 + 10 + 1, 3, 4)
            ]
        );
        assert_eq!(info.missed, Some(42));
        assert_eq!(common_pid(&[1, 0, 0, 0, 7, 0, 0, 0]), 7);
    }

    #[test]
    fn signed_fields_are_sign_extended() {
        let d = (-5i64).to_le_bytes();
        assert_eq!(
            read_i(
                &d,
                Field {
                    offset: 0,
                    size: 8,
                    data_loc: false
                }
            ),
            -5
        );
        let d = (-5i32).to_le_bytes();
        assert_eq!(
            read_i(
                &d,
                Field {
                    offset: 0,
                    size: 4,
                    data_loc: false
                }
            ),
            -5
        );
        assert_eq!(
            read_u(
                &d,
                Field {
                    offset: 2,
                    size: 8,
                    data_loc: false
                }
            ),
            0
        );
        let fixed = Field {
            offset: 0,
            size: 10,
            data_loc: false,
        };
        assert_eq!(read_str(b"kworker\0zz", fixed), "kworker");
        // A __data_loc: 4 bytes at 0 pointing at offset 8, length 3.
        let d = [8u8, 0, 3, 0, 0, 0, 0, 0, b'd', b'd', 0];
        let dl = Field {
            offset: 0,
            size: 4,
            data_loc: true,
        };
        assert_eq!(read_str(&d, dl), "dd");
    }
}
