//! When each phase of a scenario starts and what stops it, from its timing keys:
//!
//! - none: after the previous phase in file order ends (the first: at the start of the
//!   phases), so a file without timing keys runs its phases one after another;
//! - `with = "NAME"`: when phase NAME starts; `after = "NAME"`: when NAME ends;
//! - `at = "10s"`: an offset added to that moment, or alone the time from the start of the
//!   phases;
//! - `during = "NAME"`: the phase is stopped when NAME ends (its child gets SIGINT, a
//!   sleep ends); alone it also starts with NAME.
//!
//! What must stay true (checked here with FILE:LINE:COLUMN, before anything runs): every
//! NAME is the `name` of exactly one phase; every phase can start (no cycle of
//! `with`/`after`); no phase runs `during` itself; `at` is a duration; two phases that
//! stop, start or kill the same broker node are ordered one after the other (the second
//! starts after the first ended, through a chain of `after`/`with`), because two of them
//! at once on one node would race.

use std::collections::BTreeMap;
use std::time::Duration;

use toml::Spanned;

use super::spec::{err_at, PhaseDecl, SpecError, NODE_KINDS};
use format::cli::parse_duration;

/// The moment a phase's start is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The start of the phases (after the broker is ready).
    RunStart,
    /// When phase `i` starts.
    StartOf(usize),
    /// When phase `i` ends.
    EndOf(usize),
}

/// When one phase starts and what stops it.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub anchor: Anchor,
    /// Added to the anchor's moment.
    pub offset: Duration,
    /// Stopped when this phase ends.
    pub during: Option<usize>,
}

/// Every phase's slot, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub slots: Vec<Slot>,
}

/// A name written with `${..}` is only known per cell: its checks wait for the cell.
fn templated(s: &str) -> bool {
    s.contains("${")
}

/// The nodes a node phase names (`None`: all of them, or not known before the cell).
fn node_set(p: &PhaseDecl) -> Option<Vec<i64>> {
    match &p.nodes {
        Some(toml::Value::Integer(i)) => Some(vec![*i]),
        Some(toml::Value::Array(a)) => a.iter().map(toml::Value::as_integer).collect(),
        _ => None,
    }
}

fn overlap(a: &Option<Vec<i64>>, b: &Option<Vec<i64>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().any(|n| b.contains(n)),
        _ => true,
    }
}

impl Schedule {
    /// Resolves and checks the timing keys of `phases`; errors carry the place in `text`.
    /// A phase whose timing names a `${..}` is left to the cell's check (`Ok(None)`).
    #[allow(
        clippy::too_many_lines,
        reason = "the schedule of every phase kind in one match, so their overlaps are checked in one place"
    )]
    pub fn build(
        path: &str,
        text: &str,
        phases: &[Spanned<PhaseDecl>],
    ) -> Result<Option<Schedule>, SpecError> {
        let err = |s: &Spanned<String>, m: String| err_at(path, text, s.span(), m);
        let mut names: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, p) in phases.iter().enumerate() {
            if let Some(n) = &p.get_ref().name {
                names.entry(n.get_ref().as_str()).or_default().push(i);
            }
        }
        let resolve = |r: &Spanned<String>, key: &str| -> Result<Option<usize>, SpecError> {
            let n = r.get_ref();
            if templated(n) {
                return Ok(None);
            }
            match names.get(n.as_str()).map(Vec::as_slice) {
                Some([i]) => Ok(Some(*i)),
                Some([_, second, ..]) => {
                    let p = phases[*second].get_ref();
                    let place = p.name.as_ref().expect("named");
                    Err(err(
                        place,
                        format!(
                            "two phases are named '{n}' and `{key} = \"{n}\"` refers to it; give each phase its own name"
                        ),
                    ))
                }
                _ => Err(err(
                    r,
                    format!(
                        "`{key} = \"{n}\"`: no phase is named '{n}' (named: {}); add name = \"{n}\" to the phase meant",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.keys().copied().collect::<Vec<_>>().join(", ")
                        }
                    ),
                )),
            }
        };
        let mut slots = vec![];
        // The key that made each anchor (for errors about it), if written.
        let mut anchor_keys: Vec<Option<&Spanned<String>>> = vec![];
        let mut complete = true;
        for (i, p) in phases.iter().enumerate() {
            let d = p.get_ref();
            if let (Some(_), Some(after)) = (&d.with, &d.after) {
                return Err(err(
                    after,
                    "a phase starts either `with` another or `after` it, not both; keep one (and `at` for an offset)".into(),
                ));
            }
            let offset = match &d.at {
                Some(a) if templated(a.get_ref()) => {
                    complete = false;
                    Duration::ZERO
                }
                Some(a) => parse_duration(a.get_ref())
                    .map_err(|e| err(a, format!("at = \"{}\": {e}", a.get_ref())))?,
                None => Duration::ZERO,
            };
            let during = match &d.during {
                Some(r) => match resolve(r, "during")? {
                    Some(j) if j == i => {
                        return Err(err(
                            r,
                            format!(
                                "a phase cannot run `during` itself ('{}'); name the phase whose end stops this one",
                                r.get_ref()
                            ),
                        ))
                    }
                    Some(j) => Some(j),
                    None => {
                        complete = false;
                        None
                    }
                },
                None => None,
            };
            let (anchor, key) = if let Some(w) = &d.with {
                (resolve(w, "with")?.map(Anchor::StartOf), Some(w))
            } else if let Some(a) = &d.after {
                (resolve(a, "after")?.map(Anchor::EndOf), Some(a))
            } else if d.at.is_some() {
                (Some(Anchor::RunStart), None)
            } else if let Some(r) = &d.during {
                (during.map(Anchor::StartOf), Some(r))
            } else if i == 0 {
                (Some(Anchor::RunStart), None)
            } else {
                (Some(Anchor::EndOf(i - 1)), None)
            };
            let Some(anchor) = anchor else {
                complete = false;
                slots.push(Slot {
                    anchor: Anchor::RunStart,
                    offset,
                    during,
                });
                anchor_keys.push(key);
                continue;
            };
            slots.push(Slot {
                anchor,
                offset,
                during,
            });
            anchor_keys.push(key);
        }
        if !complete {
            return Ok(None);
        }
        let s = Schedule { slots };
        // A cycle of with/after: the first phase on one (in file order) has its anchor
        // written out (an implicit anchor points back to a phase earlier in the file).
        for i in 0..s.slots.len() {
            if let Some(cycle) = s.cycle_through(i) {
                let label = |k: usize| {
                    phases[k]
                        .get_ref()
                        .name
                        .as_ref()
                        .map(|n| n.get_ref().clone())
                        .unwrap_or_else(|| format!("phase {}", k + 1))
                };
                let chain: Vec<String> = cycle.iter().map(|&k| label(k)).collect();
                let place = anchor_keys[i]
                    .map(|k| k.span())
                    .unwrap_or_else(|| phases[i].get_ref().kind.span());
                return Err(err_at(
                    path,
                    text,
                    place,
                    format!(
                        "phase '{}' can never start: its start waits on itself ({} -> {}); break the cycle of with/after",
                        label(i),
                        chain.join(" -> "),
                        label(i)
                    ),
                ));
            }
        }
        // Two node phases on one node: the later in the file must start after the other
        // ended.
        for j in 0..phases.len() {
            let pj = phases[j].get_ref();
            if !NODE_KINDS.contains(&pj.kind.get_ref().as_str()) {
                continue;
            }
            for (i, pi) in phases.iter().enumerate().take(j) {
                let pi = pi.get_ref();
                if !NODE_KINDS.contains(&pi.kind.get_ref().as_str())
                    || !overlap(&node_set(pi), &node_set(pj))
                {
                    continue;
                }
                if !s.starts_after_end(j, i) && !s.starts_after_end(i, j) {
                    let place = anchor_keys[j]
                        .or(pj.at.as_ref())
                        .map(|k| k.span())
                        .unwrap_or_else(|| pj.kind.span());
                    let (l, c) = super::spec::line_col(text, phases[i].get_ref().kind.span().start);
                    return Err(err_at(
                        path,
                        text,
                        place,
                        format!(
                            "this '{}' phase and the '{}' phase at {l}:{c} act on the same node and could overlap; start this one `after` that one ends",
                            pj.kind.get_ref(),
                            pi.kind.get_ref()
                        ),
                    ));
                }
            }
        }
        Ok(Some(s))
    }

    /// The schedule of a cell's phases, checked when the cell was parsed (its errors then
    /// had their place; here they cannot happen).
    pub fn of(phases: &[Spanned<PhaseDecl>]) -> anyhow::Result<Schedule> {
        Schedule::build("scenario", "", phases)
            .map_err(|e| anyhow::anyhow!("{}", e.message))?
            .ok_or_else(|| anyhow::anyhow!("the phases' timing still names a ${{..}}"))
    }

    /// The phases on a cycle through `i` (starting at `i`), if its start waits on itself.
    fn cycle_through(&self, i: usize) -> Option<Vec<usize>> {
        let mut chain = vec![i];
        let mut cur = i;
        for _ in 0..=self.slots.len() {
            cur = match self.slots[cur].anchor {
                Anchor::RunStart => return None,
                Anchor::StartOf(k) | Anchor::EndOf(k) => k,
            };
            if cur == i {
                return Some(chain);
            }
            chain.push(cur);
        }
        None
    }

    /// Whether phase `j` can only start after phase `i` ended (through its anchors).
    pub fn starts_after_end(&self, j: usize, i: usize) -> bool {
        let mut cur = j;
        for _ in 0..=self.slots.len() {
            match self.slots[cur].anchor {
                Anchor::RunStart => return false,
                Anchor::EndOf(k) if k == i => return true,
                Anchor::EndOf(k) | Anchor::StartOf(k) => cur = k,
            }
        }
        false
    }

    /// One line per phase for `run --dry-run`: when it starts and what stops it. `labels`
    /// name each phase in references, `lines` describe it in its own line.
    pub fn describe(&self, labels: &[String], lines: &[String]) -> Vec<String> {
        self.slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut t = match s.anchor {
                    Anchor::RunStart => "at the start".to_string(),
                    Anchor::StartOf(k) => format!("with #{k} {}", labels[k]),
                    Anchor::EndOf(k) => format!("after #{k} {}", labels[k]),
                };
                if !s.offset.is_zero() {
                    t.push_str(&format!(" + {:?}", s.offset));
                }
                if let Some(d) = s.during {
                    t.push_str(&format!(", stopped when #{d} {} ends", labels[d]));
                }
                format!("#{i} {}: {t}", lines[i])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::parse;
    use super::*;

    fn sched(t: &str) -> Schedule {
        let sc = parse("s.toml", t).unwrap();
        Schedule::build("s.toml", t, &sc.phases).unwrap().unwrap()
    }

    fn err(t: &str) -> SpecError {
        parse("s.toml", t).unwrap_err()
    }

    const HEAD: &str =
        "name = \"x\"\n[broker]\nvolumes = [\"v\"]\n[[volumes]]\nname = \"v\"\npath = \"/tmp\"\n";

    #[test]
    fn phases_without_timing_keys_run_one_after_another() {
        let s = sched(&format!(
            "{HEAD}[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\n[[phases]]\nkind = \"restart\"\n"
        ));
        assert_eq!(s.slots[0].anchor, Anchor::RunStart);
        assert_eq!(s.slots[1].anchor, Anchor::EndOf(0));
        assert!(s.starts_after_end(1, 0));
    }

    #[test]
    fn with_after_at_and_during_resolve_to_anchors() {
        let s = sched(&format!(
            "{HEAD}[[phases]]\nname = \"load\"\nkind = \"load\"\nargs = [\"js-pub\"]\n\
             [[phases]]\nkind = \"sleep\"\nduration = \"1h\"\nduring = \"load\"\n\
             [[phases]]\nkind = \"kill\"\nnodes = [1]\nwith = \"load\"\nat = \"5s\"\ndown_for = \"3s\"\n\
             [[phases]]\nkind = \"restart\"\nnodes = [2]\nafter = \"load\"\n\
             [[phases]]\nkind = \"sleep\"\nduration = \"1s\"\nat = \"2s\"\n"
        ));
        assert_eq!(s.slots[1].anchor, Anchor::StartOf(0));
        assert_eq!(s.slots[1].during, Some(0));
        assert_eq!(s.slots[2].anchor, Anchor::StartOf(0));
        assert_eq!(s.slots[2].offset, Duration::from_secs(5));
        assert_eq!(s.slots[3].anchor, Anchor::EndOf(0));
        assert_eq!(s.slots[4].anchor, Anchor::RunStart);
        assert_eq!(s.slots[4].offset, Duration::from_secs(2));
        let l: Vec<String> = ["load", "sleep", "kill", "restart", "sleep"]
            .map(String::from)
            .into();
        let d = s.describe(&l, &l);
        assert_eq!(d[2], "#2 kill: with #0 load + 5s");
        assert_eq!(d[1], "#1 sleep: with #0 load, stopped when #0 load ends");
    }

    #[test]
    fn an_unknown_name_is_an_error_at_the_reference() {
        let e = err(&format!(
            "{HEAD}[[phases]]\nname = \"a\"\nkind = \"sleep\"\nduration = \"1s\"\n[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\nwith = \"b\"\n"
        ));
        assert_eq!((e.line, e.column), (14, 8), "{e}");
        assert!(
            e.message.contains("no phase is named 'b' (named: a)"),
            "{e}"
        );
    }

    #[test]
    fn a_cycle_can_never_start() {
        let e = err(&format!(
            "{HEAD}[[phases]]\nname = \"a\"\nkind = \"sleep\"\nduration = \"1s\"\nafter = \"b\"\n[[phases]]\nname = \"b\"\nkind = \"sleep\"\nduration = \"1s\"\nwith = \"a\"\n"
        ));
        assert_eq!((e.line, e.column), (11, 9), "{e}");
        assert!(e.message.contains("'a' can never start"), "{e}");
        assert!(e.message.contains("(a -> b -> a)"), "{e}");
    }

    #[test]
    fn during_itself_and_a_bad_at_are_errors() {
        let e = err(&format!(
            "{HEAD}[[phases]]\nname = \"a\"\nkind = \"sleep\"\nduration = \"1s\"\nduring = \"a\"\n"
        ));
        assert_eq!((e.line, e.column), (11, 10), "{e}");
        assert!(e.message.contains("`during` itself"), "{e}");
        let e = err(&format!(
            "{HEAD}[[phases]]\nkind = \"sleep\"\nduration = \"1s\"\nat = \"5 s\"\n"
        ));
        assert_eq!((e.line, e.column), (10, 6), "{e}");
        assert!(e.message.contains("at = \"5 s\""), "{e}");
    }

    #[test]
    fn two_restarts_of_one_node_that_could_overlap_are_an_error_at_the_second() {
        let t = format!(
            "{HEAD}[[phases]]\nname = \"load\"\nkind = \"load\"\nargs = [\"js-pub\"]\n\
             [[phases]]\nkind = \"restart\"\nnodes = [1]\nwith = \"load\"\nat = \"2s\"\n\
             [[phases]]\nkind = \"kill\"\nnodes = 1\nwith = \"load\"\nat = \"9s\"\n"
        );
        let e = err(&t);
        assert_eq!((e.line, e.column), (19, 8), "{e}");
        assert!(e.message.contains("'restart' phase at 12:8"), "{e}");
        // Ordered: fine.
        sched(
            &t.replace("nodes = 1\nwith = \"load\"", "nodes = 1\nafter = \"r\"")
                .replace("kind = \"restart\"\n", "kind = \"restart\"\nname = \"r\"\n"),
        );
        // Other nodes: fine.
        sched(&t.replace("nodes = 1\n", "nodes = 2\n"));
    }
}
