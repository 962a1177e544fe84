//! What a sent message carries besides `--size`: natscli v0.2's `--payload FILE` (the
//! body is the file's bytes) and `-H KEY:VALUE` headers (core publishes go as `HPUB`).
//!
//! What must stay true:
//! - A `--payload` body is the file's bytes exactly: nothing is stamped into it (so a
//!   receiver here measures no end-to-end latency for it), and `--size` becomes its
//!   length, so the byte counts are the bytes sent. natscli counts `--size` bytes per
//!   message whatever the file holds; here the counts are what went on the wire.
//! - Headers are natscli's `KEY:VALUE` (split at the first `:`, both sides trimmed, as
//!   `internal/util/headers.go`); a key given twice has both values, in order (nats.go's
//!   `Header.Add`). natscli's `{{...}}` templates are not expanded: the value is sent as
//!   written.
//! - The `HPUB` header block is `NATS/1.0\r\n`, one `KEY: VALUE\r\n` line per header, and
//!   an empty line: what nats.go and async-nats write.
//! - `--multisubject` ([`Subjects`]): message n of the run goes to `SUBJECT.<n % max>`, as
//!   natscli numbers them (a client's first is the sum of the shares before it).
//!
//! The checks of the flags natscli's bench brought with it (`--payload`, `-H`,
//! `--time-publish`, `--atomic-batch`, `--multisubject`, `--double-ack`, `--get-batch`,
//! `--history`) are here too ([`LoadArgs::check_message_flags`]), beside the rest of
//! [`LoadArgs::validate`].

use async_nats::HeaderMap;
use bytes::Bytes;
use format::usage;

use super::args::LoadArgs;
use super::modes::Mode;

/// The modes whose main role sends messages that can carry a body and headers.
fn sends_messages(m: Mode) -> bool {
    matches!(m, Mode::Pub | Mode::Request | Mode::Cast | Mode::JsPub)
}

/// `KEY:VALUE` as natscli reads it: (key, value), or a usage error naming it.
fn parse_header(h: &str) -> anyhow::Result<(String, String)> {
    let bad = || {
        usage!("-H '{h}': a header is KEY:VALUE (natscli's form), like -H Trace-Id:42; the key has no spaces or ':'")
    };
    let (k, v) = h.split_once(':').ok_or_else(bad)?;
    let (k, v) = (k.trim(), v.trim());
    if k.is_empty() || k.contains(char::is_whitespace) || v.contains(['\r', '\n']) {
        return Err(bad());
    }
    Ok((k.to_string(), v.to_string()))
}

/// Checks `-H`'s `KEY:VALUE`s (a usage error naming the first bad one).
pub fn check_headers(hs: &[String]) -> anyhow::Result<()> {
    hs.iter().try_for_each(|h| parse_header(h).map(|_| ()))
}

/// The headers as async-nats sends them (None without any).
pub(crate) fn header_map(hs: &[String]) -> Option<HeaderMap> {
    if hs.is_empty() {
        return None;
    }
    let mut m = HeaderMap::new();
    for h in hs {
        if let Ok((k, v)) = parse_header(h) {
            m.append(k.as_str(), v.as_str());
        }
    }
    Some(m)
}

/// The `HPUB` header block of `hs` (empty without headers).
pub(crate) fn hpub_block(hs: &[String]) -> Vec<u8> {
    if hs.is_empty() {
        return vec![];
    }
    let mut b = b"NATS/1.0\r\n".to_vec();
    for h in hs {
        if let Ok((k, v)) = parse_header(h) {
            b.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
    }
    b.extend_from_slice(b"\r\n");
    b
}

impl LoadArgs {
    /// Reads `--payload` once, before the run: the body every message carries, and
    /// `--size` set to its length. A file that cannot be read is a usage error naming it.
    pub fn load_payload(&mut self) -> anyhow::Result<()> {
        let Some(p) = &self.payload else {
            return Ok(());
        };
        let body = std::fs::read(p).map_err(|e| {
            usage!(
                "--payload {}: {e}; name a file that can be read (its bytes are each message's body)",
                p.display()
            )
        })?;
        self.size = body.len() as u64;
        self.payload_body = Some(Bytes::from(body));
        Ok(())
    }

    /// `--payload`, `-H`, `--time-publish`, `--atomic-batch`, `--history`: the modes
    /// they go with and their bounds.
    pub(crate) fn check_message_flags(&self) -> anyhow::Result<()> {
        let m = self.mode.cli_name();
        if !sends_messages(self.mode) {
            if self.payload.is_some() {
                return Err(usage!(
                    "--payload is the body of the messages pub, request, cast and js-pub send; {m} sends none"
                ));
            }
            if !self.headers.is_empty() {
                return Err(usage!(
                    "-H adds headers to the messages pub, request, cast and js-pub send; {m} sends none"
                ));
            }
        }
        for h in &self.headers {
            parse_header(h)?;
        }
        if self.payload.is_some() && self.payload_body.is_none() {
            // Read by the command before the checks (load_payload); read here to check.
            let p = self.payload.as_deref().unwrap_or(std::path::Path::new(""));
            std::fs::metadata(p).map_err(|e| {
                usage!(
                    "--payload {}: {e}; name a file that can be read",
                    p.display()
                )
            })?;
        }
        if self.time_publish && self.mode != Mode::Pub {
            return Err(usage!(
                "--time-publish times core publish calls; {m} times its operations already"
            ));
        }
        if let Some(n) = self.atomic_batch {
            if self.mode != Mode::JsPub {
                return Err(usage!(
                    "--atomic-batch is a js-pub mode; {m} publishes no batches"
                ));
            }
            if !(1..=MAX_ATOMIC_BATCH).contains(&n) {
                return Err(usage!(
                    "--atomic-batch {n}: 1 to {MAX_ATOMIC_BATCH} messages (nats-server's limit on one atomic batch)"
                ));
            }
            if self.sync || self.msg_id || self.window.is_some_and(|w| w > 1) {
                return Err(usage!(
                    "--atomic-batch commits each batch and waits for its ack: it goes without --sync, --msg-id and --window"
                ));
            }
        }
        if self.multisubject && !matches!(self.mode, Mode::Pub | Mode::Sub | Mode::JsPub) {
            return Err(usage!(
                "--multisubject spreads pub, sub and js-pub over SUBJECT.N subjects; {m} has one subject"
            ));
        }
        if self.multisubject_random && !self.multisubject {
            return Err(usage!(
                "--multisubject-random draws --multisubject's subjects; add --multisubject"
            ));
        }
        if self.multisubject && self.msg_id {
            return Err(usage!(
                "--multisubject with --msg-id is not run here (the retry of lost publishes sends to one subject); leave one out"
            ));
        }
        if self.double_ack
            && (!matches!(self.mode, Mode::JsConsume | Mode::JsPub)
                || self.ordered
                || self.ack == super::modes::AckMode::None)
        {
            return Err(usage!(
                "--double-ack waits for each ack of a shared durable consumer (js-consume, or js-pub --consume M, without --ordered and --ack none)"
            ));
        }
        if let Some(n) = self.get_batch {
            if self.mode != Mode::JsGet || n == 0 {
                return Err(usage!(
                    "--get-batch N (1 or more) is js-get's batched direct gets; {m} gets nothing"
                ));
            }
        }
        if let Some(h) = self.history {
            if self.mode != Mode::KvPut {
                return Err(usage!(
                    "--history is the depth of a bucket kv-put creates; {m} creates none"
                ));
            }
            if !(1..=64).contains(&h) {
                return Err(usage!(
                    "--history {h}: a KV bucket keeps 1 to 64 values per key"
                ));
            }
        }
        Ok(())
    }
}

/// `--multisubject`: message `n` of a run (a client's first is the sum of the shares
/// before it, as natscli's `offset`) goes to `SUBJECT.N`, with `N = n % --multisubject-max`
/// (0: no max), zero-padded to the max's digits with `--multisubject-pad` (natscli v0.2's
/// `%0<digits>d`; v0.1 writes the bare number). Receivers listen on `SUBJECT.*`.
pub(crate) struct Subjects {
    base: String,
    max: u64,
    width: usize,
    next: u64,
    /// `--multisubject-random`: N drawn uniformly below the max instead (natscli v0.2's
    /// `--multisubjectrandomize`).
    rng: Option<super::content::Rng>,
}

impl Subjects {
    /// The subjects of the main role's client whose first message is number `first`.
    pub(crate) fn new(a: &LoadArgs, first: u64) -> Option<Subjects> {
        a.multisubject.then(|| Subjects {
            base: a.subject.clone(),
            max: a.multisubject_max,
            width: if a.multisubject_pad {
                a.multisubject_max.to_string().len()
            } else {
                0
            },
            next: first,
            rng: (a.multisubject_random && a.multisubject_max > 0)
                .then(|| super::content::Rng::new(first ^ super::record::realtime_ns())),
        })
    }

    /// Appends the next message's subject to `out` (no allocation).
    #[inline]
    pub(crate) fn write_next(&mut self, out: &mut Vec<u8>) {
        use std::io::Write;
        let n = match &mut self.rng {
            Some(r) => r.below(self.max),
            None if self.max == 0 => self.next,
            None => self.next % self.max,
        };
        self.next += 1;
        let _ = write!(out, "{}.{n:0w$}", self.base, w = self.width);
    }

    /// The next message's subject.
    pub(crate) fn next_subject(&mut self) -> async_nats::Subject {
        let mut v = Vec::with_capacity(self.base.len() + 12);
        self.write_next(&mut v);
        async_nats::Subject::from(String::from_utf8_lossy(&v).into_owned())
    }
}

impl LoadArgs {
    /// What receivers and the stream listen on: `SUBJECT.*` with `--multisubject`.
    pub fn listen_subject(&self) -> String {
        if self.multisubject {
            format!("{}.*", self.subject)
        } else {
            self.subject.clone()
        }
    }
}

/// nats-server's largest atomic batch (its `max_batch_size`, 1000 messages).
pub const MAX_ATOMIC_BATCH: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_natscli_s_key_value_pairs_and_go_as_an_hpub_block() {
        assert_eq!(
            parse_header(" Trace-Id : 42 ").unwrap(),
            ("Trace-Id".into(), "42".into())
        );
        assert_eq!(parse_header("a:b:c").unwrap(), ("a".into(), "b:c".into()));
        assert!(parse_header("novalue").is_err());
        assert!(parse_header(":v").is_err());
        let hs = vec!["A:1".to_string(), "B: two".to_string()];
        assert_eq!(
            hpub_block(&hs),
            b"NATS/1.0\r\nA: 1\r\nB: two\r\n\r\n".to_vec()
        );
        assert!(hpub_block(&[]).is_empty());
        let mut a = crate::load::args_from(["pub", "--subject", "s", "--multisubject"]).unwrap();
        a.multisubject_max = 100;
        let mut s = Subjects::new(&a, 99).unwrap();
        assert_eq!(s.next_subject().as_str(), "s.99");
        assert_eq!(s.next_subject().as_str(), "s.0");
        a.multisubject_pad = true;
        let mut s = Subjects::new(&a, 7).unwrap();
        assert_eq!(s.next_subject().as_str(), "s.007");
        assert_eq!(a.listen_subject(), "s.*");
        let m = header_map(&hs).unwrap();
        assert_eq!(m.get("B").map(|v| v.as_str()), Some("two"));
    }
}
