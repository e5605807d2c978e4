//! CONFIG (`config.c`) and COMMAND (`server.c` `commandCommand` and friends).

use super::connection::help_reply;
use super::{all, glob_match, syntax_error};
use crate::redis::reply::Reply;
use crate::redis::server::{ClientId, Outcome, RedisServer};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r)
}

/// One parameter: its name, its alias (`lua-time-limit` is `busy-reply-threshold`) and how its
/// value is read.
struct Param {
    name: &'static str,
    alias: Option<&'static str>,
    value: fn(&RedisServer) -> String,
}

/// The parameters a client or an operator commonly reads, in Redis's `configs` table order.
const PARAMS: &[Param] = &[
    Param {
        name: "port",
        alias: None,
        value: |s| s.core.config.port.to_string(),
    },
    Param {
        name: "databases",
        alias: None,
        value: |s| s.core.dbs.len().to_string(),
    },
    Param {
        name: "maxclients",
        alias: None,
        value: |s| s.core.config.maxclients.to_string(),
    },
    Param {
        name: "maxmemory",
        alias: None,
        value: |_| "0".to_string(),
    },
    Param {
        name: "maxmemory-policy",
        alias: None,
        value: |_| "noeviction".to_string(),
    },
    Param {
        name: "timeout",
        alias: None,
        value: |_| "0".to_string(),
    },
    Param {
        name: "save",
        alias: None,
        value: |_| String::new(),
    },
    Param {
        name: "appendonly",
        alias: None,
        value: |_| "no".to_string(),
    },
    Param {
        name: "appendfsync",
        alias: None,
        value: |_| "everysec".to_string(),
    },
    Param {
        name: "requirepass",
        alias: None,
        value: |s| {
            s.core
                .config
                .requirepass
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default()
        },
    },
    Param {
        name: "busy-reply-threshold",
        alias: Some("lua-time-limit"),
        value: |s| s.core.config.lua_time_limit_ms.to_string(),
    },
    Param {
        name: "notify-keyspace-events",
        alias: None,
        value: |_| String::new(),
    },
    Param {
        name: "cluster-enabled",
        alias: None,
        value: |_| "no".to_string(),
    },
    Param {
        name: "replica-read-only",
        alias: Some("slave-read-only"),
        value: |_| "yes".to_string(),
    },
    Param {
        name: "min-replicas-to-write",
        alias: Some("min-slaves-to-write"),
        value: |_| "0".to_string(),
    },
    Param {
        name: "hz",
        alias: None,
        value: |_| "10".to_string(),
    },
    Param {
        name: "lazyfree-lazy-expire",
        alias: None,
        value: |_| "no".to_string(),
    },
    Param {
        name: "proto-max-bulk-len",
        alias: None,
        value: |_| crate::redis::resp::PROTO_MAX_BULK_LEN.to_string(),
    },
];

/// CONFIG GET parameter [parameter ...]: exact names (any case, echoed as given) or glob
/// patterns (canonical names), each parameter once (`configGetCommand`).
pub fn config_get(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let mut matches: Vec<(Vec<u8>, &Param)> = Vec::new();
    for arg in &argv[2..] {
        let is_pattern = arg.iter().any(|b| matches!(b, b'[' | b'*' | b'?'));
        if !is_pattern {
            let found = PARAMS.iter().find(|p| {
                p.name.as_bytes().eq_ignore_ascii_case(arg)
                    || p.alias
                        .is_some_and(|a| a.as_bytes().eq_ignore_ascii_case(arg))
            });
            if let Some(param) = found
                && !matches.iter().any(|(_, p)| std::ptr::eq(*p, param))
            {
                matches.push((arg.clone(), param));
            }
            continue;
        }
        for param in PARAMS {
            if matches.iter().any(|(_, p)| std::ptr::eq(*p, param)) {
                continue;
            }
            if glob_match(arg, param.name.as_bytes(), true) {
                matches.push((param.name.as_bytes().to_vec(), param));
            }
        }
    }
    reply(Reply::Map(
        matches
            .into_iter()
            .map(|(name, param)| {
                (
                    Reply::Bulk(name),
                    Reply::Bulk((param.value)(server).into_bytes()),
                )
            })
            .collect(),
    ))
}

/// CONFIG SET parameter value [parameter value ...]: the password (`requirepass`) and
/// `lua-time-limit` (read by the host's script monitor). Other parameters are not modelled.
pub fn config_set(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    if argv.len() % 2 == 1 {
        return reply(syntax_error());
    }
    let mut changes = Vec::new();
    for pair in argv[2..].chunks(2) {
        let (name, value) = (&pair[0], &pair[1]);
        if name.eq_ignore_ascii_case(b"requirepass") {
            changes.push((0, value.clone()));
        } else if name.eq_ignore_ascii_case(b"busy-reply-threshold")
            || name.eq_ignore_ascii_case(b"lua-time-limit")
        {
            match crate::redis::number::string2ll(value) {
                Some(v) if v >= 0 => changes.push((1, value.clone())),
                _ => {
                    let mut text =
                        b"ERR CONFIG SET failed (possibly related to argument '".to_vec();
                    text.extend_from_slice(name);
                    text.extend_from_slice(b"') - argument couldn't be parsed into an integer");
                    return reply(Reply::Error(text));
                }
            }
        } else {
            let mut text = b"ERR CONFIG SET of '".to_vec();
            text.extend_from_slice(name);
            text.extend_from_slice(b"' is not supported by locksim");
            return reply(Reply::Error(text));
        }
    }
    for (which, value) in changes {
        if which == 0 {
            server.core.config.requirepass = (!value.is_empty()).then_some(value);
        } else {
            server.core.config.lua_time_limit_ms =
                String::from_utf8_lossy(&value).parse().unwrap_or(5000);
        }
    }
    reply(Reply::ok())
}

/// CONFIG RESETSTAT: zeroes the counters INFO prints.
pub fn config_resetstat(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    let started = server.core.stats.started_ms;
    server.core.stats = Default::default();
    server.core.stats.started_ms = started;
    reply(Reply::ok())
}

/// CONFIG REWRITE without a configuration file (`rewriteConfig`).
pub fn config_rewrite(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::error(
        "ERR The server is running without a config file",
    ))
}

const CONFIG_HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

pub fn config_help(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    reply(help_reply(&argv[0], CONFIG_HELP))
}

/// COMMAND: the info of every command.
pub fn command(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::Array(
        all()
            .filter_map(|c| super::docs::command_info(c.full_name))
            .collect(),
    ))
}

/// COMMAND COUNT: the commands this server implements (Redis 7.0 has 240).
pub fn command_count(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::Integer(all().count() as i64))
}

/// COMMAND INFO [name ...]: nil for a command it does not have.
pub fn command_info(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    if argv.len() == 2 {
        return command(_server, _client, _now, argv);
    }
    reply(Reply::Array(
        argv[2..]
            .iter()
            .map(|name| {
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                known(&name)
                    .and_then(super::docs::command_info)
                    .unwrap_or(Reply::Nil)
            })
            .collect(),
    ))
}

/// The full name of an implemented command or subcommand (`get`, `client|list`).
fn known(name: &str) -> Option<&'static str> {
    all().find_map(|c| {
        if c.full_name == name {
            Some(c.full_name)
        } else {
            c.subcommands
                .iter()
                .find(|s| s.full_name == name)
                .map(|s| s.full_name)
        }
    })
}

/// COMMAND DOCS [name ...]: a map of name → docs; unknown names are left out.
pub fn command_docs(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let names: Vec<&'static str> = if argv.len() == 2 {
        all().map(|c| c.full_name).collect()
    } else {
        argv[2..]
            .iter()
            .filter_map(|n| known(&String::from_utf8_lossy(n).to_ascii_lowercase()))
            .collect()
    };
    reply(Reply::Map(
        names
            .into_iter()
            .filter_map(|n| super::docs::command_docs(n).map(|d| (Reply::bulk(n), d)))
            .collect(),
    ))
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern].
pub fn command_list(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let names = all().flat_map(|c| {
        std::iter::once(c.full_name).chain(c.subcommands.iter().map(|s| s.full_name))
    });
    match argv.len() {
        2 => reply(Reply::Array(names.map(Reply::bulk).collect())),
        5 if argv[2].eq_ignore_ascii_case(b"filterby") => {
            if argv[3].eq_ignore_ascii_case(b"pattern") {
                reply(Reply::Array(
                    names
                        .filter(|n| glob_match(&argv[4], n.as_bytes(), true))
                        .map(Reply::bulk)
                        .collect(),
                ))
            } else if argv[3].eq_ignore_ascii_case(b"module") {
                reply(Reply::Array(vec![]))
            } else if argv[3].eq_ignore_ascii_case(b"aclcat") {
                let category = String::from_utf8_lossy(&argv[4]).to_ascii_lowercase();
                reply(Reply::Array(
                    names
                        .filter(|n| super::docs::in_category(n, &category))
                        .map(Reply::bulk)
                        .collect(),
                ))
            } else {
                reply(syntax_error())
            }
        }
        _ => reply(syntax_error()),
    }
}

const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
];

pub fn command_help(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    reply(help_reply(&argv[0], COMMAND_HELP))
}
