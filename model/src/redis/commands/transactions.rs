//! MULTI, EXEC, DISCARD, WATCH, UNWATCH (`multi.c`). Queueing itself happens in
//! `processCommand` (server.rs): a command after MULTI answers `+QUEUED` and runs at EXEC; a
//! command rejected while queueing makes EXEC answer EXECABORT; a WATCHed key written by anyone
//! makes EXEC answer the null array.

use super::lookup;
use std::borrow::Cow;

use crate::redis::client::{MultiState, WatchedKey};
use crate::redis::reply::Reply;
use crate::redis::server::{ClientId, Outcome, RedisServer};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r)
}

pub fn multi(server: &mut RedisServer, client: ClientId, _now: i64, _argv: &[Vec<u8>]) -> Outcome {
    let state = server.core.clients.entry(client).or_default();
    if state.multi.is_some() {
        return reply(Reply::error("ERR MULTI calls can not be nested"));
    }
    state.multi = Some(MultiState::default());
    reply(Reply::ok())
}

pub fn discard(
    server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    if server
        .core
        .clients
        .get(&client)
        .is_none_or(|c| c.multi.is_none())
    {
        return reply(Reply::error("ERR DISCARD without MULTI"));
    }
    server.discard_transaction(client);
    reply(Reply::ok())
}

/// `execCommand`: the queued commands run one after another with nothing in between, blocking
/// commands as if timed out; their effects are propagated as one MULTI/EXEC.
pub fn exec(server: &mut RedisServer, client: ClientId, now: i64, _argv: &[Vec<u8>]) -> Outcome {
    let Some(state) = server.core.clients.get(&client) else {
        return reply(Reply::error("ERR EXEC without MULTI"));
    };
    let Some(multi) = state.multi.clone() else {
        return reply(Reply::error("ERR EXEC without MULTI"));
    };
    let watched_expired = state
        .watched
        .iter()
        .any(|w| !w.expired && server.core.dbs[w.db].is_expired(&w.key, now));
    let dirty_cas = state.dirty_cas || watched_expired;
    server.discard_transaction(client);
    if multi.dirty_exec {
        return reply(Reply::error(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    if dirty_cas {
        return reply(Reply::NilArray);
    }
    let mut replies = Vec::with_capacity(multi.commands.len());
    for argv in multi.commands {
        let Some(spec) = lookup(&argv) else { continue };
        server.core.in_exec = true;
        let outcome = server.call(spec, client, now, Cow::Owned(argv), true);
        server.core.in_exec = false;
        replies.push(match outcome {
            Outcome::Reply(r) | Outcome::Close(r) => r,
            // WAIT inside a transaction answers at once (`waitCommand` in MULTI).
            Outcome::Wait { .. } => Reply::Integer(0),
            Outcome::Blocked => Reply::NilArray,
        });
    }
    reply(Reply::Array(replies))
}

/// WATCH key [key ...]: remembers each key (and whether it is already logically expired).
pub fn watch(server: &mut RedisServer, client: ClientId, now: i64, argv: &[Vec<u8>]) -> Outcome {
    let Some(state) = server.core.clients.get(&client) else {
        return reply(Reply::ok());
    };
    if state.multi.is_some() {
        return reply(Reply::error("ERR WATCH inside MULTI is not allowed"));
    }
    if state.dirty_cas {
        return reply(Reply::ok());
    }
    let db = state.db;
    for key in &argv[1..] {
        let expired = server.core.dbs[db].is_expired(key, now);
        let Some(state) = server.core.clients.get_mut(&client) else {
            break;
        };
        if state.watched.iter().any(|w| w.db == db && w.key == *key) {
            continue;
        }
        state.watched.push(WatchedKey {
            db,
            key: key.clone(),
            expired,
        });
        server
            .core
            .watched_keys
            .entry((db, key.clone()))
            .or_default()
            .push(client);
    }
    reply(Reply::ok())
}

pub fn unwatch(
    server: &mut RedisServer,
    client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    let Some(state) = server.core.clients.get_mut(&client) else {
        return reply(Reply::ok());
    };
    state.dirty_cas = false;
    let watched = std::mem::take(&mut state.watched);
    for w in &watched {
        server.core.unwatch(client, w);
    }
    reply(Reply::ok())
}
