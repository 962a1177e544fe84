//! `varz.csv` and `jsz.csv`: each nats-server's `/varz` and `/jsz`, polled every
//! `--monitor-interval` (250 ms) by `broker::monitor`, which formats the rows; the
//! headers and their meaning live here. `t_ns` is the midpoint of the request (an
//! instant, not a window). A field the server lacks is empty, never 0.

use std::path::Path;

use super::csv::{read_table_by, Table};

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
