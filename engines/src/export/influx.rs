//! Influx line protocol: `measurement,tag=v field=1.5,count=3i <ns>`, one line per
//! group and time, timestamps in ns since the epoch. Escaping as the protocol wants:
//! commas and spaces in measurements; commas, `=` and spaces in tag keys, tag values
//! and field keys (with a backslash).

use std::io::Write;

use super::Group;

fn escape(s: &str, measurement: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            ',' | ' ' => {
                o.push('\\');
                o.push(c)
            }
            '=' if !measurement => o.push_str("\\="),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// Writes `groups`, each line tagged `host` too; returns the lines written.
pub fn write(
    out: &mut impl Write,
    groups: &[Group],
    zero_unix_ns: u64,
    host: &str,
) -> std::io::Result<u64> {
    let mut lines = 0u64;
    for g in groups {
        let mut head = escape(&g.measurement, true);
        let mut tags: Vec<(String, String)> = g.labels.clone();
        if !host.is_empty() {
            tags.push(("host".into(), host.into()));
        }
        tags.sort();
        for (k, v) in &tags {
            if v.is_empty() {
                continue; // the protocol has no empty tag values
            }
            head.push(',');
            head.push_str(&escape(k, false));
            head.push('=');
            head.push_str(&escape(v, false));
        }
        // One type per field for the whole series (Influx refuses a field that changes
        // type): an integer only if every value is one.
        let int: Vec<bool> = g
            .fields
            .iter()
            .map(|f| f.integer && f.v.iter().all(|v| !v.is_finite() || v.fract() == 0.0))
            .collect();
        for (i, t) in g.t_ns.iter().enumerate() {
            let mut fields = String::new();
            for (f, &int) in g.fields.iter().zip(&int) {
                let v = f.v[i];
                if !v.is_finite() {
                    continue;
                }
                if !fields.is_empty() {
                    fields.push(',');
                }
                fields.push_str(&escape(&f.key, false));
                fields.push('=');
                if int {
                    fields.push_str(&format!("{}i", v as i64));
                } else {
                    fields.push_str(&format!("{v}"));
                }
            }
            if fields.is_empty() {
                continue;
            }
            writeln!(out, "{head} {fields} {}", zero_unix_ns + t)?;
            lines += 1;
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::Field;

    #[test]
    fn escapes_and_integers_and_ns_timestamps() {
        let g = Group {
            measurement: "disk stats".into(),
            labels: vec![("device".into(), "a,b=c d".into())],
            t_ns: vec![5, 6],
            fields: vec![
                Field {
                    metric: "m_total".into(),
                    extra: vec![],
                    key: "reads".into(),
                    counter: true,
                    integer: true,
                    help: String::new(),
                    v: vec![7.0, f64::NAN],
                },
                Field {
                    metric: "g".into(),
                    extra: vec![],
                    key: "secs".into(),
                    counter: false,
                    integer: false,
                    help: String::new(),
                    v: vec![0.25, 1.5],
                },
            ],
        };
        let mut out = vec![];
        assert_eq!(write(&mut out, &[g], 1_000, "h1").unwrap(), 2);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "disk\\ stats,device=a\\,b\\=c\\ d,host=h1 reads=7i,secs=0.25 1005\ndisk\\ stats,device=a\\,b\\=c\\ d,host=h1 secs=1.5 1006\n"
        );
    }
}
