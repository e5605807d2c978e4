//! Connection commands (`networking.c`, `acl.c`, `db.c`): HELLO, AUTH, SELECT, QUIT, RESET and
//! CLIENT.

use super::{error_with, is_opt, parse_i64, syntax_error};
use crate::redis::client::ClientState;
use crate::redis::reply::{Protocol, Reply};
use crate::redis::server::{ClientId, Ctx, Outcome, RedisServer, Role};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r)
}

/// `ACLAuthenticateUser` for the only user, `default`: `nopass` accepts any password, otherwise
/// it must be `requirepass`.
fn authenticate(server: &mut RedisServer, client: ClientId, user: &[u8], pass: &[u8]) -> bool {
    let ok = user == b"default"
        && server
            .core
            .config
            .requirepass
            .as_ref()
            .is_none_or(|p| p == pass);
    if ok && let Some(state) = server.core.clients.get_mut(&client) {
        state.authenticated = true;
    }
    ok
}

fn wrongpass() -> Reply {
    Reply::error("WRONGPASS invalid username-password pair or user is disabled.")
}

/// AUTH [username] password (`authCommand`).
pub fn auth(server: &mut RedisServer, client: ClientId, _now: i64, argv: &[Vec<u8>]) -> Outcome {
    if argv.len() > 3 {
        return reply(syntax_error());
    }
    let (user, pass): (&[u8], &[u8]) = if argv.len() == 2 {
        if server.core.config.requirepass.is_none() {
            return reply(Reply::error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ));
        }
        (b"default", &argv[1])
    } else {
        (&argv[1], &argv[2])
    };
    if authenticate(server, client, user, pass) {
        reply(Reply::ok())
    } else {
        reply(wrongpass())
    }
}

/// `clientSetName`: printable ASCII without spaces; empty removes the name.
fn set_name(state: &mut ClientState, name: &[u8]) -> Result<(), Reply> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    state.name = name.to_vec();
    Ok(())
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]] (`helloCommand`): switches
/// the protocol and answers a map describing the server.
pub fn hello(server: &mut RedisServer, client: ClientId, _now: i64, argv: &[Vec<u8>]) -> Outcome {
    let mut version = None;
    let mut next = 1;
    if argv.len() >= 2 {
        let Some(v) = crate::redis::number::string2ll(&argv[1]) else {
            return reply(Reply::error(
                "ERR Protocol version is not an integer or out of range",
            ));
        };
        if !(2..=3).contains(&v) {
            return reply(Reply::error("NOPROTO unsupported protocol version"));
        }
        version = Some(v);
        next = 2;
    }
    let mut j = next;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is_opt(&argv[j], "auth") && more >= 2 {
            if !authenticate(server, client, &argv[j + 1], &argv[j + 2]) {
                return reply(wrongpass());
            }
            j += 3;
        } else if is_opt(&argv[j], "setname") && more >= 1 {
            let state = server.core.clients.entry(client).or_default();
            if let Err(e) = set_name(state, &argv[j + 1]) {
                return reply(e);
            }
            j += 2;
        } else {
            return reply(error_with(&[
                b"ERR Syntax error in HELLO option '",
                super::c_str(&argv[j]),
                b"'",
            ]));
        }
    }
    let state = server.core.clients.entry(client).or_default();
    if !state.authenticated {
        return reply(Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    match version {
        Some(2) => state.protocol = Protocol::Resp2,
        Some(3) => state.protocol = Protocol::Resp3,
        _ => {}
    }
    let protocol = state.protocol;
    let role = match server.core.role {
        Role::Master => "master",
        Role::Replica { .. } => "replica",
    };
    reply(hello_reply(&HelloFields {
        server: "redis",
        proto: protocol.version(),
        id: client as i64,
        mode: "standalone",
        role,
    }))
}

/// What a HELLO reply says about the server answering it.
pub struct HelloFields<'a> {
    pub server: &'a str,
    pub proto: i64,
    pub id: i64,
    pub mode: &'a str,
    pub role: &'a str,
}

/// HELLO's reply as Redis 7.0.15 builds it (`helloCommand`, `src/networking.c`): the server's
/// fields as a map, which the caller encodes in the protocol asked for. The one builder of the
/// model's servers, Sentinel and `locksim live`'s resource.
pub fn hello_reply(fields: &HelloFields<'_>) -> Reply {
    let field = |k: &str, v: Reply| (Reply::bulk(k), v);
    Reply::Map(vec![
        field("server", Reply::bulk(fields.server)),
        field("version", Reply::bulk("7.0.15")),
        field("proto", Reply::Integer(fields.proto)),
        field("id", Reply::Integer(fields.id)),
        field("mode", Reply::bulk(fields.mode)),
        field("role", Reply::bulk(fields.role)),
        field("modules", Reply::Array(Vec::new())),
    ])
}

/// SELECT index: 0 to `databases - 1` (`selectCommand`). Only the command's database changes
/// here; `call` makes it the client's (a script's SELECT stays in the script).
pub fn select(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    // `getIntFromObjectOrReply`.
    let Some(index) = crate::redis::number::string2ll(&argv[1]) else {
        return Reply::error("ERR value is not an integer or out of range");
    };
    let Ok(index) = i32::try_from(index) else {
        return Reply::error(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        );
    };
    match usize::try_from(index) {
        Ok(db) if db < ctx.core.dbs.len() => {
            ctx.db = db;
            Reply::ok()
        }
        _ => Reply::error("ERR DB index is out of range"),
    }
}

/// QUIT: OK, then the connection closes (`CLIENT_CLOSE_AFTER_REPLY`).
pub fn quit(_server: &mut RedisServer, _client: ClientId, _now: i64, _argv: &[Vec<u8>]) -> Outcome {
    Outcome::Close(Reply::ok())
}

/// RESET (`resetCommand` → `clearClientConnectionState`): leaves MULTI, unwatches, unsubscribes,
/// selects db 0, RESP2, no name, back to the default user (unauthenticated if a password is
/// required).
pub fn reset(server: &mut RedisServer, client: ClientId, _now: i64, _argv: &[Vec<u8>]) -> Outcome {
    server.discard_transaction(client);
    if let Some(blocked) = server
        .core
        .clients
        .get_mut(&client)
        .and_then(|c| c.blocked.take())
    {
        server.core.remove_blocked(client, &blocked);
    }
    let (channels, patterns) = server
        .core
        .clients
        .get_mut(&client)
        .map(|c| {
            (
                std::mem::take(&mut c.channels),
                std::mem::take(&mut c.patterns),
            )
        })
        .unwrap_or_default();
    server.core.leave_all(client, channels, patterns);
    let authenticated = server.core.config.requirepass.is_none();
    if let Some(state) = server.core.clients.get_mut(&client) {
        state.db = 0;
        state.protocol = Protocol::Resp2;
        state.name.clear();
        state.no_evict = false;
        state.authenticated = authenticated;
        // `clearClientConnectionState` leaves MONITOR mode (networking.c:1548-1554).
        state.monitor = false;
    }
    server.core.monitors.retain(|c| *c != client);
    reply(Reply::Status("RESET".to_string()))
}

pub fn client_id(
    _server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::Integer(client as i64))
}

pub fn client_setname(
    server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let state = server.core.clients.entry(client).or_default();
    match set_name(state, &argv[2]) {
        Ok(()) => reply(Reply::ok()),
        Err(e) => reply(e),
    }
}

pub fn client_getname(
    server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    let name = server
        .core
        .clients
        .get(&client)
        .map(|c| c.name.clone())
        .unwrap_or_default();
    reply(if name.is_empty() {
        Reply::Nil
    } else {
        Reply::Bulk(name)
    })
}

/// One `CLIENT LIST` line (`catClientInfoString`). Buffer and memory figures are those of an
/// idle connection of redis-server 7.0 (this server has no such buffers).
fn info_line(id: ClientId, c: &ClientState, now_ms: i64) -> String {
    let mut flags = String::new();
    if c.monitor {
        flags.push('O');
    }
    if c.subscribed() {
        flags.push('P');
    }
    if c.multi.is_some() {
        flags.push('x');
    }
    if c.blocked.is_some() || c.postponed.is_some() {
        flags.push('b');
    }
    if c.dirty_cas {
        flags.push('d');
    }
    if c.no_evict {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let secs = |ms: i64| (now_ms - ms).max(0) / 1000;
    let multi = c.multi.as_ref().map_or(-1, |m| m.commands.len() as i64);
    format!(
        "id={id} addr={} laddr={} fd=8 name={} age={} idle={} flags={flags} db={} sub={} psub={} ssub=0 multi={multi} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd={} user=default redir=-1 resp={}\n",
        c.addr.peer,
        c.addr.local,
        String::from_utf8_lossy(&c.name),
        secs(c.created_ms),
        secs(c.last_interaction_ms),
        c.db,
        c.channels.len(),
        c.patterns.len(),
        c.last_command,
        c.protocol.version(),
    )
}

pub fn client_info(
    server: &mut RedisServer,
    client: ClientId,
    now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    let state = server.core.clients.entry(client).or_default();
    reply(Reply::text(info_line(client, state, now)))
}

/// `getClientTypeByName`.
fn valid_type(name: &[u8]) -> Option<&'static str> {
    ["normal", "slave", "replica", "master", "pubsub"]
        .into_iter()
        .find(|t| is_opt(name, t))
}

fn unknown_type(name: &[u8]) -> Reply {
    error_with(&[b"ERR Unknown client type '", super::c_str(name), b"'"])
}

/// Whether a client is of a CLIENT LIST/KILL type (no replicas or masters among our clients).
fn is_type(c: &ClientState, kind: &str) -> bool {
    match kind {
        "pubsub" => c.subscribed(),
        "normal" => !c.subscribed(),
        _ => false,
    }
}

/// CLIENT LIST [TYPE type | ID id ...].
pub fn client_list(
    server: &mut RedisServer,
    _client: ClientId,
    now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let clients = &server.core.clients;
    let mut out = String::new();
    if argv.len() == 4 && is_opt(&argv[2], "type") {
        let Some(kind) = valid_type(&argv[3]) else {
            return reply(unknown_type(&argv[3]));
        };
        for (id, c) in clients.iter().filter(|(_, c)| is_type(c, kind)) {
            out.push_str(&info_line(*id, c, now));
        }
    } else if argv.len() > 3 && is_opt(&argv[2], "id") {
        for arg in &argv[3..] {
            let Some(id) = crate::redis::number::string2ll(arg) else {
                return reply(Reply::error("ERR Invalid client ID"));
            };
            if let Some(c) = u64::try_from(id).ok().and_then(|id| clients.get(&id)) {
                out.push_str(&info_line(id as u64, c, now));
            }
        }
    } else if argv.len() != 2 {
        return reply(syntax_error());
    } else {
        for (id, c) in clients {
            out.push_str(&info_line(*id, c, now));
        }
    }
    reply(Reply::text(out))
}

/// CLIENT KILL addr | CLIENT KILL [ID id] [TYPE type] [ADDR addr] [LADDR addr] [USER user]
/// [SKIPME yes|no]. The host closes the victims (`take_killed`).
pub fn client_kill(
    server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let mut addr: Option<&[u8]> = None;
    let mut laddr: Option<&[u8]> = None;
    let mut kind: Option<&str> = None;
    let mut id: Option<u64> = None;
    let mut skipme = true;
    if argv.len() == 3 {
        addr = Some(&argv[2]);
        skipme = false;
    } else {
        let mut i = 2;
        while i < argv.len() {
            let Some(value) = argv.get(i + 1) else {
                return reply(syntax_error());
            };
            if is_opt(&argv[i], "id") {
                match crate::redis::number::string2ll(value) {
                    Some(v) if v >= 1 => id = Some(v as u64),
                    _ => return reply(Reply::error("ERR client-id should be greater than 0")),
                }
            } else if is_opt(&argv[i], "type") {
                match valid_type(value) {
                    Some(k) => kind = Some(k),
                    None => return reply(unknown_type(value)),
                }
            } else if is_opt(&argv[i], "addr") {
                addr = Some(value);
            } else if is_opt(&argv[i], "laddr") {
                laddr = Some(value);
            } else if is_opt(&argv[i], "user") {
                if super::c_str(value) != b"default" {
                    return reply(error_with(&[
                        b"ERR No such user '",
                        super::c_str(value),
                        b"'",
                    ]));
                }
            } else if is_opt(&argv[i], "skipme") {
                if is_opt(value, "yes") {
                    skipme = true;
                } else if is_opt(value, "no") {
                    skipme = false;
                } else {
                    return reply(syntax_error());
                }
            } else {
                return reply(syntax_error());
            }
            i += 2;
        }
    }
    let victims: Vec<ClientId> = server
        .core
        .clients
        .iter()
        .filter(|(cid, c)| {
            addr.is_none_or(|a| c.addr.peer.as_bytes() == super::c_str(a))
                && laddr.is_none_or(|a| c.addr.local.as_bytes() == super::c_str(a))
                && kind.is_none_or(|k| is_type(c, k))
                && id.is_none_or(|i| **cid == i)
                && !(skipme && **cid == client)
        })
        .map(|(cid, _)| *cid)
        .collect();
    let killed = victims.len();
    let mut close_self = false;
    for victim in victims {
        if victim == client {
            close_self = true;
        } else {
            server.disconnect(victim);
            server.core.killed.push(victim);
        }
    }
    let answer = if argv.len() == 3 {
        if killed == 0 {
            Reply::error("ERR No such client")
        } else {
            Reply::ok()
        }
    } else {
        Reply::Integer(killed as i64)
    };
    if close_self {
        Outcome::Close(answer)
    } else {
        reply(answer)
    }
}

pub fn client_no_evict(
    server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let on = if is_opt(&argv[2], "on") {
        true
    } else if is_opt(&argv[2], "off") {
        false
    } else {
        return reply(syntax_error());
    };
    server.core.clients.entry(client).or_default().no_evict = on;
    reply(Reply::ok())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if it was blocked (and now answered), else 0.
pub fn client_unblock(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    if argv.len() > 4 {
        return reply(subcommand_syntax_error(argv));
    }
    let mut error = false;
    if argv.len() == 4 {
        if is_opt(&argv[3], "timeout") {
            error = false;
        } else if is_opt(&argv[3], "error") {
            error = true;
        } else {
            return reply(Reply::error(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ));
        }
    }
    let id = match parse_i64(&argv[2]) {
        Ok(id) => id,
        Err(e) => return reply(e),
    };
    let answer = if error {
        Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    } else {
        Reply::NilArray
    };
    let unblocked = u64::try_from(id).is_ok_and(|id| server.core.unblock(id, answer));
    reply(Reply::Integer(i64::from(unblocked)))
}

/// CLIENT REPLY ON (OFF and SKIP would silence replies; not supported).
pub fn client_reply(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    if is_opt(&argv[2], "on") {
        reply(Reply::ok())
    } else if is_opt(&argv[2], "off") || is_opt(&argv[2], "skip") {
        reply(Reply::error(
            "ERR CLIENT REPLY OFF|SKIP is not supported by locksim",
        ))
    } else {
        reply(syntax_error())
    }
}

/// CLIENT GETREDIR: -1, tracking is never on.
pub fn client_getredir(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::Integer(-1))
}

/// CLIENT TRACKINGINFO of a client without tracking.
pub fn client_trackinginfo(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::Map(vec![
        (Reply::bulk("flags"), Reply::Set(vec![Reply::bulk("off")])),
        (Reply::bulk("redirect"), Reply::Integer(-1)),
        (Reply::bulk("prefixes"), Reply::Array(vec![])),
    ]))
}

const CLIENT_HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
];

pub fn client_help(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    reply(help_reply(&argv[0], CLIENT_HELP))
}

/// `addReplyHelp`: a status line per help line between a header and the HELP footer.
pub fn help_reply(command: &[u8], lines: &[&str]) -> Reply {
    let mut out = vec![Reply::Status(format!(
        "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        String::from_utf8_lossy(command).to_uppercase()
    ))];
    out.extend(lines.iter().map(|l| Reply::Status(l.to_string())));
    out.push(Reply::Status("HELP".to_string()));
    out.push(Reply::Status("    Prints this help.".to_string()));
    Reply::Array(out)
}

/// `addReplySubcommandSyntaxError`.
pub fn subcommand_syntax_error(argv: &[Vec<u8>]) -> Reply {
    let mut text = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    text.extend_from_slice(&argv[1][..argv[1].len().min(128)]);
    text.extend_from_slice(b"'. Try ");
    text.extend_from_slice(&argv[0].to_ascii_uppercase());
    text.extend_from_slice(b" HELP.");
    Reply::Error(text)
}
