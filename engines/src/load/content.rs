//! Content that can be checked: KV keys and values, object names and bodies, derived
//! from their name, so a reader (another run, another process) verifies what it got
//! without having kept anything.
//!
//! - Keys are `k0000001`, `k0000002`, ... (index `i` is key `k{i+1:07}`); objects are
//!   `o0000001`, ... the same way.
//! - A body of `len` bytes for a name with index `i` is a stream of little-endian 64-bit
//!   words `mix(seed + w * GOLDEN)`, where `w` is the word's position and
//!   `seed = mix(i ^ len << 40 ^ salt)`. The length is part of the seed, so a truncated
//!   or padded value never matches. Bodies are position-addressable: any range can be
//!   generated or checked on its own, so objects are checked chunk by chunk as they
//!   arrive, with no copy of the expected object in memory.
//! - The object store's digest is `SHA-256=` + base64url (with padding) of the body, as
//!   the Go and Rust clients write it.

use base64::engine::general_purpose::URL_SAFE;
use base64::Engine;
use sha2::{Digest, Sha256};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const SALT_KV: u64 = 0x6b76; // "kv"
const SALT_OBJ: u64 = 0x6f62; // "ob"

/// splitmix64's finaliser: a fast, well-mixed 64-bit hash.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A fast PRNG (splitmix64) for picking keys: no allocation, 1 ns a draw.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(mix(seed ^ GOLDEN))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift (Lemire), no division.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The seed of a KV value for key index `i` and length `len`.
pub fn kv_seed(i: u64, len: usize) -> u64 {
    mix(i ^ ((len as u64) << 40) ^ (SALT_KV << 56))
}

/// The seed of an object body for object index `i` and length `len`.
pub fn obj_seed(i: u64, len: usize) -> u64 {
    mix(i ^ ((len as u64) << 40) ^ (SALT_OBJ << 56))
}

#[inline]
fn word(seed: u64, w: u64) -> [u8; 8] {
    mix(seed.wrapping_add(w.wrapping_mul(GOLDEN))).to_le_bytes()
}

/// Writes bytes `off .. off + buf.len()` of the body with `seed` into `buf`.
pub fn fill(seed: u64, off: u64, buf: &mut [u8]) {
    let mut p = 0usize;
    while p < buf.len() {
        let pos = off + p as u64;
        let w = word(seed, pos / 8);
        let in_word = (pos % 8) as usize;
        let n = (8 - in_word).min(buf.len() - p);
        buf[p..p + n].copy_from_slice(&w[in_word..in_word + n]);
        p += n;
    }
}

/// Whether `data` equals bytes `off .. off + data.len()` of the body with `seed`.
pub fn matches(seed: u64, off: u64, data: &[u8]) -> bool {
    let mut p = 0usize;
    while p < data.len() {
        let pos = off + p as u64;
        let w = word(seed, pos / 8);
        let in_word = (pos % 8) as usize;
        let n = (8 - in_word).min(data.len() - p);
        if data[p..p + n] != w[in_word..in_word + n] {
            return false;
        }
        p += n;
    }
    true
}

/// A whole body (for writers).
pub fn body(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(seed, 0, &mut v);
    v
}

/// `k0000001` for index 0.
pub fn key_name(i: u64) -> String {
    format!("k{:07}", i + 1)
}

/// `o0000001` for index 0.
pub fn object_name(i: u64) -> String {
    format!("o{:07}", i + 1)
}

/// The index of a name diskpulse wrote (`k0000001` -> 0 with prefix `k`), if it is one.
pub(crate) fn name_index(name: &str, prefix: char) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?;
    if digits.len() < 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_sub(1)
}

/// The object store's digest text of a finished hash: `SHA-256=<base64url>`.
pub(crate) fn digest_text(h: Sha256) -> String {
    format!("SHA-256={}", URL_SAFE.encode(h.finalize()))
}

/// The object store's digest text of `data`.
pub fn digest_of(data: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(data);
    digest_text(h)
}

/// Carves subjects `<prefix><name>` out of a shared buffer: one allocation per 64 KiB of
/// subjects, not one per operation (an `async_nats::Subject` is a `Bytes`).
pub(crate) struct SubjectArena {
    arena: bytes::BytesMut,
    prefix: String,
}

impl SubjectArena {
    pub fn new(prefix: impl Into<String>) -> SubjectArena {
        SubjectArena {
            arena: bytes::BytesMut::new(),
            prefix: prefix.into(),
        }
    }

    /// `<prefix>k0000042` for key index 41 (`letter` 'k'), without formatting machinery.
    pub fn subject(&mut self, letter: u8, i: u64) -> async_nats::Subject {
        let mut digits = itoa::Buffer::new();
        let d = digits.format(i + 1).as_bytes();
        let pad = 7usize.saturating_sub(d.len());
        let n = self.prefix.len() + 1 + pad + d.len();
        if self.arena.capacity() < n {
            self.arena = bytes::BytesMut::with_capacity((64 << 10).max(n));
        }
        self.arena.extend_from_slice(self.prefix.as_bytes());
        self.arena.extend_from_slice(&[letter]);
        for _ in 0..pad {
            self.arena.extend_from_slice(b"0");
        }
        self.arena.extend_from_slice(d);
        let b = self.arena.split_to(n).freeze();
        async_nats::Subject::try_from(b).expect("ASCII subject")
    }
}

/// Values carved out of a shared buffer, like [`SubjectArena`].
pub(crate) struct ValueArena {
    arena: bytes::BytesMut,
}

impl Default for ValueArena {
    fn default() -> Self {
        ValueArena::new()
    }
}

impl ValueArena {
    pub fn new() -> ValueArena {
        ValueArena {
            arena: bytes::BytesMut::new(),
        }
    }

    /// The body with `seed` and length `len`.
    pub fn value(&mut self, seed: u64, len: usize) -> bytes::Bytes {
        if self.arena.capacity() < len {
            self.arena = bytes::BytesMut::with_capacity((1 << 20).max(len));
        }
        self.arena.resize(len, 0);
        fill(seed, 0, &mut self.arena[..len]);
        self.arena.split_to(len).freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_position_addressable_and_length_bound() {
        let s = kv_seed(41, 100);
        let whole = body(s, 100);
        for (off, len) in [(0, 100), (3, 17), (8, 8), (63, 37), (99, 1)] {
            let mut part = vec![0u8; len];
            fill(s, off as u64, &mut part);
            assert_eq!(part, whole[off..off + len]);
            assert!(matches(s, off as u64, &whole[off..off + len]));
        }
        let mut bad = whole.clone();
        bad[57] ^= 1;
        assert!(!matches(s, 0, &bad));
        // Another length or key gives another body.
        assert_ne!(body(kv_seed(41, 99), 99), whole[..99]);
        assert_ne!(body(kv_seed(42, 100), 100), whole);
        assert_ne!(body(obj_seed(41, 100), 100), whole);
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(key_name(0), "k0000001");
        assert_eq!(object_name(41), "o0000042");
        assert_eq!(key_name(12_345_678), "k12345679");
        assert_eq!(name_index("k0000001", 'k'), Some(0));
        assert_eq!(name_index("o12345679", 'o'), Some(12_345_678));
        assert_eq!(name_index("k0000000", 'k'), None);
        assert_eq!(name_index("k12", 'k'), None);
        assert_eq!(name_index("x0000001", 'k'), None);
        let mut a = SubjectArena::new("$KV.b.");
        assert_eq!(a.subject(b'k', 41).as_str(), "$KV.b.k0000042");
        assert_eq!(a.subject(b'k', 12_345_678).as_str(), "$KV.b.k12345679");
        let mut v = ValueArena::new();
        assert_eq!(
            &v.value(kv_seed(1, 33), 33)[..],
            &body(kv_seed(1, 33), 33)[..]
        );
        assert_eq!(v.value(kv_seed(2, 0), 0).len(), 0);
    }

    #[test]
    fn digests_look_like_the_object_store_s() {
        // echo -n abc | sha256sum, base64url with padding.
        assert_eq!(
            digest_of(b"abc"),
            "SHA-256=ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0="
        );
    }

    #[test]
    fn rng_below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(7);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[r.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
    }
}
