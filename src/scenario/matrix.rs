//! A scenario's matrix: the cartesian product of its parameters as cells (each with a
//! directory-safe id), and `${name}` replaced by a cell's values.
//!
//! A cell's id names its directory and its params go to `study.json`, so neither holds a
//! secret: [`hide_secrets`] shows a value its phases use as a secret as `***` (the value
//! is still what the phases run with).

use super::spec::Matrix;

/// One cell of the matrix: parameter values (as strings) and its directory-safe id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub params: Vec<(String, String)>,
    pub id: String,
}

fn value_str(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The cartesian product of the matrix parameters, in the order of the parameter names
/// (sorted) and of each parameter's values. No parameters: one cell, id "base".
pub fn expand(m: &Matrix) -> Vec<Cell> {
    let mut cells: Vec<Vec<(String, String)>> = vec![vec![]];
    for (k, vals) in &m.params {
        let mut next = vec![];
        for c in &cells {
            for v in vals {
                let mut c2 = c.clone();
                c2.push((k.clone(), value_str(v)));
                next.push(c2);
            }
        }
        cells = next;
    }
    cells
        .into_iter()
        .map(|params| Cell {
            id: id_of(&params),
            params,
        })
        .collect()
}

/// `base` without parameters, else `name-value_name-value` sanitized.
fn id_of(params: &[(String, String)]) -> String {
    if params.is_empty() {
        return "base".to_string();
    }
    params
        .iter()
        .map(|(k, v)| {
            let v = match v.strip_prefix(format::redact::HIDDEN) {
                Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                    format!("secret{n}")
                }
                _ => sanitize(v, '-'),
            };
            format!("{}-{v}", sanitize(k, '_'))
        })
        .collect::<Vec<_>>()
        .join("_")
}

/// Hides the secrets of a cell's shown values (issue 10 point 2, issue 25 point 2). A
/// value is a secret when it holds one of `secrets` (what [`format::redact::secrets`]
/// finds in the cell's phase arguments, e.g. `pw` in `--password ${pw}`), or when its
/// parameter is in `secret_params` (its `${name}` is where the redaction hides
/// something, e.g. `nats://u:${pw}@host`): it is shown as [`format::redact::HIDDEN`]
/// and its place in the parameter's list (`***2`), and the id says `pw-secret2`. A
/// URL's user info becomes `nats://***@host`. Returns the values hidden whole, which
/// the scenario.toml copy hides too. Two cells that then look the same are refused like
/// any two cells that share a directory.
pub fn hide_secrets(
    cell: &mut Cell,
    secrets: &[String],
    secret_params: &[String],
    m: &Matrix,
) -> Vec<String> {
    let mut changed = false;
    let mut hidden = vec![];
    for (k, v) in &mut cell.params {
        let secret = secret_params.contains(k) || secrets.iter().any(|s| v.contains(s.as_str()));
        let shown = if secret {
            let n = m
                .params
                .get(k.as_str())
                .and_then(|vals| vals.iter().position(|x| value_str(x) == *v));
            hidden.push(v.clone());
            format!("{}{}", format::redact::HIDDEN, n.map_or(0, |n| n + 1))
        } else {
            format::redact::text(v)
        };
        if shown != *v {
            *v = shown;
            changed = true;
        }
    }
    if changed {
        cell.id = id_of(&cell.params);
    }
    hidden
}

/// Where a scenario as written can put a matrix value, as argument vectors for the
/// redaction: each phase's args, and `[agents] server`.
fn secret_places(sc: &super::spec::Scenario) -> Vec<Vec<String>> {
    let mut places: Vec<Vec<String>> = sc.phases.iter().map(|p| p.get_ref().args.clone()).collect();
    if let Some(a) = &sc.agents {
        places.push(vec![a.server.get_ref().clone()]);
    }
    places
}

/// The matrix parameters whose `${name}` the one redaction ([`format::redact::hides`])
/// hides somewhere in the scenario as written: in a phase's args (`--password ${pw}`,
/// `nats://u:${pw}@host`) or in `[agents] server`. Their values are secrets whatever
/// they look like (issue 25 point 2).
pub fn secret_params(sc: &super::spec::Scenario) -> Vec<String> {
    let places = secret_places(sc);
    sc.matrix
        .params
        .keys()
        .filter(|k| {
            let needle = format!("${{{k}}}");
            places
                .iter()
                .any(|args| format::redact::hides(args, &needle))
        })
        .cloned()
        .collect()
}

/// The first secret parameter whose `${name}` the file also uses where nothing hides it
/// (a phase's `name`, a subject, the description): its value would be shown there.
pub fn secret_shown(sc: &super::spec::Scenario, text: &str, secret: &[String]) -> Option<String> {
    let places = secret_places(sc);
    secret
        .iter()
        .find(|k| {
            let needle = format!("${{{k}}}");
            let hidden: usize = places
                .iter()
                .map(|a| {
                    let n =
                        |v: &[String]| v.iter().map(|x| x.matches(&needle).count()).sum::<usize>();
                    n(a) - n(&format::redact::argv(a))
                })
                .sum();
            text.matches(&needle).count() > hidden
        })
        .cloned()
}

/// The number of cells and of runs (cells x repeat), counted from the value counts
/// without expanding anything; `None` when the product overflows a u64.
pub fn run_count(m: &Matrix) -> Option<(u64, u64)> {
    let mut cells: u64 = 1;
    for vals in m.params.values() {
        cells = cells.checked_mul(vals.len() as u64)?;
    }
    Some((cells, cells.checked_mul(u64::from(m.repeat))?))
}

/// The first cell of [`expand`] alone (each parameter's first value), for checks that
/// need one cell's names; `None` when a parameter has no values.
pub fn first_cell(m: &Matrix) -> Option<Cell> {
    let mut params = vec![];
    for (k, vals) in &m.params {
        params.push((k.clone(), value_str(vals.first()?)));
    }
    Some(Cell {
        params,
        id: String::new(),
    })
}

/// A cell id is a directory name under `cells/`: parameter names and values keep ASCII
/// letters, digits, '.' and '-' (names also '_'), anything else ('/', NUL, spaces)
/// becomes '-'. The id always has a '-' after the parameter's name, so it is never "." or
/// "..".
fn sanitize(v: &str, also: char) -> String {
    v.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == also {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Replaces `${name}` with the cell's values; an unknown name is an error (the caller
/// gives it a place).
pub fn substitute(s: &str, cell: &Cell) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else {
            return Err(format!("unclosed '${{' in '{s}'"));
        };
        let name = &after[..j];
        match cell.params.iter().find(|(k, _)| k == name) {
            Some((_, v)) => out.push_str(v),
            None => {
                return Err(format!(
                    "'${{{name}}}' names no matrix parameter (parameters: {})",
                    if cell.params.is_empty() {
                        "none".to_string()
                    } else {
                        cell.params
                            .iter()
                            .map(|p| p.0.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ))
            }
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(params: &[(&str, &str)]) -> Cell {
        let params: Vec<(String, String)> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Cell {
            id: id_of(&params),
            params,
        }
    }

    fn matrix(params: &[(&str, &[&str])]) -> Matrix {
        Matrix {
            repeat: 1,
            params: params
                .iter()
                .map(|(k, vs)| {
                    (
                        k.to_string(),
                        vs.iter()
                            .map(|v| toml::Value::String(v.to_string()))
                            .collect(),
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn a_value_used_as_a_secret_is_shown_hidden_and_the_id_follows() {
        let mut c = cell(&[("pw", "hunter22"), ("sync", "always")]);
        let m = matrix(&[("pw", &["x", "hunter22"]), ("sync", &["always"])]);
        let hidden = hide_secrets(&mut c, &["hunter22".to_string()], &[], &m);
        assert_eq!(c.params[0].1, "***2");
        assert_eq!(c.params[1].1, "always");
        assert_eq!(c.id, "pw-secret2_sync-always");
        assert_eq!(hidden, ["hunter22"]);
    }

    #[test]
    fn a_parameter_the_redaction_hides_is_hidden_whatever_its_value() {
        let mut c = cell(&[("pw", "Zq7")]);
        let m = matrix(&[("pw", &["Zq7"])]);
        hide_secrets(&mut c, &[], &["pw".to_string()], &m);
        assert_eq!(
            (c.params[0].1.as_str(), c.id.as_str()),
            ("***1", "pw-secret1")
        );
    }

    #[test]
    fn a_url_value_keeps_its_host_and_loses_its_user_info() {
        let mut c = cell(&[("srv", "nats://a:pw@h1:4222")]);
        hide_secrets(&mut c, &[], &[], &matrix(&[]));
        assert_eq!(c.params[0].1, "nats://***@h1:4222");
        assert!(!c.id.contains("pw"), "{}", c.id);
    }

    #[test]
    fn a_cell_without_secrets_is_unchanged() {
        let mut c = cell(&[("size", "8k")]);
        let before = c.clone();
        hide_secrets(&mut c, &["other".to_string()], &[], &matrix(&[]));
        assert_eq!(c, before);
    }
}
