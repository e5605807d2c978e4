//! MONITOR (`server.c` `monitorCommand`, `replication.c` `replicationFeedMonitors`) and CLIENT
//! PAUSE / UNPAUSE (`networking.c` `clientCommand`, `pauseClients`, `unpauseClients`), as
//! Redis 7.0.15 has them. The pause itself acts in `processCommand` (server.rs), in lazy and
//! active expiry, and ends at the first cron or expired-key lookup after its end time.

use crate::redis::reply::Reply;
use crate::redis::server::{ClientId, ClientPause, Outcome, RedisServer};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r)
}

/// MONITOR: the client receives every command the server runs from now on, one status line
/// each. Refused inside EXEC (`CLIENT_DENY_BLOCKING`, server.c:6081); a client that already
/// monitors gets no reply at all (server.c:6090).
pub fn monitor(
    server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    if server.core.in_exec {
        return reply(Reply::error(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    let Some(state) = server.core.clients.get_mut(&client) else {
        return reply(Reply::ok());
    };
    if state.monitor {
        return reply(Reply::Sequence(Vec::new()));
    }
    state.monitor = true;
    server.core.monitors.push(client);
    reply(Reply::ok())
}

/// CLIENT PAUSE timeout [WRITE|ALL] (networking.c:3214-3235): the mode is checked before the
/// timeout; a timeout of 0 pauses nothing (its end is already past).
pub fn client_pause(
    server: &mut RedisServer,
    _client: ClientId,
    now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    if argv.len() > 4 {
        return reply(super::connection::subcommand_syntax_error(argv));
    }
    let all = match argv.get(3) {
        None => true,
        Some(mode) if mode.eq_ignore_ascii_case(b"write") => false,
        Some(mode) if mode.eq_ignore_ascii_case(b"all") => true,
        Some(_) => {
            return reply(Reply::error("ERR CLIENT PAUSE mode must be WRITE or ALL"));
        }
    };
    // `getTimeoutFromObjectOrReply(..., UNIT_MILLISECONDS)` (timeout.c:166-192).
    let Some(timeout_ms) = crate::redis::number::string2ll(&argv[2]) else {
        return reply(Reply::error(
            "ERR timeout is not an integer or out of range",
        ));
    };
    if timeout_ms < 0 {
        return reply(Reply::error("ERR timeout is negative"));
    }
    let end_ms = if timeout_ms > 0 {
        timeout_ms.wrapping_add(now)
    } else {
        0
    };
    server.core.pause_clients(ClientPause { all, end_ms }, now);
    reply(Reply::ok())
}

/// CLIENT UNPAUSE: ends the pause; the clients it held run their commands.
pub fn client_unpause(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    server.core.unpause_clients();
    reply(Reply::ok())
}

/// Who sent a command, as MONITOR shows it.
pub(crate) enum Sender<'a> {
    /// A script's `redis.call` (`[0 lua]`).
    Lua,
    Client(&'a crate::redis::client::ClientAddr),
}

/// One MONITOR line without its `+` and CRLF (`replicationFeedMonitors`, replication.c:562-601):
/// `seconds.micros [db who] "arg" "arg"`, each argument quoted by `sdscatrepr`.
pub(crate) fn monitor_line(now_us: i64, db: usize, sender: Sender<'_>, argv: &[Vec<u8>]) -> String {
    let mut line = format!(
        "{}.{:06} ",
        now_us.div_euclid(1_000_000),
        now_us.rem_euclid(1_000_000)
    );
    match sender {
        Sender::Lua => line.push_str(&format!("[{db} lua] ")),
        Sender::Client(addr) => match &addr.unix_socket {
            Some(path) => line.push_str(&format!("[{db} unix:{path}] ")),
            None => line.push_str(&format!("[{db} {}] ", addr.peer)),
        },
    }
    for (i, arg) in argv.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(&repr(arg));
    }
    line
}

/// `sdscatrepr` (sds.c:988-1011): quoted, with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`
/// escaped, printable ASCII as is, every other byte as `\xhh`.
fn repr(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::client::ClientAddr;

    #[test]
    fn lines_quote_as_sdscatrepr() {
        let addr = ClientAddr {
            peer: "127.0.0.1:5000".into(),
            ..ClientAddr::default()
        };
        let argv = vec![
            b"set".to_vec(),
            b"k".to_vec(),
            b"a b\n\x01\"\\\xff".to_vec(),
        ];
        assert_eq!(
            monitor_line(1_700_000_000_000_042, 0, Sender::Client(&addr), &argv),
            "1700000000.000042 [0 127.0.0.1:5000] \"set\" \"k\" \"a b\\n\\x01\\\"\\\\\\xff\""
        );
        assert_eq!(
            monitor_line(5_000_000, 2, Sender::Lua, &[b"get".to_vec()]),
            "5.000000 [2 lua] \"get\""
        );
    }
}
