//! `varz.csv` and `jsz.csv`: each nats-server's `/varz` and `/jsz`, polled every
//! `--monitor-interval` (250 ms) by `broker::monitor`; the documents' fields it keeps
//! ([`Varz`], [`Jsz`]), the rows they make, the headers and their meaning live here. `t_ns` is the midpoint of the request (an
//! instant, not a window). A field the server lacks is empty, never 0.

use std::path::Path;

use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

use super::csv::{push_cell, push_u64, read_table_by, Table};

pub const VARZ_FILE: &str = "varz.csv";
pub const JSZ_FILE: &str = "jsz.csv";

/// `RUN/varz.csv`: one row per server and poll of `/varz`.
///
/// `t_ns` run clock (midpoint of the request); `server` the name given (or the
/// server's `server_name`); `poll_us` request round trip in µs; `cpu_pct` the server's
/// own CPU estimate in % of one core (it can exceed 100; nats-server refreshes it about
/// once a second, so consecutive rows may repeat it); `mem_bytes` resident set size;
/// `connections`, `routes`, `subscriptions` gauges; `total_connections`, `in_msgs`,
/// `out_msgs`, `in_bytes`, `out_bytes` (payload bytes, clients and routes),
/// `slow_consumers`, `stalled_clients` counters since the server started; the
/// `disk_io_*` columns are `disk_io_wait_stats` (nats-server 2.14.4+; empty before),
/// contention for the filestore's disk I/O semaphore: `disk_io_waiters` goroutines
/// waiting now (gauge), `disk_io_waits` times one had to wait (counter),
/// `disk_io_wait_time` total time spent waiting (counter) and `disk_io_max_wait_time`
/// the longest wait. The two times are written as the server reports them: 2.15.1
/// declares them `uint64` (not Go's `time.Duration`) and documents no unit, so their
/// names carry none until one is seen non-zero beside a stall of known length
/// (nanoseconds, Go's usual, is the likely one; 300 streams fsyncing at once here and
/// cold reads after a restart left all four at 0).
pub const VARZ_CSV_HEADER: &str = "t_ns,server,poll_us,cpu_pct,mem_bytes,connections,total_connections,routes,subscriptions,in_msgs,out_msgs,in_bytes,out_bytes,slow_consumers,stalled_clients,disk_io_waiters,disk_io_waits,disk_io_wait_time,disk_io_max_wait_time";

/// `RUN/jsz.csv`: one row per server and poll of `/jsz` (this server's view of
/// JetStream: its own replicas of streams and consumers).
///
/// `t_ns`, `server`, `poll_us` as in varz.csv; `streams`, `consumers`, `messages`,
/// `bytes` (message bytes in streams), `memory_bytes`, `storage_bytes` (used),
/// `reserved_memory_bytes`, `reserved_storage_bytes`, `ha_assets` (Raft groups on this
/// server) gauges; `api_total`, `api_errors` JetStream API requests since start
/// (counters); `meta_leader` the meta group leader's name as this server sees it (empty
/// outside a cluster or while there is none), `is_meta_leader` 1/0, `meta_cluster_size`
/// and `meta_pending` (Raft entries not yet applied) gauges.
pub const JSZ_CSV_HEADER: &str = "t_ns,server,poll_us,streams,consumers,messages,bytes,memory_bytes,storage_bytes,reserved_memory_bytes,reserved_storage_bytes,ha_assets,api_total,api_errors,meta_leader,is_meta_leader,meta_cluster_size,meta_pending";

/// The parts of a nats-server's `/varz` that varz.csv keeps (the rest of the document is
/// skipped). A field the server does not send reads as "no value".
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Varz {
    /// The server's own name (to tell from `/jsz` whether it is the meta leader).
    pub server_name: Option<String>,
    cpu: Num,
    mem: Num,
    connections: Num,
    total_connections: Num,
    routes: Num,
    subscriptions: Num,
    in_msgs: Num,
    out_msgs: Num,
    in_bytes: Num,
    out_bytes: Num,
    slow_consumers: Num,
    stalled_clients: Num,
    /// nats-server 2.14.4+.
    disk_io_wait_stats: Option<DiskIoWaitStats>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DiskIoWaitStats {
    waiters: Num,
    waits: Num,
    wait_time: Num,
    max_wait_time: Num,
}

impl Varz {
    /// The cells after `poll_us`, in [`VARZ_CSV_HEADER`]'s order.
    fn cells(&self) -> [&Num; 16] {
        let none = &Num(None);
        let d = self.disk_io_wait_stats.as_ref();
        [
            &self.cpu,
            &self.mem,
            &self.connections,
            &self.total_connections,
            &self.routes,
            &self.subscriptions,
            &self.in_msgs,
            &self.out_msgs,
            &self.in_bytes,
            &self.out_bytes,
            &self.slow_consumers,
            &self.stalled_clients,
            d.map_or(none, |d| &d.waiters),
            d.map_or(none, |d| &d.waits),
            d.map_or(none, |d| &d.wait_time),
            d.map_or(none, |d| &d.max_wait_time),
        ]
    }
}

/// A nats-server's `/healthz` answer (`{"status":"ok"}` once JetStream and its streams
/// are up; the server answers 503 before).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Healthz {
    pub status: String,
}

impl Healthz {
    /// Whether the server says it is healthy.
    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

/// The parts of a nats-server's `/jsz` that jsz.csv keeps.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Jsz {
    streams: Num,
    consumers: Num,
    messages: Num,
    bytes: Num,
    memory: Num,
    storage: Num,
    reserved_memory: Num,
    reserved_storage: Num,
    ha_assets: Num,
    api: Option<JszApi>,
    /// Absent outside a cluster.
    meta_cluster: Option<MetaCluster>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct JszApi {
    total: Num,
    errors: Num,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct MetaCluster {
    leader: Option<String>,
    cluster_size: Num,
    pending: Num,
}

impl Jsz {
    /// The meta group leader's name as this server sees it; `None` outside a cluster or
    /// while there is none.
    pub fn meta_leader(&self) -> Option<&str> {
        self.meta_cluster
            .as_ref()
            .and_then(|m| m.leader.as_deref())
            .filter(|l| !l.is_empty())
    }

    /// The numeric cells after `poll_us` and before `meta_leader`, in
    /// [`JSZ_CSV_HEADER`]'s order.
    fn cells(&self) -> [&Num; 11] {
        let none = &Num(None);
        let api = self.api.as_ref();
        [
            &self.streams,
            &self.consumers,
            &self.messages,
            &self.bytes,
            &self.memory,
            &self.storage,
            &self.reserved_memory,
            &self.reserved_storage,
            &self.ha_assets,
            api.map_or(none, |a| &a.total),
            api.map_or(none, |a| &a.errors),
        ]
    }
}

/// A numeric field as the server wrote it: integers stay integers (`1024`, not
/// `1024.0`), a float is written as serde_json writes it; a field that is missing,
/// `null` or not a number is `None`, an empty cell.
#[derive(Debug, Default)]
struct Num(Option<Number>);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        Ok(Num(match Value::deserialize(d)? {
            Value::Number(n) => Some(n),
            _ => None,
        }))
    }
}

impl Num {
    fn put(&self, row: &mut Vec<u8>) {
        if let Some(n) = &self.0 {
            row.extend_from_slice(n.to_string().as_bytes());
        }
    }
}

/// The cells every monitor row starts with: `t_ns,server,poll_us`.
fn start_row(row: &mut Vec<u8>, t_ns: u64, server: &str, poll_us: u64) {
    push_u64(row, t_ns);
    row.push(b',');
    push_cell(row, server);
    row.push(b',');
    push_u64(row, poll_us);
}

/// Appends one varz.csv line (with its newline) to `row`.
pub fn put_varz_row(row: &mut Vec<u8>, t_ns: u64, server: &str, poll_us: u64, v: &Varz) {
    start_row(row, t_ns, server, poll_us);
    for c in v.cells() {
        row.push(b',');
        c.put(row);
    }
    row.push(b'\n');
}

/// Appends one jsz.csv line (with its newline) to `row`; `me` is the server's
/// `server_name` from its last `/varz` (`is_meta_leader` is empty without it).
pub fn put_jsz_row(
    row: &mut Vec<u8>,
    t_ns: u64,
    server: &str,
    poll_us: u64,
    me: Option<&str>,
    v: &Jsz,
) {
    start_row(row, t_ns, server, poll_us);
    for c in v.cells() {
        row.push(b',');
        c.put(row);
    }
    let leader = v.meta_leader();
    row.push(b',');
    if let Some(l) = leader {
        push_cell(row, l);
    }
    row.push(b',');
    if let (Some(l), Some(me)) = (leader, me) {
        row.push(if l == me { b'1' } else { b'0' });
    }
    let meta = v.meta_cluster.as_ref();
    row.push(b',');
    if let Some(m) = meta {
        m.cluster_size.put(row);
    }
    row.push(b',');
    if let Some(m) = meta {
        m.pending.put(row);
    }
    row.push(b'\n');
}

/// Reads `varz.csv`, `jsz.csv` or `rabbitmq_metrics.csv` split by server (text columns
/// such as `meta_leader` read as NaN), its closed chunks first (`record --chunk`:
/// `chunks/varz.NNNNNN.csv`, ...) as one file; empty when the run has none.
pub fn read(dir: &Path, file: &str) -> anyhow::Result<std::collections::BTreeMap<String, Table>> {
    let mut out: std::collections::BTreeMap<String, Table> = Default::default();
    let files = super::csv::chunked_files(dir, file);
    for p in &files {
        for (server, t) in read_table_by(p, "server")? {
            match out.get_mut(&server) {
                None => {
                    out.insert(server, t);
                }
                Some(all) => all.append(t, p, &files[0])?,
            }
        }
    }
    Ok(out)
}

pub const RABBITMQ_FILE: &str = "rabbitmq_metrics.csv";

/// `RUN/rabbitmq_metrics.csv`: an embedded RabbitMQ node's Prometheus endpoint
/// (`rabbitmq_prometheus`, `/metrics`), one row per poll, polled like `/varz`
/// (`--monitor-interval`, 250 ms) by `broker::rabbit_metrics`.
///
/// `t_ns`, `server`, `poll_us` as in varz.csv; `mem_bytes` the VM's resident set size and
/// `connections` gauges; counters since the node started: `messages_received`,
/// `messages_confirmed`, `messages_routed`, `messages_delivered`,
/// `messages_acknowledged` (all protocols, all queue types), `io_write_ops`,
/// `io_write_bytes`, `io_sync_ops` (the node's file handle cache: classic queues' and
/// the message store's writes and fsyncs), `io_sync_time_s` (seconds in those syncs);
/// `queue_messages`, `queue_messages_unacked` gauges over all queues (the node refreshes
/// them every `collect_statistics_interval`, 5 s by default, so rows repeat them);
/// `raft_written_index`, `raft_commit_index` the quorum queues' Raft log indexes summed
/// over queues (written to the WAL vs committed). A metric the node does not report is
/// empty, never 0.
pub const RABBITMQ_CSV_HEADER: &str = "t_ns,server,poll_us,mem_bytes,connections,messages_received,messages_confirmed,messages_routed,messages_delivered,messages_acknowledged,io_write_ops,io_write_bytes,io_sync_ops,io_sync_time_s,queue_messages,queue_messages_unacked,raft_written_index,raft_commit_index";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_keep_integers_and_leave_missing_fields_empty() {
        let v: Varz = serde_json::from_str(
            r#"{"server_name": "n1", "cpu": 12.5, "mem": 1024, "routes": "x",
                "connections": null, "disk_io_wait_stats": {"waits": 3}, "other": [1]}"#,
        )
        .unwrap();
        let mut row = Vec::new();
        put_varz_row(&mut row, 7, "a,\"b\"", 9, &v);
        assert_eq!(
            String::from_utf8(row).unwrap(),
            "7,\"a,\"\"b\"\"\",9,12.5,1024,,,,,,,,,,,,3,,\n"
        );
        let mut row = Vec::new();
        put_varz_row(&mut row, 7, "n1", 9, &Varz::default());
        assert_eq!(row, format!("7,n1,9{}\n", ",".repeat(16)).as_bytes());
    }

    #[test]
    fn a_jsz_row_says_who_leads_the_meta_group() {
        let v: Jsz = serde_json::from_str(
            r#"{"streams": 2, "api": {"total": 10, "errors": 1},
                "meta_cluster": {"leader": "n2", "cluster_size": 3, "pending": 0}}"#,
        )
        .unwrap();
        let mut row = Vec::new();
        put_jsz_row(&mut row, 1, "n1", 2, Some("n1"), &v);
        assert_eq!(row, b"1,n1,2,2,,,,,,,,,10,1,n2,0,3,0\n");
        let mut row = Vec::new();
        put_jsz_row(&mut row, 1, "n2", 2, Some("n2"), &v);
        assert!(row.ends_with(b",n2,1,3,0\n"));
        let mut row = Vec::new();
        put_jsz_row(&mut row, 1, "n1", 2, None, &Jsz::default());
        assert_eq!(row, format!("1,n1,2{}\n", ",".repeat(15)).as_bytes());
    }

    #[test]
    fn headers_have_one_column_per_cell() {
        assert_eq!(
            VARZ_CSV_HEADER.split(',').count(),
            3 + Varz::default().cells().len()
        );
        assert_eq!(
            JSZ_CSV_HEADER.split(',').count(),
            3 + Jsz::default().cells().len() + 4
        );
    }
}
