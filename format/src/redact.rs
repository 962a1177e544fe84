//! Secrets out of everything diskpulse prints, logs or stores (issue 10 point 2).
//!
//! A secret reaches us three ways: as the user info of a server URL
//! (`nats://user:password@host:4222`, `nats://token@host`), as the value of a secret
//! flag (`--password`, `--token`, `--nkey`, `--creds`, `--tls-key`, as `--flag VALUE` or
//! `--flag=VALUE`), or inside a file those flags name (never read except to connect).
//! [`argv`] is the one redaction: every place that prints, logs or stores an argument
//! vector (meta.json `argv`, events, a scenario's study.json and error messages) runs it
//! through [`argv`], every single URL or message through [`text`] (what [`argv`] applies
//! to each argument), and a verbatim copy of a file that may carry those arguments (a
//! scenario's `scenario.toml`) through [`scrub`] with the values [`secrets`] found.
//!
//! What must stay true: the redacted form keeps everything but the secret (scheme, host,
//! port, flag names), so a reader still sees which server and which kind of auth; the
//! secret is replaced by [`HIDDEN`], never shortened or hashed.

/// What a secret is replaced with.
pub const HIDDEN: &str = "***";

/// Flags whose value is a secret (or names a file holding one).
const SECRET_FLAGS: [&str; 5] = ["--password", "--token", "--creds", "--nkey", "--tls-key"];

/// Hides the user info of every `scheme://userinfo@host` in `s`:
/// `nats://a:b@h:4222` -> `nats://***@h:4222`. The user info ends at the first `@` before
/// the host part ends (`/`, `,`, a space or a quote), so a list of URLs or a URL inside a
/// message is redacted too.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == ',' || c == '"' || c == '\'' || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => {
                out.push_str(HIDDEN);
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// The values of [`SECRET_FLAGS`] in an argument vector (URL user info is found by
/// [`text`] wherever it is).
pub fn secrets(args: &[String]) -> Vec<String> {
    let mut found = vec![];
    let mut next_is_secret = false;
    for a in args {
        if next_is_secret {
            found.push(a.clone());
            next_is_secret = false;
            continue;
        }
        match a.split_once('=') {
            Some((k, v)) if SECRET_FLAGS.contains(&k) => found.push(v.to_string()),
            _ => next_is_secret = SECRET_FLAGS.contains(&a.as_str()),
        }
    }
    found.retain(|s| !s.is_empty() && s != HIDDEN);
    found
}

/// Replaces secrets in an argument vector with [`HIDDEN`]: secret flags' values and URL
/// user info.
pub fn argv(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if hide_next {
            out.push(HIDDEN.to_string());
            hide_next = false;
            continue;
        }
        if let Some((k, _)) = a.split_once('=') {
            if SECRET_FLAGS.contains(&k) {
                out.push(format!("{k}={HIDDEN}"));
                continue;
            }
        }
        hide_next = SECRET_FLAGS.contains(&a.as_str());
        out.push(text(a));
    }
    out
}

/// Whether the redaction ([`argv`]) hides an occurrence of `needle` in `args`, whole or
/// in part: a scenario's `${pw}` in `--password ${pw}` or `nats://u:${pw}@host` is then
/// a secret, and so is every value it stands for (issue 25 point 2). Counted, so a
/// needle also shown elsewhere in the clear is still found.
pub fn hides(args: &[String], needle: &str) -> bool {
    let count = |v: &[String]| v.iter().map(|a| a.matches(needle).count()).sum::<usize>();
    count(&argv(args)) < count(args)
}

/// A verbatim copy of a file that held `secrets` as whole quoted strings (a scenario's
/// TOML: `args = ["--password", "pw"]` or `"--password=pw"`), with those strings'
/// secrets replaced by [`HIDDEN`] and URL user info hidden. Only quoted whole values
/// are replaced, so a short secret does not blank out the rest of the file.
pub fn scrub(file_text: &str, secrets: &[String]) -> String {
    let mut s = file_text.to_string();
    for x in secrets {
        for q in ['"', '\''] {
            s = s.replace(&format!("{q}{x}{q}"), &format!("{q}{HIDDEN}{q}"));
            s = s.replace(&format!("={x}{q}"), &format!("={HIDDEN}{q}"));
        }
        // A number (a matrix's `pw = [98765431]`): whole, between list or key marks.
        if !x.is_empty()
            && x.bytes()
                .all(|b| b.is_ascii_digit() || b"+-._".contains(&b))
        {
            s = scrub_number(&s, x);
        }
    }
    text(&s)
}

/// `n` replaced by [`HIDDEN`] where it stands whole as a TOML value: after `[`, `,`, `=`
/// or a space and before `]`, `,`, a space or the line's end.
fn scrub_number(s: &str, n: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(n) {
        let before = out
            .chars()
            .last()
            .into_iter()
            .chain(rest[..i].chars().last())
            .last();
        let after = rest[i + n.len()..].chars().next();
        let open = before.is_none_or(|c| matches!(c, '[' | ',' | '=' | ' ' | '\t'));
        let close = after.is_none_or(|c| matches!(c, ']' | ',' | ' ' | '\t' | '\n' | '\r'));
        out.push_str(&rest[..i]);
        out.push_str(if open && close { HIDDEN } else { n });
        rest = &rest[i + n.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn urls_lose_their_user_info_and_keep_the_rest() {
        assert_eq!(text("nats://a:b@h:4222"), "nats://***@h:4222");
        assert_eq!(text("nats://tok@h"), "nats://***@h");
        assert_eq!(text("nats://h:4222"), "nats://h:4222");
        assert_eq!(text("h:4222"), "h:4222");
        // An @ in the password, a list, a URL inside a message.
        assert_eq!(text("nats://u:p@ss@h:1"), "nats://***@h:1");
        assert_eq!(
            text("nats://a:b@h1:1,tls://c@h2:2"),
            "nats://***@h1:1,tls://***@h2:2"
        );
        assert_eq!(
            text("cannot connect to nats://u:x@h:1: refused"),
            "cannot connect to nats://***@h:1: refused"
        );
        // An @ after the host is not user info.
        assert_eq!(text("http://h:8222/x@y"), "http://h:8222/x@y");
    }

    #[test]
    fn argv_hides_secret_flags_in_both_spellings_and_urls() {
        let a = v(&[
            "load",
            "pub",
            "--password",
            "pw1",
            "--token=tk1",
            "--user",
            "bob",
            "--server",
            "nats://u:pw2@h:4222",
            "--creds",
            "/x.creds",
            "--nkey=/s.nk",
        ]);
        let r = argv(&a).join(" ");
        for s in ["pw1", "tk1", "pw2", "/x.creds", "/s.nk"] {
            assert!(!r.contains(s), "{s} in {r}");
        }
        assert!(
            r.contains("--user bob") && r.contains("nats://***@h:4222"),
            "{r}"
        );
        assert!(
            r.contains("--token=***") && r.contains("--password ***"),
            "{r}"
        );
    }

    #[test]
    fn a_placeholder_in_a_secret_place_is_hidden_and_one_in_the_clear_is_not() {
        assert!(hides(&v(&["--server", "nats://u:${pw}@h"]), "${pw}"));
        assert!(hides(&v(&["--password", "${pw}"]), "${pw}"));
        assert!(hides(&v(&["--token=x${pw}"]), "${pw}"));
        assert!(hides(
            &v(&["--subject", "${pw}", "--password", "${pw}"]),
            "${pw}"
        ));
        assert!(!hides(
            &v(&["--subject", "${pw}", "--server", "nats://h"]),
            "${pw}"
        ));
        assert!(!hides(&v(&["--user", "${u}"]), "${u}"));
    }

    #[test]
    fn secrets_are_found_and_scrubbed_from_a_copy() {
        let a = v(&[
            "--password",
            "p",
            "--token=tk",
            "--server",
            "nats://alice:pw2@h:1",
        ]);
        let s = secrets(&a);
        assert_eq!(s, v(&["p", "tk"]));
        let toml = "name = \"pump\"\nargs = [\"--password\", \"p\", \"--token=tk\", \"--server\", \"nats://alice:pw2@h:1\"]";
        let out = scrub(toml, &s);
        assert!(!out.contains("tk") && !out.contains("pw2"), "{out}");
        assert!(out.contains("\"--password\", \"***\""), "{out}");
        // A one-letter secret does not blank out the other p's.
        assert!(out.contains("name = \"pump\""), "{out}");
        // A number is hidden whole, not inside other numbers.
        let out = scrub(
            "pw = [98765431, 1]\nsize = \"198765431\"\n",
            &v(&["98765431"]),
        );
        assert_eq!(out, "pw = [***, 1]\nsize = \"198765431\"\n");
    }
}
