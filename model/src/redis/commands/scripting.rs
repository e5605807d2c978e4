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
        shebang(body).map_err(|e| Reply::Error(format!("ERR {e}")))?;
        let sha = sha1_hex(body);
        self.engine()
            .create_function(&sha, body)
            .map_err(Reply::Error)?;
        // Every EVAL comes here: the body is copied only the first time (same sha1, same body).
        if !self.core.scripts.contains_key(&sha) {
            self.core.scripts.insert(sha.clone(), body.to_vec());
        }
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
        let read_only = self
            .core
            .scripts
            .get(sha)
            .and_then(|body| shebang(body).ok().flatten())
            .is_some_and(|flags| flags.no_writes);
        self.engine();
        let RedisServer { core, lua, .. } = self;
        let engine = lua.as_mut().expect("engine created above");
        engine.run(sha, keys, args, &mut |cargv| {
            core.call_from_script(client, now, cargv, read_only)
        })
    }
}

/// The flags of a `#!lua flags=...` shebang line (Redis 7.0).
pub(crate) struct ShebangFlags {
    pub no_writes: bool,
}

/// `evalExtractShebangFlags`: `Ok(None)` without a shebang (compatibility mode), the flags, or
/// the error text.
pub(crate) fn shebang(body: &[u8]) -> Result<Option<ShebangFlags>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".to_string());
    };
    let parts = match crate::redis::resp::split_args(&body[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err("Invalid engine in script shebang".to_string()),
    };
    if parts[0] != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            super::lossy(&parts[0])
        ));
    }
    let mut flags = ShebangFlags { no_writes: false };
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                super::lossy(part)
            ));
        };
        for flag in list.split(|&b| b == b',') {
            match flag {
                b"no-writes" => flags.no_writes = true,
                b"allow-oom" | b"allow-stale" | b"no-cluster" | b"allow-cross-slot-keys" => {}
                _ => {
                    return Err(format!(
                        "Unexpected flag in script shebang: {}",
                        super::lossy(flag)
                    ));
                }
            }
        }
    }
    Ok(Some(flags))
}

/// A script declared with a shebang and without `no-writes` is a write command: refused on a
/// replica before it runs (`evalGetCommandFlags`).
fn refused_on_replica(server: &RedisServer, body: &[u8]) -> bool {
    matches!(server.core.role, crate::redis::server::Role::Replica { .. })
        && matches!(shebang(body), Ok(Some(ShebangFlags { no_writes: false })))
}

fn readonly_error() -> Outcome {
    reply(Reply::error(
        "READONLY You can't write against a read only replica.",
    ))
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
    if refused_on_replica(server, &argv[1]) {
        return readonly_error();
    }
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
    let Some(body) = server.core.scripts.get(&sha) else {
        return noscript();
    };
    if refused_on_replica(server, body) {
        return readonly_error();
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
