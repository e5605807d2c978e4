//! The command table (`commands.def` in Redis 7.0: name, arity, flags) and helpers shared by the
//! command implementations.

mod hashes;
mod keys;
mod lists;
mod pubsub;
mod scripting;
mod server_cmds;
mod strings;
mod zsets;

use super::number;
use super::reply::Reply;
use super::server::{ClientId, Ctx, Outcome, RedisServer};

/// Command flags we act on.
pub mod flags {
    /// May modify the keyspace: refused on a read-only replica.
    pub const WRITE: u32 = 1;
    /// Refused inside scripts (`CMD_NOSCRIPT`).
    pub const NOSCRIPT: u32 = 1 << 1;
    /// Allowed in a RESP2 subscribed context.
    pub const PUBSUB_CONTEXT: u32 = 1 << 2;
    /// Not a write but propagated (`CMD_MAY_REPLICATE`): refused in `no-writes` scripts.
    pub const MAY_REPLICATE: u32 = 1 << 3;
}

pub type PlainHandler = fn(&mut Ctx<'_>, &[Vec<u8>]) -> Reply;
pub type ServerHandler = fn(&mut RedisServer, ClientId, i64, &[Vec<u8>]) -> Outcome;

/// How a command runs: most only need the keyspace; scripting and WAIT need the whole server.
#[derive(Clone, Copy)]
pub enum Kind {
    Plain(PlainHandler),
    Server(ServerHandler),
}

pub struct CommandSpec {
    pub name: &'static str,
    /// `cmd->fullname`: `get`, `script|load`.
    pub full_name: &'static str,
    /// Redis arity: exact if positive, minimum if negative (the name counts).
    pub arity: i32,
    pub flags: u32,
    pub kind: Kind,
    /// Subcommands of a container command (SCRIPT).
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity > 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }
}

const fn cmd(name: &'static str, arity: i32, flags: u32, handler: PlainHandler) -> CommandSpec {
    CommandSpec {
        name,
        full_name: name,
        arity,
        flags,
        kind: Kind::Plain(handler),
        subcommands: &[],
    }
}

const fn server_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: ServerHandler,
) -> CommandSpec {
    CommandSpec {
        name,
        full_name: name,
        arity,
        flags,
        kind: Kind::Server(handler),
        subcommands: &[],
    }
}

const fn sub(
    full_name: &'static str,
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: ServerHandler,
) -> CommandSpec {
    CommandSpec {
        name,
        full_name,
        arity,
        flags,
        kind: Kind::Server(handler),
        subcommands: &[],
    }
}

use flags::{MAY_REPLICATE, NOSCRIPT, PUBSUB_CONTEXT, WRITE};

static SCRIPT_SUBCOMMANDS: [CommandSpec; 4] = [
    sub("script|load", "load", 3, NOSCRIPT, scripting::script_load),
    sub(
        "script|exists",
        "exists",
        -3,
        NOSCRIPT,
        scripting::script_exists,
    ),
    sub(
        "script|flush",
        "flush",
        -2,
        NOSCRIPT,
        scripting::script_flush,
    ),
    sub("script|kill", "kill", 2, NOSCRIPT, scripting::script_kill),
];

static COMMANDS: &[CommandSpec] = &[
    // strings (t_string.c)
    cmd("get", 2, 0, strings::get),
    cmd("set", -3, WRITE, strings::set),
    cmd("setnx", 3, WRITE, strings::setnx),
    cmd("setex", 4, WRITE, strings::setex),
    cmd("psetex", 4, WRITE, strings::psetex),
    cmd("getset", 3, WRITE, strings::getset),
    cmd("getdel", 2, WRITE, strings::getdel),
    cmd("incr", 2, WRITE, strings::incr),
    cmd("decr", 2, WRITE, strings::decr),
    cmd("incrby", 3, WRITE, strings::incrby),
    cmd("decrby", 3, WRITE, strings::decrby),
    cmd("mget", -2, 0, strings::mget),
    cmd("append", 3, WRITE, strings::append),
    cmd("strlen", 2, 0, strings::strlen),
    // keys (db.c, expire.c)
    cmd("del", -2, WRITE, keys::del),
    cmd("unlink", -2, WRITE, keys::unlink),
    cmd("exists", -2, 0, keys::exists),
    cmd("type", 2, 0, keys::type_cmd),
    cmd("expire", -3, WRITE, keys::expire),
    cmd("pexpire", -3, WRITE, keys::pexpire),
    cmd("expireat", -3, WRITE, keys::expireat),
    cmd("pexpireat", -3, WRITE, keys::pexpireat),
    cmd("ttl", 2, 0, keys::ttl),
    cmd("pttl", 2, 0, keys::pttl),
    cmd("expiretime", 2, 0, keys::expiretime),
    cmd("pexpiretime", 2, 0, keys::pexpiretime),
    cmd("persist", 2, WRITE, keys::persist),
    cmd("dbsize", 1, 0, keys::dbsize),
    cmd("flushdb", -1, WRITE, keys::flushdb),
    cmd("flushall", -1, WRITE, keys::flushall),
    cmd("select", 2, 0, keys::select),
    // hashes (t_hash.c)
    cmd("hset", -4, WRITE, hashes::hset),
    cmd("hget", 3, 0, hashes::hget),
    cmd("hgetall", 2, 0, hashes::hgetall),
    cmd("hincrby", 4, WRITE, hashes::hincrby),
    cmd("hexists", 3, 0, hashes::hexists),
    cmd("hdel", -3, WRITE, hashes::hdel),
    cmd("hlen", 2, 0, hashes::hlen),
    // lists (t_list.c)
    cmd("lpush", -3, WRITE, lists::lpush),
    cmd("rpush", -3, WRITE, lists::rpush),
    cmd("lpop", -2, WRITE, lists::lpop),
    cmd("rpop", -2, WRITE, lists::rpop),
    cmd("lindex", 3, 0, lists::lindex),
    cmd("lrange", 4, 0, lists::lrange),
    cmd("lrem", 4, WRITE, lists::lrem),
    cmd("llen", 2, 0, lists::llen),
    // sorted sets (t_zset.c)
    cmd("zadd", -4, WRITE, zsets::zadd),
    cmd("zscore", 3, 0, zsets::zscore),
    cmd("zrem", -3, WRITE, zsets::zrem),
    cmd("zrange", -4, 0, zsets::zrange),
    cmd("zrangebyscore", -4, 0, zsets::zrangebyscore),
    cmd("zcard", 2, 0, zsets::zcard),
    cmd("zincrby", 4, WRITE, zsets::zincrby),
    // pubsub (pubsub.c)
    cmd("publish", 3, MAY_REPLICATE, pubsub::publish),
    cmd(
        "subscribe",
        -2,
        NOSCRIPT | PUBSUB_CONTEXT,
        pubsub::subscribe,
    ),
    cmd(
        "unsubscribe",
        -1,
        NOSCRIPT | PUBSUB_CONTEXT,
        pubsub::unsubscribe,
    ),
    // server (server.c, replication.c)
    cmd("ping", -1, PUBSUB_CONTEXT, server_cmds::ping),
    cmd("echo", 2, 0, server_cmds::echo),
    cmd("info", -1, 0, server_cmds::info),
    cmd("role", 1, NOSCRIPT, server_cmds::role),
    cmd("time", 1, 0, server_cmds::time),
    server_cmd("wait", 3, NOSCRIPT, server_cmds::wait),
    // scripting (eval.c)
    server_cmd("eval", -3, NOSCRIPT, scripting::eval),
    server_cmd("evalsha", -3, NOSCRIPT, scripting::evalsha),
    CommandSpec {
        name: "script",
        full_name: "script",
        arity: -2,
        flags: NOSCRIPT,
        kind: Kind::Server(scripting::script_help),
        subcommands: &SCRIPT_SUBCOMMANDS,
    },
];

/// `server.c` `lookupCommand`: by name (any case), then by subcommand for containers.
pub fn lookup(argv: &[Vec<u8>]) -> Option<&'static CommandSpec> {
    let name = argv.first()?.to_ascii_lowercase();
    let spec = COMMANDS
        .iter()
        .find(|c| c.name.as_bytes() == name.as_slice())?;
    if spec.subcommands.is_empty() || argv.len() < 2 {
        return Some(spec);
    }
    let subname = argv[1].to_ascii_lowercase();
    spec.subcommands
        .iter()
        .find(|c| c.name.as_bytes() == subname.as_slice())
}

/// `processCommand`'s existence and arity checks, with Redis's error replies.
pub fn lookup_checked(argv: &[Vec<u8>]) -> Result<&'static CommandSpec, Reply> {
    let Some(spec) = lookup(argv) else {
        return Err(Reply::Error(unknown_command_text(argv)));
    };
    if !spec.arity_ok(argv.len()) {
        return Err(Reply::Error(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.full_name
        )));
    }
    Ok(spec)
}

/// `commandCheckExistence`.
fn unknown_command_text(argv: &[Vec<u8>]) -> String {
    let name = c_str(&argv[0]);
    let is_container = COMMANDS.iter().any(|c| {
        !c.subcommands.is_empty() && c.name.as_bytes() == name.to_ascii_lowercase().as_slice()
    });
    let text = if is_container && argv.len() >= 2 {
        let upper = String::from_utf8_lossy(name).to_uppercase();
        format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            lossy(truncate(c_str(&argv[1]), 128)),
            upper
        )
    } else {
        let mut args = Vec::new();
        for arg in &argv[1..] {
            if args.len() >= 128 {
                break;
            }
            let room = 128 - args.len();
            args.push(b'\'');
            args.extend_from_slice(truncate(c_str(arg), room));
            args.extend_from_slice(b"' ");
        }
        format!(
            "ERR unknown command '{}', with args beginning with: {}",
            lossy(truncate(name, 128)),
            lossy(&args)
        )
    };
    text.replace(['\r', '\n'], " ")
}

/// The bytes up to the first NUL, as C string functions see an sds.
pub fn c_str(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(i) => &bytes[..i],
        None => bytes,
    }
}

fn truncate(bytes: &[u8], max: usize) -> &[u8] {
    &bytes[..bytes.len().min(max)]
}

/// Error text with arbitrary bytes (Redis writes them raw; our error replies are `String`s).
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Case-insensitive option match on the C string (`strcasecmp`).
pub fn is_opt(arg: &[u8], name: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(name.as_bytes())
}

pub fn wrongtype() -> Reply {
    Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

pub fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

pub fn not_integer() -> Reply {
    Reply::error("ERR value is not an integer or out of range")
}

pub fn not_float() -> Reply {
    Reply::error("ERR value is not a valid float")
}

/// `getLongLongFromObjectOrReply`.
pub fn parse_i64(arg: &[u8]) -> Result<i64, Reply> {
    number::string2ll(arg).ok_or_else(not_integer)
}

/// `getDoubleFromObjectOrReply`.
pub fn parse_f64(arg: &[u8]) -> Result<f64, Reply> {
    number::parse_double(arg).ok_or_else(not_float)
}

/// RESP2 `addReplyDouble`.
pub fn double_reply(d: f64) -> Reply {
    Reply::Bulk(number::fmt_g17(d).into_bytes())
}
