//! INFO (`server.c` `genRedisInfoString`): every section of Redis 7.0 with its field names in
//! Redis's order. Values this server has (clients, keys, replication, errors, calls, the port)
//! are real; figures about a process it is not (memory allocator, CPU, forks) are those of an
//! idle redis-server.

use std::fmt::Write as _;

use crate::redis::reply::Reply;
use crate::redis::server::{Ctx, Role};

/// The sections in output order; `default` prints the ones marked true.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// INFO [section ...]: `default` (or nothing), `all`, `everything`, or section names (any
/// case; unknown ones print nothing).
pub fn info(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let wanted: Vec<String> = argv[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let mut parts = Vec::new();
    for (name, in_default) in SECTIONS {
        let asked = wanted
            .iter()
            .any(|w| w == name || (*name == "modules" && w == "module_list"));
        if all || asked || (default && *in_default) {
            parts.push(section(ctx, name));
        }
    }
    Reply::text(parts.join("\r\n"))
}

fn section(ctx: &Ctx<'_>, name: &str) -> String {
    match name {
        "server" => server(ctx),
        "clients" => clients(ctx),
        "memory" => memory(ctx),
        "persistence" => persistence(ctx),
        "stats" => stats(ctx),
        "replication" => replication(ctx),
        "cpu" => "# CPU\r\nused_cpu_sys:0.000000\r\nused_cpu_user:0.000000\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\nused_cpu_sys_main_thread:0.000000\r\nused_cpu_user_main_thread:0.000000\r\n".to_string(),
        "modules" => "# Modules\r\n".to_string(),
        "commandstats" => commandstats(ctx),
        "errorstats" => errorstats(ctx),
        "latencystats" => "# Latencystats\r\n".to_string(),
        "cluster" => "# Cluster\r\ncluster_enabled:0\r\n".to_string(),
        _ => keyspace(ctx),
    }
}

fn uptime_s(ctx: &Ctx<'_>) -> i64 {
    ctx.core
        .stats
        .started_ms
        .map_or(0, |start| (ctx.now - start).max(0) / 1000)
}

fn server(ctx: &Ctx<'_>) -> String {
    let uptime = uptime_s(ctx);
    format!(
        "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:locksim\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:1\r\nprocess_supervised:no\r\nrun_id:0000000000000000000000000000000000000000\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:10\r\nconfigured_hz:10\r\nlru_clock:{}\r\nexecutable:locksim\r\nconfig_file:\r\nio_threads_active:0\r\n",
        ctx.core.config.port,
        ctx.now.saturating_mul(1000),
        uptime / 86400,
        (ctx.now / 1000).rem_euclid(1 << 24),
    )
}

fn clients(ctx: &Ctx<'_>) -> String {
    let blocked = ctx
        .core
        .clients
        .values()
        .filter(|c| c.blocked.is_some() || c.postponed.is_some())
        .count();
    format!(
        "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:{blocked}\r\ntracking_clients:0\r\nclients_in_timeout_table:{blocked}\r\n",
        // `listLength(server.clients) - listLength(server.slaves)`: MONITOR clients are
        // replicas to Redis.
        ctx.core.clients.len() - ctx.core.monitors.len(),
        ctx.core.config.maxclients,
    )
}

/// `bytesToHuman`.
fn human(n: u64) -> String {
    let n = n as f64;
    let units = [
        ("B", 1.0),
        ("K", 1024.0),
        ("M", 1048576.0),
        ("G", 1073741824.0),
    ];
    for (i, (unit, size)) in units.iter().enumerate() {
        if i == units.len() - 1 || n < size * 1024.0 {
            return if i == 0 {
                format!("{n}B")
            } else {
                format!("{:.2}{unit}", n / size)
            };
        }
    }
    format!("{n}B")
}

fn memory(ctx: &Ctx<'_>) -> String {
    let dataset: u64 = ctx
        .core
        .dbs
        .iter()
        .flat_map(|db| db.keys().map(move |k| (db, k)))
        .map(|(db, k)| 64 + k.len() as u64 + db.get(k).map_or(0, |e| value_size(&e.value)))
        .sum();
    let used = 876_120 + dataset;
    let scripts: u64 = ctx.core.scripts.values().map(|b| b.len() as u64 + 40).sum();
    let mut s = String::from("# Memory\r\n");
    let _ = write!(
        s,
        "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{used}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{used}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:100.00%\r\nused_memory_overhead:876120\r\nused_memory_startup:876120\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:100.00%\r\n",
        human(used),
        human(used),
        human(used),
    );
    let _ = write!(
        s,
        "allocator_allocated:{used}\r\nallocator_active:{used}\r\nallocator_resident:{used}\r\ntotal_system_memory:0\r\ntotal_system_memory_human:0B\r\nused_memory_lua:33792\r\nused_memory_vm_eval:33792\r\nused_memory_lua_human:33.00K\r\nused_memory_scripts_eval:{scripts}\r\nnumber_of_cached_scripts:{}\r\nnumber_of_functions:0\r\nnumber_of_libraries:0\r\nused_memory_vm_functions:33792\r\nused_memory_vm_total:67584\r\nused_memory_vm_total_human:66.00K\r\nused_memory_functions:200\r\nused_memory_scripts:{scripts}\r\nused_memory_scripts_human:{}\r\n",
        ctx.core.scripts.len(),
        human(scripts),
    );
    s.push_str("maxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\nallocator_frag_ratio:1.00\r\nallocator_frag_bytes:0\r\nallocator_rss_ratio:1.00\r\nallocator_rss_bytes:0\r\nrss_overhead_ratio:1.00\r\nrss_overhead_bytes:0\r\nmem_fragmentation_ratio:1.00\r\nmem_fragmentation_bytes:0\r\nmem_not_counted_for_evict:0\r\nmem_replication_backlog:0\r\nmem_total_replication_buffers:0\r\nmem_clients_slaves:0\r\nmem_clients_normal:0\r\nmem_cluster_links:0\r\nmem_aof_buffer:0\r\nmem_allocator:libc\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:0\r\nlazyfreed_objects:0\r\n");
    s
}

fn value_size(value: &crate::redis::keyspace::Value) -> u64 {
    use crate::redis::keyspace::Value;
    match value {
        Value::Str(s) => s.len() as u64,
        Value::Hash(h) => h.iter().map(|(f, v)| (f.len() + v.len() + 16) as u64).sum(),
        Value::List(l) => l.iter().map(|e| e.len() as u64 + 8).sum(),
        Value::Set(s) if s.is_intset() => 8 * s.len() as u64,
        Value::Set(s) => s.iter().map(|m| m.len() as u64 + 24).sum(),
        Value::ZSet(z) => z.iter().map(|e| e.member.len() as u64 + 24).sum(),
    }
}

fn persistence(ctx: &Ctx<'_>) -> String {
    format!(
        "# Persistence\r\nloading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\nrdb_last_bgsave_time_sec:-1\r\nrdb_current_bgsave_time_sec:-1\r\nrdb_saves:0\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:0\r\nrdb_last_load_keys_loaded:0\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\naof_rewrites_consecutive_failures:0\r\naof_last_write_status:ok\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
        ctx.core.stats.started_ms.unwrap_or(ctx.now) / 1000
    )
}

fn stats(ctx: &Ctx<'_>) -> String {
    let st = &ctx.core.stats;
    let errors: u64 = st.errors.values().sum();
    let channels = ctx.core.channels.len();
    let patterns = ctx.core.patterns.len();
    format!(
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:0\r\ntotal_net_output_bytes:0\r\ntotal_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:0.00\r\ninstantaneous_output_kbps:0.00\r\ninstantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\nrejected_connections:0\r\nsync_full:0\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\nexpired_keys:{}\r\nexpired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\nexpire_cycle_cpu_milliseconds:0\r\nevicted_keys:0\r\nevicted_clients:0\r\ntotal_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\nkeyspace_hits:0\r\nkeyspace_misses:0\r\npubsub_channels:{channels}\r\npubsub_patterns:{patterns}\r\npubsubshard_channels:0\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\nmigrate_cached_sockets:0\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:0\r\ntracking_total_items:0\r\ntracking_total_prefixes:0\r\nunexpected_error_replies:0\r\ntotal_error_replies:{errors}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:0\r\ntotal_writes_processed:0\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\nreply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\n",
        st.connections_received, st.commands_processed, st.expired_keys,
    )
}

/// The `# Replication` section (`genRedisInfoString`).
fn replication(ctx: &Ctx<'_>) -> String {
    let repl = &ctx.core.repl;
    let mut s = String::from("# Replication\r\n");
    match &ctx.core.role {
        Role::Master => s.push_str("role:master\r\n"),
        Role::Replica {
            master_host,
            master_port,
        } => {
            s.push_str("role:slave\r\n");
            s.push_str(&format!(
                "master_host:{master_host}\r\nmaster_port:{master_port}\r\n"
            ));
            s.push_str(&format!(
                "master_link_status:{}\r\n",
                if repl.master_link_up { "up" } else { "down" }
            ));
            s.push_str(&format!(
                "master_last_io_seconds_ago:{}\r\n",
                repl.master_last_io_seconds_ago
            ));
            s.push_str("master_sync_in_progress:0\r\n");
            s.push_str(&format!(
                "slave_read_repl_offset:{}\r\n",
                repl.slave_repl_offset
            ));
            s.push_str(&format!("slave_repl_offset:{}\r\n", repl.slave_repl_offset));
            if !repl.master_link_up {
                s.push_str("master_link_down_since_seconds:-1\r\n");
            }
            s.push_str("slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n");
        }
    }
    s.push_str(&format!("connected_slaves:{}\r\n", repl.replicas.len()));
    for (i, r) in repl.replicas.iter().enumerate() {
        s.push_str(&format!(
            "slave{i}:ip={},port={},state=online,offset={},lag={}\r\n",
            r.ip, r.port, r.offset, r.lag
        ));
    }
    let active = !repl.replicas.is_empty() || matches!(ctx.core.role, Role::Replica { .. });
    s.push_str("master_failover_state:no-failover\r\n");
    s.push_str(&format!("master_replid:{}\r\n", repl.master_replid));
    s.push_str("master_replid2:0000000000000000000000000000000000000000\r\n");
    s.push_str(&format!(
        "master_repl_offset:{}\r\n",
        repl.master_repl_offset
    ));
    s.push_str("second_repl_offset:-1\r\n");
    s.push_str(&format!("repl_backlog_active:{}\r\n", i64::from(active)));
    s.push_str("repl_backlog_size:1048576\r\n");
    s.push_str(&format!(
        "repl_backlog_first_byte_offset:{}\r\n",
        i64::from(active)
    ));
    s.push_str(&format!(
        "repl_backlog_histlen:{}\r\n",
        if active { repl.master_repl_offset } else { 0 }
    ));
    s
}

/// `cmdstat_<name>:calls=...` in command-name order (Redis: its command table's hash order).
fn commandstats(ctx: &Ctx<'_>) -> String {
    let mut s = String::from("# Commandstats\r\n");
    for (name, calls) in &ctx.core.stats.calls {
        let _ = write!(
            s,
            "cmdstat_{name}:calls={calls},usec=0,usec_per_call=0.00,rejected_calls=0,failed_calls=0\r\n"
        );
    }
    s
}

/// `errorstat_<CODE>:count=n`, by code.
fn errorstats(ctx: &Ctx<'_>) -> String {
    let mut s = String::from("# Errorstats\r\n");
    for (code, count) in &ctx.core.stats.errors {
        let _ = write!(s, "errorstat_{code}:count={count}\r\n");
    }
    s
}

fn keyspace(ctx: &Ctx<'_>) -> String {
    let mut s = String::from("# Keyspace\r\n");
    for (i, db) in ctx.core.dbs.iter().enumerate() {
        if !db.is_empty() {
            let _ = write!(
                s,
                "db{i}:keys={},expires={},avg_ttl=0\r\n",
                db.len(),
                db.volatile_len()
            );
        }
    }
    s
}
