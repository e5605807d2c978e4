//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (`eval.c`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::{CommandSpec, flags, is_opt, parse_i64};
use crate::redis::lua::{EngineConfig, LuaEngine, sha1_hex};
use crate::redis::reply::{Protocol, Reply};
use crate::redis::server::{ClientId, Outcome, RedisServer, ScriptClient};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r)
}

impl RedisServer {
    /// The Lua state, created on first use and after SCRIPT FLUSH (`scriptingInit`).
    pub(crate) fn engine(&mut self) -> Result<&mut LuaEngine, Reply> {
        if self.lua.is_none() {
            let engine = LuaEngine::new(EngineConfig {
                rand48: self.rand48.clone(),
                memory_limit_bytes: self.core.config.lua_memory_limit_bytes,
                monitor: self.monitor.clone(),
                wrote: self.core.script_wrote.clone(),
            })
            .map_err(|e| Reply::error(format!("ERR Error creating the Lua state: {e}")))?;
            self.lua = Some(engine);
        }
        self.lua
            .as_mut()
            .ok_or_else(|| Reply::error("ERR no Lua state"))
    }

    /// `luaCreateFunction`: compile and cache a body; the sha1 or the error reply.
    pub(crate) fn create_script(&mut self, body: &[u8]) -> Result<String, Reply> {
        shebang(body).map_err(|e| Reply::error(format!("ERR {e}")))?;
        let sha = sha1_hex(body);
        self.engine()?
            .create_function(&sha, body)
            .map_err(Reply::error)?;
        // Every EVAL comes here: the body is copied only the first time (same sha1, same body).
        if !self.core.scripts.contains_key(&*sha) {
            self.core.scripts.insert(sha.clone(), body.to_vec());
        }
        Ok(sha)
    }

    /// `evalGenericCommand` after the script is known: run it with KEYS/ARGV split at numkeys,
    /// as the Lua client in the caller's database. `read_only` for EVAL_RO / EVALSHA_RO.
    fn run_script(
        &mut self,
        client: ClientId,
        now: i64,
        sha: &str,
        numkeys: usize,
        argv: &[Vec<u8>],
        read_only: bool,
    ) -> Reply {
        let keys = &argv[3..3 + numkeys];
        let args = &argv[3 + numkeys..];
        let declared = self
            .core
            .scripts
            .get(sha)
            .and_then(|body| shebang(body).ok().flatten());
        let no_writes = declared.as_ref().is_some_and(|flags| flags.no_writes);
        // `scriptPrepareForRun`: a script declaring it may write cannot run as EVAL_RO.
        if read_only && declared.is_some() && !no_writes {
            return Reply::error(
                "ERR Can not execute a script with write flag using *_ro command.",
            );
        }
        if let Err(e) = self.engine() {
            return e;
        }
        let db = self.core.clients.get(&client).map_or(0, |c| c.db);
        let mut lua_client = ScriptClient {
            caller: client,
            db,
            protocol: Protocol::Resp2,
            read_only: read_only || no_writes,
        };
        let RedisServer { core, lua, .. } = self;
        let Some(engine) = lua.as_mut() else {
            return Reply::error("ERR no Lua state");
        };
        engine.run(sha, keys, args, &mut |cargv, protocol| {
            lua_client.protocol = protocol;
            core.call_from_script(&mut lua_client, now, cargv)
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

/// The script cache's key for a sha1 argument: its lower-case text, borrowed when it is lower
/// case already (what SCRIPT LOAD answers, so what clients send); EVALSHA looked it up through
/// a lossy copy and a lower-cased copy on every call. The test is one pass over the bytes
/// without an early exit (the compiler vectorises it): a UTF-8 check and then a byte-by-byte
/// search for an upper-case letter were 5 % of `locksim serve`'s instructions under EVALSHA
/// (issue 32).
fn sha_key(arg: &[u8]) -> Cow<'_, str> {
    let lower_ascii = arg
        .iter()
        .fold(true, |ok, &b| ok & b.is_ascii() & !b.is_ascii_uppercase());
    if lower_ascii {
        // SAFETY: ASCII is UTF-8.
        Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(arg) })
    } else {
        Cow::Owned(String::from_utf8_lossy(arg).to_ascii_lowercase())
    }
}

/// `evalGetCommandFlags`: a script with a shebang is a write command unless `no-writes`
/// (`scriptFlagsToCmdFlags`); without one (or unknown to EVALSHA) the command's own flags.
pub(crate) fn script_command_flags(
    spec: &CommandSpec,
    argv: &[Vec<u8>],
    scripts: &BTreeMap<String, Vec<u8>>,
) -> u32 {
    let evalsha = spec.name.starts_with("evalsha");
    let script_flags = if evalsha {
        if argv[1].len() != 40 {
            return spec.flags;
        }
        let sha = sha_key(&argv[1]);
        match scripts.get(&*sha) {
            Some(body) => shebang(body),
            None => return spec.flags,
        }
    } else {
        // The body is the script: its own shebang line, if any, says (a cached copy says the
        // same).
        shebang(&argv[1])
    };
    match script_flags {
        Ok(Some(f)) => {
            let base = spec.flags & !(flags::WRITE | flags::MAY_REPLICATE);
            if f.no_writes {
                base
            } else {
                base | flags::WRITE
            }
        }
        _ => spec.flags,
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

fn eval_generic(
    server: &mut RedisServer,
    client: ClientId,
    now: i64,
    argv: &[Vec<u8>],
    read_only: bool,
) -> Outcome {
    // EVAL shows itself to MONITOR before the commands of its script (eval.c:559-561).
    server.core.feed_client_to_monitors(client, argv);
    let n = match numkeys(argv) {
        Ok(n) => n,
        Err(e) => return reply(e),
    };
    let sha = match server.create_script(&argv[1]) {
        Ok(sha) => sha,
        Err(e) => return reply(e),
    };
    reply(server.run_script(client, now, &sha, n, argv, read_only))
}

fn evalsha_generic(
    server: &mut RedisServer,
    client: ClientId,
    now: i64,
    argv: &[Vec<u8>],
    read_only: bool,
) -> Outcome {
    server.core.feed_client_to_monitors(client, argv);
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
    let sha = sha_key(&argv[1]);
    if !server.core.scripts.contains_key(&*sha) {
        return noscript();
    }
    let compiled = match server.engine() {
        Ok(engine) => engine.has_function(&sha),
        Err(e) => return reply(e),
    };
    // The body is copied only to compile it (after SCRIPT LOAD on a fresh Lua state).
    if !compiled {
        let body = server.core.scripts.get(&*sha).cloned().unwrap_or_default();
        if let Err(e) = server.create_script(&body) {
            return reply(e);
        }
    }
    reply(server.run_script(client, now, &sha, n, argv, read_only))
}

pub fn eval(server: &mut RedisServer, client: ClientId, now: i64, argv: &[Vec<u8>]) -> Outcome {
    eval_generic(server, client, now, argv, false)
}

pub fn eval_ro(server: &mut RedisServer, client: ClientId, now: i64, argv: &[Vec<u8>]) -> Outcome {
    eval_generic(server, client, now, argv, true)
}

pub fn evalsha(server: &mut RedisServer, client: ClientId, now: i64, argv: &[Vec<u8>]) -> Outcome {
    evalsha_generic(server, client, now, argv, false)
}

pub fn evalsha_ro(
    server: &mut RedisServer,
    client: ClientId,
    now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    evalsha_generic(server, client, now, argv, true)
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
            let sha = sha_key(sha);
            Reply::Integer(i64::from(server.core.scripts.contains_key(&*sha)))
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

/// SCRIPT KILL with no script running (`scriptKill`); during a busy script the host answers it
/// (see `ScriptMonitor`).
pub fn script_kill(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    reply(Reply::error("NOTBUSY No scripts in execution right now."))
}

const SCRIPT_HELP: &[&str] = &[
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
];

pub fn script_help(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    argv: &[Vec<u8>],
) -> Outcome {
    reply(super::connection::help_reply(&argv[0], SCRIPT_HELP))
}
