//! Connection and server commands: PING, ECHO, TIME, INFO, ROLE (`server.c`,
//! `replication.c`) and WAIT.

use super::{lossy, parse_i64};
use crate::redis::reply::Reply;
use crate::redis::server::{ClientId, Ctx, Outcome, RedisServer, Role};

/// PING [message]; in a RESP2 subscribed context the reply is `["pong", message]`.
pub fn ping(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if argv.len() > 2 {
        return Reply::error("ERR wrong number of arguments for 'ping' command");
    }
    let subscribed = ctx
        .core
        .clients
        .get(&ctx.client)
        .is_some_and(|c| !c.channels.is_empty());
    if subscribed {
        return Reply::Array(vec![
            Reply::bulk("pong"),
            Reply::bulk(argv.get(1).map_or(&b""[..], |m| m)),
        ]);
    }
    match argv.get(1) {
        Some(msg) => Reply::Bulk(msg.clone()),
        None => Reply::Status("PONG".to_string()),
    }
}

pub fn echo(_ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    Reply::Bulk(argv[1].clone())
}

/// TIME: this node's wall clock.
pub fn time(ctx: &mut Ctx<'_>, _argv: &[Vec<u8>]) -> Reply {
    let secs = ctx.now.div_euclid(1000);
    let micros = ctx.now.rem_euclid(1000) * 1000;
    Reply::Array(vec![
        Reply::bulk(secs.to_string()),
        Reply::bulk(micros.to_string()),
    ])
}

/// WAIT numreplicas timeout: validated here, answered by the host (`waitCommand`).
pub fn wait(server: &mut RedisServer, _client: ClientId, _now: i64, argv: &[Vec<u8>]) -> Outcome {
    if matches!(server.core.role, Role::Replica { .. }) {
        return Outcome::Reply(Reply::error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let numreplicas = match parse_i64(&argv[1]) {
        Ok(n) => n,
        Err(e) => return Outcome::Reply(e),
    };
    let timeout_ms = match crate::redis::number::string2ll(&argv[2]) {
        None => {
            return Outcome::Reply(Reply::error(
                "ERR timeout is not an integer or out of range",
            ));
        }
        Some(t) if t < 0 => return Outcome::Reply(Reply::error("ERR timeout is negative")),
        Some(t) => t,
    };
    Outcome::Wait {
        numreplicas,
        timeout_ms,
    }
}

/// ROLE (`roleCommand`).
pub fn role(ctx: &mut Ctx<'_>, _argv: &[Vec<u8>]) -> Reply {
    let repl = &ctx.core.repl;
    match &ctx.core.role {
        Role::Master => Reply::Array(vec![
            Reply::bulk("master"),
            Reply::Integer(repl.master_repl_offset),
            Reply::Array(
                repl.replicas
                    .iter()
                    .map(|r| {
                        Reply::Array(vec![
                            Reply::bulk(&r.ip),
                            Reply::bulk(r.port.to_string()),
                            Reply::bulk(r.offset.to_string()),
                        ])
                    })
                    .collect(),
            ),
        ]),
        Role::Replica {
            master_host,
            master_port,
        } => Reply::Array(vec![
            Reply::bulk("slave"),
            Reply::bulk(master_host),
            Reply::Integer(i64::from(*master_port)),
            Reply::bulk(if repl.master_link_up {
                "connected"
            } else {
                "connect"
            }),
            Reply::Integer(if repl.master_link_up {
                repl.slave_repl_offset
            } else {
                -1
            }),
        ]),
    }
}

/// The `# Replication` section (`genRedisInfoString`).
fn replication_section(ctx: &Ctx<'_>) -> String {
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

fn server_section(ctx: &Ctx<'_>) -> String {
    format!(
        "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\narch_bits:64\r\nprocess_id:1\r\ntcp_port:6379\r\nhz:10\r\nconfigured_hz:10\r\nexecutable:locksim\r\nserver_time_usec:{}\r\n",
        ctx.now.saturating_mul(1000)
    )
}

fn clients_section(ctx: &Ctx<'_>) -> String {
    format!(
        "# Clients\r\nconnected_clients:{}\r\n",
        ctx.core.clients.len()
    )
}

fn keyspace_section(ctx: &Ctx<'_>) -> String {
    let mut s = String::from("# Keyspace\r\n");
    if !ctx.core.db.is_empty() {
        s.push_str(&format!(
            "db0:keys={},expires={},avg_ttl=0\r\n",
            ctx.core.db.len(),
            ctx.core.db.volatile_len()
        ));
    }
    s
}

/// INFO [section ...]: the sections implemented are server, clients, replication and keyspace;
/// `default`, `all` and `everything` print those four. Unknown sections print nothing.
pub fn info(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    type Section = fn(&Ctx<'_>) -> String;
    let sections: [(&str, Section); 4] = [
        ("server", server_section),
        ("clients", clients_section),
        ("replication", replication_section),
        ("keyspace", keyspace_section),
    ];
    let wanted: Vec<String> = argv[1..]
        .iter()
        .map(|a| lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == "default" || w == "all" || w == "everything");
    let mut parts = Vec::new();
    for (name, section) in sections {
        if all || wanted.iter().any(|w| w == name) {
            parts.push(section(ctx));
        }
    }
    Reply::Bulk(parts.join("\r\n").into_bytes())
}
