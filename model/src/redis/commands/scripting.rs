//! EVAL, EVALSHA and SCRIPT (`eval.c`).

use super::{is_opt, parse_i64};
use crate::redis::lua::{LuaEngine, sha1_hex};
use crate::redis::reply::Reply;
use crate::redis::server::{ClientId, Outcome, RedisServer};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r)
}

impl RedisServer {
    /// The Lua state, created on first use and after SCRIPT FLUSH (`scriptingInit`).
    pub(crate) fn engine(&mut self) -> &mut LuaEngine {
        let rand48 = self.rand48.clone();
        self.lua
            .get_or_insert_with(|| LuaEngine::new(rand48).expect("Lua state"))
    }

    /// `luaCreateFunction`: compile and cache a body; the sha1 or the error reply.
    pub(crate) fn create_script(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = sha1_hex(body);
        self.engine()
            .create_function(&sha, body)
            .map_err(Reply::Error)?;
        self.core.scripts.insert(sha.clone(), body.to_vec());
        Ok(sha)
    }

    /// `evalGenericCommand` after the script is known: run it with KEYS/ARGV split at numkeys.
    fn run_script(
        &mut self,
        client: ClientId,
        now: i64,
        sha: &str,
        numkeys: usize,
        argv: &[Vec<u8>],
    ) -> Reply {
        let keys = &argv[3..3 + numkeys];
        let args = &argv[3 + numkeys..];
        self.engine();
        let RedisServer { core, lua, .. } = self;
        let engine = lua.as_mut().expect("engine created above");
        engine.run(sha, keys, args, &mut |cargv| {
            core.call_from_script(client, now, cargv)
        })
    }
}

/// The numkeys argument of EVAL/EVALSHA.
fn numkeys(argv: &[Vec<u8>]) -> Result<usize, Reply> {
    let n = parse_i64(&argv[2])?;
    if n > argv.len() as i64 - 3 {
        return Err(Reply::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(Reply::error("ERR Number of keys can't be negative"));
    }
    Ok(n as usize)
}

pub fn eval(server: &mut RedisServer, client: ClientId, now: i64, argv: &[Vec<u8>]) -> Outcome {
    let n = match numkeys(argv) {
        Ok(n) => n,
        Err(e) => return reply(e),
    };
    let sha = match server.create_script(&argv[1]) {
        Ok(sha) => sha,
        Err(e) => return reply(e),
    };
    reply(server.run_script(client, now, &sha, n, argv))
}

pub fn evalsha(server: &mut RedisServer, client: ClientId, now: i64, argv: &[Vec<u8>]) -> Outcome {
    let noscript = || {
        reply(Reply::error(
            "NOSCRIPT No matching script. Please use EVAL.",
        ))
    };
    if argv[1].len() != 40 {
        return noscript();
    }
    let n = match numkeys(argv) {
        Ok(n) => n,
        Err(e) => return reply(e),
    };
    let sha = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
    if !server.core.scripts.contains_key(&sha) {
        return noscript();
    }
    if !server.engine().has_function(&sha) {
        let body = server.core.scripts[&sha].clone();
        if let Err(e) = server.create_script(&body) {
            return reply(e);
        }
    }
    reply(server.run_script(client, now, &sha, n, argv))
}

pub fn script_load(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    match server.create_script(&argv[2]) {
        Ok(sha) => reply(Reply::Bulk(sha.into_bytes())),
        Err(e) => reply(e),
    }
}

pub fn script_exists(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let found = argv[2..]
        .iter()
        .map(|sha| {
            let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
            Reply::Integer(i64::from(server.core.scripts.contains_key(&sha)))
        })
        .collect();
    reply(Reply::Array(found))
}

/// SCRIPT FLUSH [ASYNC|SYNC]: empties the cache and recreates the Lua state (`scriptingReset`).
pub fn script_flush(
    server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    let ok = argv.len() == 2
        || (argv.len() == 3 && (is_opt(&argv[2], "sync") || is_opt(&argv[2], "async")));
    if !ok {
        return reply(Reply::error(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    server.core.scripts.clear();
    server.lua = None;
    reply(Reply::ok())
}

/// SCRIPT KILL: scripts here always run to completion within one command.
pub fn script_kill(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::error("NOTBUSY No scripts in execution right now."))
}

/// The SCRIPT container itself is never run: a known subcommand or an error is found first.
pub fn script_help(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(super::syntax_error())
}
