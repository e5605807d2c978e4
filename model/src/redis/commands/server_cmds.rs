//! Server commands: PING, ECHO, TIME, ROLE (`server.c`, `replication.c`) and WAIT.

use super::parse_i64;
use crate::redis::reply::{Protocol, Reply};
use crate::redis::server::{ClientId, Ctx, Outcome, RedisServer, Role};

/// PING [message]; in a RESP2 subscribed context the reply is `["pong", message]`.
pub fn ping(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if argv.len() > 2 {
        return Reply::error("ERR wrong number of arguments for 'ping' command");
    }
    let subscribed = ctx.protocol == Protocol::Resp2
        && ctx
            .core
            .clients
            .get(&ctx.client)
            .is_some_and(|c| c.subscribed());
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
