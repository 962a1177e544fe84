//! Which device the report speaks of first (issue 23 item 5), and `report --device`.
//!
//! A recording holds the devices the user asked about and, beside them, everything that
//! also carries their I/O: a loop device's backing disk, a partition's whole disk, a
//! device-mapper target's members ([`collectors::devices::Device::why`]). The backing
//! disk also carries the rest of the machine's writes, so its figures (often the largest)
//! are not the answer to the user's question. The report's order, used by every
//! headline, table, chart and summary.json `devices[]`:
//!
//! 1. the devices the user named (`why` "named"), in the order recorded;
//! 2. the store's volume: the broker nodes' devices from meta.json `broker_nodes`, and
//!    the devices that hold a path (`why` "holds ..." or "btrfs member ...");
//! 3. the devices under those (`why` "backing file of X", "whole disk of X", "slave of
//!    X"), labelled as such ([`lower_label`]: "backing disk of loop12");
//! 4. devices the run does not say anything of (an older recording, `--all`).
//!
//! Inside each group the order meta.json lists them in (the order they were resolved,
//! the user's own), then the busiest writer first. The sort is stable: two runs of the
//! same recording print the same order.
//!
//! What must stay true: the order is decided once, here, on the analyses, before any
//! figure is written; nothing downstream sorts devices again by bytes.

use format::meta::Meta;
use format::summary::DeviceSummary;
use format::usage;

/// Where a device stands in the report (lower sorts first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    Named,
    Store,
    Lower,
    Unknown,
}

/// The device's rank from its `why` and the broker's devices (meta.json
/// `broker_nodes`).
pub fn rank(name: &str, why: Option<&str>, broker_nodes: &[String]) -> Rank {
    match why {
        Some("named") => Rank::Named,
        _ if broker_nodes.iter().any(|b| b == name) => Rank::Store,
        Some(w) if w.starts_with("holds") || w.starts_with("btrfs member") => Rank::Store,
        Some(w) if lower_label(w).is_some() => Rank::Lower,
        _ => Rank::Unknown,
    }
}

/// How a device under another one is called in the report: "backing disk of loop12"
/// (from "backing file of loop12"), "whole disk of vda1", "under dm-0" (from "slave of
/// dm-0"); None for a device the user asked about.
pub(crate) fn lower_label(why: &str) -> Option<String> {
    if let Some(top) = why.strip_prefix("backing file of ") {
        return Some(format!("backing disk of {top}"));
    }
    if why.starts_with("whole disk of ") {
        return Some(why.to_string());
    }
    why.strip_prefix("slave of ")
        .map(|top| format!("under {top}"))
}

/// The label of a device's summary, when it is a lower device.
pub(crate) fn label_of(d: &DeviceSummary) -> Option<String> {
    d.why.as_deref().and_then(lower_label)
}

/// The broker nodes' devices meta.json names (empty when it names none).
fn broker_node_devices(meta: &Meta) -> Vec<String> {
    meta.broker_nodes()
        .unwrap_or_default()
        .into_iter()
        .flat_map(|n| n.devices)
        .collect()
}

/// The permutation that puts `devices` in the report's order (the module's rule):
/// `out[i]` is the index in `devices` of the i-th device to show.
pub fn order(meta: &Meta, devices: &[DeviceSummary]) -> Vec<usize> {
    let nodes = broker_node_devices(meta);
    let pos = |name: &str| {
        meta.devices
            .iter()
            .position(|d| d.name == name)
            .unwrap_or(usize::MAX)
    };
    let mut idx: Vec<usize> = (0..devices.len()).collect();
    idx.sort_by(|&a, &b| {
        let (da, db) = (&devices[a], &devices[b]);
        let key = |d: &DeviceSummary| (rank(&d.name, d.why.as_deref(), &nodes), pos(&d.name));
        key(da)
            .cmp(&key(db))
            .then(db.write.bytes.total_cmp(&da.write.bytes))
    });
    idx
}

/// Puts `items` (each with its summary) in the report's order, in place.
pub(crate) fn arrange<T>(meta: &Meta, items: &mut Vec<T>, summary: impl Fn(&T) -> &DeviceSummary) {
    let summaries: Vec<DeviceSummary> = items.iter().map(|x| summary(x).clone()).collect();
    let idx = order(meta, &summaries);
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    for i in idx {
        if let Some(x) = slots[i].take() {
            items.push(x);
        }
    }
}

/// `report --device`: keeps the devices named in `keep` (all when it is empty), in the
/// report's order. A name the run does not hold is a usage error that names it and the
/// devices the run has.
pub(crate) fn keep_only<T>(
    items: &mut Vec<T>,
    keep: &[String],
    name: impl Fn(&T) -> &str,
    run: &std::path::Path,
) -> anyhow::Result<()> {
    if keep.is_empty() {
        return Ok(());
    }
    let have: Vec<String> = items.iter().map(|x| name(x).to_string()).collect();
    let unknown: Vec<&String> = keep.iter().filter(|k| !have.contains(k)).collect();
    if !unknown.is_empty() {
        let list = |v: &[&String]| {
            v.iter()
                .map(|s| format!("'{s}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(usage!(
            "--device {}: RUN '{}' has no such device; it recorded {} (pass one of those, or leave --device out for all)",
            list(&unknown),
            run.display(),
            if have.is_empty() {
                "no device".to_string()
            } else {
                have.join(", ")
            }
        ));
    }
    items.retain(|x| keep.iter().any(|k| k == name(x)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::meta::MetaDevice;

    fn dev(name: &str, why: Option<&str>, bytes: f64) -> DeviceSummary {
        let p = crate::analysis::BurstParams::default();
        let dir = format::summary::Direction {
            bytes,
            ios: 0.0,
            mean_mib_s: 0.0,
            peak_mib_s: format::summary::Peaks {
                p1ms: 0.0,
                p10ms: 0.0,
                p100ms: 0.0,
                p1s: 0.0,
            },
            peak_iops_10ms: 0.0,
            await_ms: None,
            ui_average_mib_s: 0.0,
            hidden_factor: None,
            bursts: crate::analysis::find_bursts(&[], &p),
            service_peak_mib_s: None,
            bunched: vec![],
            headline_peak_10ms_mib_s: None,
        };
        DeviceSummary {
            name: name.into(),
            why: why.map(str::to_string),
            write: dir.clone(),
            read: dir,
            flushes: None,
            peak_flushes_per_s_100ms: None,
            max_in_flight: 0.0,
            util_pct: 0.0,
            rows: 0,
        }
    }

    fn meta(names: &[(&str, &str)]) -> Meta {
        Meta {
            devices: names
                .iter()
                .map(|(n, w)| MetaDevice {
                    name: n.to_string(),
                    why: Some(w.to_string()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_named_volume_comes_before_its_busier_backing_disk() {
        let m = meta(&[("loop12", "named"), ("vda", "backing file of loop12")]);
        // The pass's order (first appearance in diskstats.csv.gz): vda first.
        let devs = vec![
            dev("vda", Some("backing file of loop12"), 9e9),
            dev("loop12", Some("named"), 1e6),
        ];
        let o = order(&m, &devs);
        assert_eq!(o, vec![1, 0]);
        assert_eq!(
            label_of(&devs[0]).as_deref(),
            Some("backing disk of loop12")
        );
        assert_eq!(label_of(&devs[1]), None);
    }

    #[test]
    fn a_store_volume_leads_and_the_unknown_follow_busiest_first() {
        let m = meta(&[("loop3", "holds /mnt/js"), ("vda", "backing file of loop3")]);
        let devs = vec![
            dev("sdb", None, 5.0),
            dev("vda", Some("backing file of loop3"), 9e9),
            dev("sdc", None, 50.0),
            dev("loop3", Some("holds /mnt/js"), 1.0),
        ];
        let names: Vec<&str> = order(&m, &devs)
            .into_iter()
            .map(|i| devs[i].name.as_str())
            .collect();
        assert_eq!(names, ["loop3", "vda", "sdc", "sdb"]);
    }

    #[test]
    fn an_unknown_device_is_refused_naming_it_and_what_the_run_has() {
        let mut v = vec!["loop12".to_string(), "vda".to_string()];
        let e = keep_only(
            &mut v,
            &["loop99".into()],
            |s| s.as_str(),
            std::path::Path::new("/r"),
        )
        .unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("'loop99'") && msg.contains("loop12, vda"),
            "{msg}"
        );
        assert_eq!(v.len(), 2, "nothing dropped on an error");
        keep_only(
            &mut v,
            &["vda".into()],
            |s| s.as_str(),
            std::path::Path::new("/r"),
        )
        .unwrap();
        assert_eq!(v, ["vda"]);
    }
}
