//! The metric names both exports use (the live `/metrics` and `diskpulse export`): the
//! diskstats counters under node_exporter's names and units, so dashboards made for
//! node_exporter read ours, and the figures only diskpulse has.

use collectors::diskstats as ds;

/// A diskstats field under its node_exporter name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DiskMetric {
    /// The full sample name (counters end in `_total`).
    pub name: &'static str,
    /// Index into the diskstats counters ([`collectors::diskstats`] `F_*`).
    pub field: usize,
    /// Multiplier to the unit of the name: 512 for sectors to bytes, 0.001 for ms to s.
    pub scale: f64,
    pub counter: bool,
    pub help: &'static str,
}

const fn c(name: &'static str, field: usize, scale: f64, help: &'static str) -> DiskMetric {
    DiskMetric {
        name,
        field,
        scale,
        counter: true,
        help,
    }
}

/// node_exporter's diskstats metrics (its `diskstats_linux.go`), same names, same units.
pub(crate) const DISK_METRICS: [DiskMetric; 17] = [
    c(
        "node_disk_reads_completed_total",
        ds::F_READS,
        1.0,
        "The total number of reads completed successfully.",
    ),
    c(
        "node_disk_reads_merged_total",
        ds::F_READS_MERGED,
        1.0,
        "The total number of reads merged.",
    ),
    c(
        "node_disk_read_bytes_total",
        ds::F_SECTORS_READ,
        512.0,
        "The total number of bytes read successfully.",
    ),
    c(
        "node_disk_read_time_seconds_total",
        ds::F_READ_MS,
        0.001,
        "The total number of seconds spent by all reads.",
    ),
    c(
        "node_disk_writes_completed_total",
        ds::F_WRITES,
        1.0,
        "The total number of writes completed successfully.",
    ),
    c(
        "node_disk_writes_merged_total",
        ds::F_WRITES_MERGED,
        1.0,
        "The number of writes merged.",
    ),
    c(
        "node_disk_written_bytes_total",
        ds::F_SECTORS_WRITTEN,
        512.0,
        "The total number of bytes written successfully.",
    ),
    c(
        "node_disk_write_time_seconds_total",
        ds::F_WRITE_MS,
        0.001,
        "This is the total number of seconds spent by all writes.",
    ),
    DiskMetric {
        name: "node_disk_io_now",
        field: ds::F_IN_FLIGHT,
        scale: 1.0,
        counter: false,
        help: "The number of I/Os currently in progress.",
    },
    c(
        "node_disk_io_time_seconds_total",
        ds::F_IO_MS,
        0.001,
        "Total seconds spent doing I/Os.",
    ),
    c(
        "node_disk_io_time_weighted_seconds_total",
        ds::F_WEIGHTED_MS,
        0.001,
        "The weighted # of seconds spent doing I/Os.",
    ),
    c(
        "node_disk_discards_completed_total",
        ds::F_DISCARDS,
        1.0,
        "The total number of discards completed successfully.",
    ),
    c(
        "node_disk_discards_merged_total",
        ds::F_DISCARDS_MERGED,
        1.0,
        "The total number of discards merged.",
    ),
    c(
        "node_disk_discarded_sectors_total",
        ds::F_SECTORS_DISCARDED,
        1.0,
        "The total number of sectors discarded successfully.",
    ),
    c(
        "node_disk_discard_time_seconds_total",
        ds::F_DISCARD_MS,
        0.001,
        "This is the total number of seconds spent by all discards.",
    ),
    c(
        "node_disk_flush_requests_total",
        ds::F_FLUSHES,
        1.0,
        "The total number of flush requests completed successfully",
    ),
    c(
        "node_disk_flush_requests_time_seconds_total",
        ds::F_FLUSH_MS,
        0.001,
        "This is the total number of seconds spent by all flush requests.",
    ),
];

/// Highest rate over aligned windows (labels `device`, `direction`, `window`).
pub(crate) const PEAK: &str = "diskpulse_disk_peak_bytes_per_second";
/// Bursts in the live history (labels `device`, `direction`).
pub(crate) const BURSTS: &str = "diskpulse_disk_bursts";
/// Median time between burst starts in the live history, s.
pub(crate) const BURST_PERIOD: &str = "diskpulse_disk_burst_period_seconds";
/// 10 ms peak over the UI average.
pub const HIDDEN: &str = "diskpulse_disk_hidden_factor";
/// The UI average the hidden factor divides by.
pub(crate) const UI_AVERAGE: &str = "diskpulse_disk_ui_average_bytes_per_second";

/// A sample value as the text formats write it: integers without a fraction, NaN and
/// infinities as Prometheus spells them.
pub fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// A label value escaped for the Prometheus text formats (backslash, quote, newline).
pub fn label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Widths of the peak windows, ns: 1, 10, 100 ms.
pub(crate) const WINDOWS_NS: [u64; 3] = [1_000_000, 10_000_000, 100_000_000];
/// The `window` label of each of [`WINDOWS_NS`].
pub(crate) const WINDOW_LABELS: [&str; 3] = ["1ms", "10ms", "100ms"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_end_in_total_and_name_every_field_once() {
        let mut fields: Vec<usize> = DISK_METRICS.iter().map(|m| m.field).collect();
        fields.sort();
        assert_eq!(fields, (0..ds::MAX_FIELDS).collect::<Vec<_>>());
        for m in DISK_METRICS {
            assert_eq!(m.counter, m.name.ends_with("_total"), "{}", m.name);
        }
    }

    #[test]
    fn values_and_labels() {
        assert_eq!(value(3.0), "3");
        assert_eq!(value(0.5), "0.5");
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
