//! The command table (`commands.def` in Redis 7.0: name, arity, flags) and helpers shared by the
//! command implementations.

mod bitmaps;
mod blocking;
mod config;
mod connection;
pub use connection::{HelloFields, hello_reply};
mod docs;
mod hashes;
mod info;
mod keys;
mod lists;
mod monitor;
mod pubsub;
mod scripting;
mod server_cmds;
mod sets;
mod sort;
mod strings;
mod transactions;
mod zsets;

pub(crate) use blocking::serve_blocked_on_key;
pub(crate) use monitor::{Sender as MonitorSender, monitor_line};
pub(crate) use sort::store_key as sort_store_key;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use foldhash::fast::FixedState;

use super::number;
use super::reply::Reply;
use super::server::{ClientId, Ctx, Outcome, RedisServer};

/// Command flags we act on (`server.h` `CMD_*`).
pub mod flags {
    /// May modify the keyspace: refused on a read-only replica.
    pub const WRITE: u32 = 1;
    /// Refused inside scripts (`CMD_NOSCRIPT`).
    pub const NOSCRIPT: u32 = 1 << 1;
    /// Allowed in a RESP2 subscribed context.
    pub const PUBSUB_CONTEXT: u32 = 1 << 2;
    /// Not a write but propagated (`CMD_MAY_REPLICATE`): refused in `no-writes` scripts.
    pub const MAY_REPLICATE: u32 = 1 << 3;
    /// Runs before AUTH (`CMD_NO_AUTH`): AUTH, HELLO, QUIT, RESET.
    pub const NO_AUTH: u32 = 1 << 4;
    /// Runs while a script is busy (`CMD_ALLOW_BUSY`); everything else gets `-BUSY`.
    pub const ALLOW_BUSY: u32 = 1 << 5;
    /// Administrative (`CMD_ADMIN`): never shown to MONITOR (`call`, server.c:3453).
    pub const ADMIN: u32 = 1 << 6;
    /// Shown to MONITOR by the command itself, before its effects (`CMD_SKIP_MONITOR`: EVAL,
    /// EVALSHA and their `_RO` forms, eval.c:561, :575).
    pub const SKIP_MONITOR: u32 = 1 << 7;
}

pub type PlainHandler = fn(&mut Ctx<'_>, &[Vec<u8>]) -> Reply;
/// A command that may keep its arguments: the SET family moves its value into the keyspace
/// instead of copying it when nothing reads the command afterwards ([`Ctx::take_arg`]), as
/// Redis stores the argument object itself (`setKey` on `c->argv[2]`, t_string.c).
pub type OwnedHandler = fn(&mut Ctx<'_>, &mut [Vec<u8>]) -> Reply;
pub type ServerHandler = fn(&mut RedisServer, ClientId, i64, &[Vec<u8>]) -> Outcome;

/// How a command runs: most only need the keyspace; scripting, transactions and the connection
/// commands need the whole server.
#[derive(Clone, Copy)]
pub enum Kind {
    Plain(KeyspaceHandler),
    Server(ServerHandler),
}

/// A keyspace command's handler: one that reads its arguments, or one that may keep them.
#[derive(Clone, Copy)]
pub enum KeyspaceHandler {
    Reads(PlainHandler),
    Keeps(OwnedHandler),
}

impl KeyspaceHandler {
    /// Runs the command; one that keeps its arguments gets them when `argv` owns them, a copy
    /// otherwise.
    pub(crate) fn run(self, ctx: &mut Ctx<'_>, argv: &mut Cow<'_, [Vec<u8>]>) -> Reply {
        match self {
            KeyspaceHandler::Reads(handler) => handler(ctx, argv),
            KeyspaceHandler::Keeps(handler) => handler(ctx, argv.to_mut()),
        }
    }
}

pub struct CommandSpec {
    pub name: &'static str,
    /// `cmd->fullname`: `get`, `script|load`.
    pub full_name: &'static str,
    /// Redis arity: exact if positive, minimum if negative (the name counts).
    pub arity: i32,
    pub flags: u32,
    pub kind: Kind,
    /// Subcommands of a container command (SCRIPT, CLIENT, CONFIG, COMMAND).
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        arity_accepts(self.arity, argc)
    }
}

/// Redis's arity rule: exact if positive, a minimum if negative (the name counts).
fn arity_accepts(arity: i32, argc: usize) -> bool {
    let argc = argc as i64;
    let arity = i64::from(arity);
    if arity > 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

const fn keyspace_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: KeyspaceHandler,
) -> CommandSpec {
    CommandSpec {
        name,
        full_name: name,
        arity,
        flags,
        kind: Kind::Plain(handler),
        subcommands: &[],
    }
}

const fn cmd(name: &'static str, arity: i32, flags: u32, handler: PlainHandler) -> CommandSpec {
    keyspace_cmd(name, arity, flags, KeyspaceHandler::Reads(handler))
}

const fn owned_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: OwnedHandler,
) -> CommandSpec {
    keyspace_cmd(name, arity, flags, KeyspaceHandler::Keeps(handler))
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

/// A subcommand that only needs the keyspace context (so scripts may call it: PUBSUB's).
const fn plain_sub(
    full_name: &'static str,
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: PlainHandler,
) -> CommandSpec {
    CommandSpec {
        name,
        full_name,
        arity,
        flags,
        kind: Kind::Plain(KeyspaceHandler::Reads(handler)),
        subcommands: &[],
    }
}

const fn container(name: &'static str, subcommands: &'static [CommandSpec]) -> CommandSpec {
    CommandSpec {
        name,
        full_name: name,
        arity: -2,
        flags: 0,
        kind: Kind::Server(container_help),
        subcommands,
    }
}

use flags::{
    ADMIN, ALLOW_BUSY, MAY_REPLICATE, NO_AUTH, NOSCRIPT, PUBSUB_CONTEXT, SKIP_MONITOR, WRITE,
};

static SCRIPT_SUBCOMMANDS: [CommandSpec; 5] = [
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
    sub(
        "script|kill",
        "kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        scripting::script_kill,
    ),
    sub("script|help", "help", 2, 0, scripting::script_help),
];

static CLIENT_SUBCOMMANDS: [CommandSpec; 14] = [
    sub("client|id", "id", 2, NOSCRIPT, connection::client_id),
    sub(
        "client|setname",
        "setname",
        3,
        NOSCRIPT,
        connection::client_setname,
    ),
    sub(
        "client|getname",
        "getname",
        2,
        NOSCRIPT,
        connection::client_getname,
    ),
    sub("client|info", "info", 2, NOSCRIPT, connection::client_info),
    sub(
        "client|list",
        "list",
        -2,
        NOSCRIPT | ADMIN,
        connection::client_list,
    ),
    sub(
        "client|kill",
        "kill",
        -3,
        NOSCRIPT | ADMIN,
        connection::client_kill,
    ),
    sub(
        "client|no-evict",
        "no-evict",
        3,
        NOSCRIPT | ADMIN,
        connection::client_no_evict,
    ),
    sub(
        "client|unblock",
        "unblock",
        -3,
        NOSCRIPT | ADMIN,
        connection::client_unblock,
    ),
    sub(
        "client|pause",
        "pause",
        -3,
        NOSCRIPT | ADMIN,
        monitor::client_pause,
    ),
    sub(
        "client|unpause",
        "unpause",
        2,
        NOSCRIPT | ADMIN,
        monitor::client_unpause,
    ),
    sub(
        "client|reply",
        "reply",
        3,
        NOSCRIPT,
        connection::client_reply,
    ),
    sub(
        "client|getredir",
        "getredir",
        2,
        NOSCRIPT,
        connection::client_getredir,
    ),
    sub(
        "client|trackinginfo",
        "trackinginfo",
        2,
        NOSCRIPT,
        connection::client_trackinginfo,
    ),
    sub("client|help", "help", 2, 0, connection::client_help),
];

static CONFIG_SUBCOMMANDS: [CommandSpec; 5] = [
    sub(
        "config|get",
        "get",
        -3,
        NOSCRIPT | ADMIN,
        config::config_get,
    ),
    sub(
        "config|set",
        "set",
        -4,
        NOSCRIPT | ADMIN,
        config::config_set,
    ),
    sub(
        "config|resetstat",
        "resetstat",
        2,
        NOSCRIPT | ADMIN,
        config::config_resetstat,
    ),
    sub(
        "config|rewrite",
        "rewrite",
        2,
        NOSCRIPT | ADMIN,
        config::config_rewrite,
    ),
    sub("config|help", "help", 2, 0, config::config_help),
];

static COMMAND_SUBCOMMANDS: [CommandSpec; 5] = [
    sub("command|count", "count", 2, 0, config::command_count),
    sub("command|info", "info", -2, 0, config::command_info),
    sub("command|docs", "docs", -2, 0, config::command_docs),
    sub("command|list", "list", -2, 0, config::command_list),
    sub("command|help", "help", 2, 0, config::command_help),
];

static PUBSUB_SUBCOMMANDS: [CommandSpec; 6] = [
    plain_sub(
        "pubsub|channels",
        "channels",
        -2,
        0,
        pubsub::pubsub_channels,
    ),
    plain_sub("pubsub|numsub", "numsub", -2, 0, pubsub::pubsub_numsub),
    plain_sub("pubsub|numpat", "numpat", 2, 0, pubsub::pubsub_numpat),
    plain_sub(
        "pubsub|shardchannels",
        "shardchannels",
        -2,
        0,
        pubsub::pubsub_shardchannels,
    ),
    plain_sub(
        "pubsub|shardnumsub",
        "shardnumsub",
        -2,
        0,
        pubsub::pubsub_shardnumsub,
    ),
    plain_sub("pubsub|help", "help", 2, 0, pubsub::pubsub_help),
];

static COMMANDS: &[CommandSpec] = &[
    // strings (t_string.c)
    cmd("get", 2, 0, strings::get),
    owned_cmd("set", -3, WRITE, strings::set),
    owned_cmd("setnx", 3, WRITE, strings::setnx),
    owned_cmd("setex", 4, WRITE, strings::setex),
    owned_cmd("psetex", 4, WRITE, strings::psetex),
    cmd("getset", 3, WRITE, strings::getset),
    cmd("getdel", 2, WRITE, strings::getdel),
    cmd("incr", 2, WRITE, strings::incr),
    cmd("decr", 2, WRITE, strings::decr),
    cmd("incrby", 3, WRITE, strings::incrby),
    cmd("decrby", 3, WRITE, strings::decrby),
    cmd("mget", -2, 0, strings::mget),
    cmd("append", 3, WRITE, strings::append),
    cmd("strlen", 2, 0, strings::strlen),
    cmd("mset", -3, WRITE, strings::mset),
    cmd("msetnx", -3, WRITE, strings::msetnx),
    cmd("getex", -2, WRITE, strings::getex),
    cmd("getrange", 4, 0, strings::getrange),
    cmd("setbit", 4, WRITE, bitmaps::setbit),
    cmd("getbit", 3, 0, bitmaps::getbit),
    cmd("bitcount", -2, 0, bitmaps::bitcount),
    cmd("bitpos", -3, 0, bitmaps::bitpos),
    cmd("bitop", -4, WRITE, bitmaps::bitop),
    cmd("setrange", 4, WRITE, strings::setrange),
    cmd("incrbyfloat", 3, WRITE, strings::incrbyfloat),
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
    cmd("rename", 3, WRITE, keys::rename),
    cmd("renamenx", 3, WRITE, keys::renamenx),
    cmd("touch", -2, 0, keys::touch),
    cmd("copy", -3, WRITE, keys::copy),
    // sort.c
    cmd("sort", -2, WRITE, sort::sort),
    cmd("sort_ro", -2, 0, sort::sort_ro),
    cmd("keys", 2, 0, keys::keys),
    cmd("scan", -2, 0, keys::scan),
    cmd("dbsize", 1, 0, keys::dbsize),
    cmd("flushdb", -1, WRITE, keys::flushdb),
    cmd("flushall", -1, WRITE, keys::flushall),
    cmd("select", 2, 0, connection::select),
    // hashes (t_hash.c)
    cmd("hset", -4, WRITE, hashes::hset),
    cmd("hget", 3, 0, hashes::hget),
    cmd("hgetall", 2, 0, hashes::hgetall),
    cmd("hincrby", 4, WRITE, hashes::hincrby),
    cmd("hincrbyfloat", 4, WRITE, hashes::hincrbyfloat),
    cmd("hexists", 3, 0, hashes::hexists),
    cmd("hdel", -3, WRITE, hashes::hdel),
    cmd("hlen", 2, 0, hashes::hlen),
    cmd("hmget", -3, 0, hashes::hmget),
    cmd("hmset", -4, WRITE, hashes::hmset),
    cmd("hsetnx", 4, WRITE, hashes::hsetnx),
    cmd("hkeys", 2, 0, hashes::hkeys),
    cmd("hvals", 2, 0, hashes::hvals),
    cmd("hstrlen", 3, 0, hashes::hstrlen),
    // lists (t_list.c)
    cmd("lpush", -3, WRITE, lists::lpush),
    cmd("rpush", -3, WRITE, lists::rpush),
    cmd("lpop", -2, WRITE, lists::lpop),
    cmd("rpop", -2, WRITE, lists::rpop),
    cmd("blpop", -3, WRITE | NOSCRIPT, blocking::blpop),
    cmd("brpop", -3, WRITE | NOSCRIPT, blocking::brpop),
    cmd("lindex", 3, 0, lists::lindex),
    cmd("lrange", 4, 0, lists::lrange),
    cmd("lrem", 4, WRITE, lists::lrem),
    cmd("llen", 2, 0, lists::llen),
    cmd("lpushx", -3, WRITE, lists::lpushx),
    cmd("rpushx", -3, WRITE, lists::rpushx),
    cmd("ltrim", 4, WRITE, lists::ltrim),
    cmd("lset", 4, WRITE, lists::lset),
    cmd("linsert", 5, WRITE, lists::linsert),
    cmd("lpos", -3, 0, lists::lpos),
    cmd("rpoplpush", 3, WRITE, lists::rpoplpush),
    cmd("lmove", 5, WRITE, lists::lmove),
    cmd("blmove", 6, WRITE | NOSCRIPT, blocking::blmove),
    cmd("brpoplpush", 4, WRITE | NOSCRIPT, blocking::brpoplpush),
    // sets (t_set.c)
    cmd("sadd", -3, WRITE, sets::sadd),
    cmd("srem", -3, WRITE, sets::srem),
    cmd("spop", -2, WRITE, sets::spop),
    cmd("smembers", 2, 0, sets::smembers),
    cmd("sismember", 3, 0, sets::sismember),
    cmd("smismember", -3, 0, sets::smismember),
    cmd("scard", 2, 0, sets::scard),
    cmd("smove", 4, WRITE, sets::smove),
    cmd("sinter", -2, 0, sets::sinter),
    cmd("sintercard", -3, 0, sets::sintercard),
    cmd("sinterstore", -3, WRITE, sets::sinterstore),
    cmd("sunion", -2, 0, sets::sunion),
    cmd("sunionstore", -3, WRITE, sets::sunionstore),
    cmd("sdiff", -2, 0, sets::sdiff),
    cmd("sdiffstore", -3, WRITE, sets::sdiffstore),
    cmd("sscan", -3, 0, sets::sscan),
    cmd("hscan", -3, 0, hashes::hscan),
    cmd("zscan", -3, 0, zsets::zscan),
    // sorted sets (t_zset.c)
    cmd("zadd", -4, WRITE, zsets::zadd),
    cmd("zscore", 3, 0, zsets::zscore),
    cmd("zrem", -3, WRITE, zsets::zrem),
    cmd("zrange", -4, 0, zsets::zrange),
    cmd("zrangebyscore", -4, 0, zsets::zrangebyscore),
    cmd("zcard", 2, 0, zsets::zcard),
    cmd("zincrby", 4, WRITE, zsets::zincrby),
    cmd("zremrangebyscore", 4, WRITE, zsets::zremrangebyscore),
    cmd("zremrangebyrank", 4, WRITE, zsets::zremrangebyrank),
    cmd("zremrangebylex", 4, WRITE, zsets::zremrangebylex),
    cmd("zrank", 3, 0, zsets::zrank),
    cmd("zrevrank", 3, 0, zsets::zrevrank),
    cmd("zcount", 4, 0, zsets::zcount),
    cmd("zlexcount", 4, 0, zsets::zlexcount),
    cmd("zrevrange", -4, 0, zsets::zrevrange),
    cmd("zrevrangebyscore", -4, 0, zsets::zrevrangebyscore),
    cmd("zrangebylex", -4, 0, zsets::zrangebylex),
    cmd("zrevrangebylex", -4, 0, zsets::zrevrangebylex),
    cmd("zrangestore", -5, WRITE, zsets::zrangestore),
    cmd("zmscore", -3, 0, zsets::zmscore),
    cmd("zpopmin", -2, WRITE, zsets::zpopmin),
    cmd("zpopmax", -2, WRITE, zsets::zpopmax),
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
    cmd(
        "psubscribe",
        -2,
        NOSCRIPT | PUBSUB_CONTEXT,
        pubsub::psubscribe,
    ),
    cmd(
        "punsubscribe",
        -1,
        NOSCRIPT | PUBSUB_CONTEXT,
        pubsub::punsubscribe,
    ),
    container("pubsub", &PUBSUB_SUBCOMMANDS),
    // connection (networking.c, acl.c)
    cmd("ping", -1, PUBSUB_CONTEXT, server_cmds::ping),
    cmd("echo", 2, 0, server_cmds::echo),
    server_cmd(
        "hello",
        -1,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY,
        connection::hello,
    ),
    server_cmd(
        "auth",
        -2,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY,
        connection::auth,
    ),
    server_cmd(
        "quit",
        -1,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY | PUBSUB_CONTEXT,
        connection::quit,
    ),
    server_cmd(
        "reset",
        1,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY | PUBSUB_CONTEXT,
        connection::reset,
    ),
    container("client", &CLIENT_SUBCOMMANDS),
    // transactions (multi.c)
    server_cmd("multi", 1, NOSCRIPT | ALLOW_BUSY, transactions::multi),
    server_cmd("exec", 1, NOSCRIPT, transactions::exec),
    server_cmd("discard", 1, NOSCRIPT | ALLOW_BUSY, transactions::discard),
    server_cmd("watch", -2, NOSCRIPT | ALLOW_BUSY, transactions::watch),
    server_cmd("unwatch", 1, NOSCRIPT | ALLOW_BUSY, transactions::unwatch),
    // server (server.c, replication.c, config.c)
    cmd("info", -1, 0, info::info),
    cmd("role", 1, NOSCRIPT | ADMIN, server_cmds::role),
    server_cmd("monitor", 1, NOSCRIPT | ADMIN, monitor::monitor),
    cmd("time", 1, 0, server_cmds::time),
    server_cmd("wait", 3, NOSCRIPT, server_cmds::wait),
    container("config", &CONFIG_SUBCOMMANDS),
    CommandSpec {
        name: "command",
        full_name: "command",
        arity: -1,
        flags: 0,
        kind: Kind::Server(config::command),
        subcommands: &COMMAND_SUBCOMMANDS,
    },
    // scripting (eval.c)
    server_cmd(
        "eval",
        -3,
        NOSCRIPT | MAY_REPLICATE | SKIP_MONITOR,
        scripting::eval,
    ),
    server_cmd(
        "evalsha",
        -3,
        NOSCRIPT | MAY_REPLICATE | SKIP_MONITOR,
        scripting::evalsha,
    ),
    server_cmd("eval_ro", -3, NOSCRIPT | SKIP_MONITOR, scripting::eval_ro),
    server_cmd(
        "evalsha_ro",
        -3,
        NOSCRIPT | SKIP_MONITOR,
        scripting::evalsha_ro,
    ),
    container("script", &SCRIPT_SUBCOMMANDS),
];

/// Every command and subcommand, in table order (COMMAND COUNT, LIST).
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    COMMANDS.iter()
}

/// A container without a (known) subcommand is never run: `lookup_checked` answers first.
fn container_help(
    _server: &mut RedisServer,
    _client: ClientId,
    _now: i64,
    _argv: &[Vec<u8>],
) -> Outcome {
    Outcome::Reply(syntax_error())
}

/// The flags `processCommand` acts on (`getCommandFlags`): a script's shebang decides whether
/// EVAL/EVALSHA of it is a write (`evalGetCommandFlags`).
pub fn effective_flags(
    spec: &CommandSpec,
    argv: &[Vec<u8>],
    scripts: &BTreeMap<String, Vec<u8>>,
) -> u32 {
    if !matches!(spec.name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro") || argv.len() < 2 {
        return spec.flags;
    }
    scripting::script_command_flags(spec, argv, scripts)
}

/// Whether a MONITOR client may not run it: a read or write of the keyspace (`CMD_READONLY`,
/// `CMD_WRITE`, `CMD_MAY_REPLICATE`: server.c:3990-3995), as COMMAND INFO's flags say.
pub fn touches_keyspace(spec: &CommandSpec) -> bool {
    spec.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0
        || docs::has_flag(spec.full_name, "readonly")
        || docs::has_flag(spec.full_name, "write")
}

/// No command name is longer (the index checks it when it is built).
const LONGEST_NAME: usize = 32;

/// The table by lower-case name, the first entry of each, built once: `lookup` runs for every
/// command, and scanning the table for it was 3.6 % of `locksim serve`'s time under EVALSHA.
/// foldhash, not SipHash: no one chooses the names, and two SipHashes per command (its own and
/// each `redis.call`'s) were 4 % of `locksim serve`'s EVALSHA (issue 32).
fn command_index() -> &'static HashMap<Vec<u8>, &'static CommandSpec, FixedState> {
    static INDEX: OnceLock<HashMap<Vec<u8>, &'static CommandSpec, FixedState>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index = HashMap::with_hasher(FixedState::default());
        for spec in COMMANDS {
            assert!(spec.name.len() <= LONGEST_NAME, "{} is too long", spec.name);
            index
                .entry(spec.name.to_ascii_lowercase().into_bytes())
                .or_insert(spec);
        }
        index
    })
}

/// `server.c` `lookupCommand`: by name (any case), then by subcommand for containers.
pub fn lookup(argv: &[Vec<u8>]) -> Option<&'static CommandSpec> {
    let name = argv.first()?;
    let mut lower = [0u8; LONGEST_NAME];
    let lower = lower.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let spec = *command_index().get(&*lower)?;
    if spec.subcommands.is_empty() || argv.len() < 2 {
        return Some(spec);
    }
    spec.subcommands
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(&argv[1]))
}

/// Redis 7.0.15's commands and subcommands flagged `noscript` (`src/commands/*.json`) with their
/// arity, implemented here or not: a script calling one that is not implemented here (DEBUG,
/// SHUTDOWN, ACL, FUNCTION, ...) gets Redis's refusal, not the unknown-command error.
static REDIS_NOSCRIPT: &[(&str, i32)] = &[
    ("acl|cat", -2),
    ("acl|deluser", -3),
    ("acl|dryrun", -4),
    ("acl|genpass", -2),
    ("acl|getuser", 3),
    ("acl|list", 2),
    ("acl|load", 2),
    ("acl|log", -2),
    ("acl|save", 2),
    ("acl|setuser", -3),
    ("acl|users", 2),
    ("acl|whoami", 2),
    ("auth", -2),
    ("bgrewriteaof", 1),
    ("bgsave", -1),
    ("blmove", 6),
    ("blpop", -3),
    ("brpop", -3),
    ("brpoplpush", 4),
    ("bzpopmax", -3),
    ("bzpopmin", -3),
    ("client|caching", 3),
    ("client|getname", 2),
    ("client|getredir", 2),
    ("client|id", 2),
    ("client|info", 2),
    ("client|kill", -3),
    ("client|list", -2),
    ("client|no-evict", 3),
    ("client|pause", -3),
    ("client|reply", 3),
    ("client|setname", 3),
    ("client|tracking", -3),
    ("client|trackinginfo", 2),
    ("client|unblock", -3),
    ("client|unpause", 2),
    ("cluster|reset", -2),
    ("config|get", -3),
    ("config|resetstat", 2),
    ("config|rewrite", 2),
    ("config|set", -4),
    ("debug", -2),
    ("discard", 1),
    ("eval", -3),
    ("eval_ro", -3),
    ("evalsha", -3),
    ("evalsha_ro", -3),
    ("exec", 1),
    ("failover", -1),
    ("fcall", -3),
    ("fcall_ro", -3),
    ("function|delete", 3),
    ("function|dump", 2),
    ("function|flush", -2),
    ("function|kill", 2),
    ("function|list", -2),
    ("function|load", -3),
    ("function|restore", -3),
    ("function|stats", 2),
    ("hello", -1),
    ("latency|doctor", 2),
    ("latency|graph", 3),
    ("latency|histogram", -2),
    ("latency|history", 3),
    ("latency|latest", 2),
    ("latency|reset", -2),
    ("module|list", 2),
    ("module|load", -3),
    ("module|loadex", -3),
    ("module|unload", 3),
    ("monitor", 1),
    ("multi", 1),
    ("psubscribe", -2),
    ("psync", -3),
    ("punsubscribe", -1),
    ("quit", -1),
    ("replconf", -1),
    ("replicaof", 3),
    ("reset", 1),
    ("role", 1),
    ("save", 1),
    ("script|debug", 3),
    ("script|exists", -3),
    ("script|flush", -2),
    ("script|kill", 2),
    ("script|load", 3),
    ("shutdown", -1),
    ("slaveof", 3),
    ("ssubscribe", -2),
    ("subscribe", -2),
    ("sunsubscribe", -1),
    ("sync", 1),
    ("unsubscribe", -1),
    ("unwatch", 1),
    ("wait", 3),
    ("watch", -2),
];

/// `scriptCall`'s answer to a command this server does not implement but Redis 7.0 refuses in
/// scripts: its arity check (`scriptVerifyCommandArity`; a container called without a
/// subcommand has arity -2), then `This Redis command is not allowed from script`. `None` for a
/// command Redis would run.
pub fn refused_in_scripts(argv: &[Vec<u8>]) -> Option<&'static str> {
    const WRONG_ARITY: &str = "Wrong number of args calling Redis command from script";
    let name = String::from_utf8_lossy(argv.first()?).to_ascii_lowercase();
    let container = format!("{name}|");
    let full_name = if REDIS_NOSCRIPT
        .iter()
        .any(|(n, _)| n.starts_with(&container))
    {
        match argv.get(1) {
            Some(sub) => container + &String::from_utf8_lossy(sub).to_ascii_lowercase(),
            None => return Some(WRONG_ARITY),
        }
    } else {
        name
    };
    let &(_, arity) = REDIS_NOSCRIPT.iter().find(|(n, _)| *n == full_name)?;
    Some(if arity_accepts(arity, argv.len()) {
        "This Redis command is not allowed from script"
    } else {
        WRONG_ARITY
    })
}

/// `processCommand`'s existence and arity checks, with Redis's error replies.
pub fn lookup_checked(argv: &[Vec<u8>]) -> Result<&'static CommandSpec, Reply> {
    let Some(spec) = lookup(argv) else {
        return Err(Reply::Error(unknown_command_text(argv)));
    };
    if !spec.arity_ok(argv.len()) {
        return Err(Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.full_name
        )));
    }
    Ok(spec)
}

/// `commandCheckExistence`: the name and arguments are echoed as raw bytes (CR/LF as spaces).
fn unknown_command_text(argv: &[Vec<u8>]) -> Vec<u8> {
    let name = c_str(&argv[0]);
    let is_container = COMMANDS
        .iter()
        .any(|c| !c.subcommands.is_empty() && c.name.as_bytes().eq_ignore_ascii_case(name));
    let mut text = Vec::new();
    if is_container && argv.len() >= 2 {
        text.extend_from_slice(b"ERR unknown subcommand '");
        text.extend_from_slice(truncate(c_str(&argv[1]), 128));
        text.extend_from_slice(b"'. Try ");
        text.extend_from_slice(&name.to_ascii_uppercase());
        text.extend_from_slice(b" HELP.");
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
        text.extend_from_slice(b"ERR unknown command '");
        text.extend_from_slice(truncate(name, 128));
        text.extend_from_slice(b"', with args beginning with: ");
        text.extend_from_slice(&args);
    }
    for b in text.iter_mut() {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    text
}

/// An error reply made of text and raw bytes, as `addReplyErrorFormat` with `%s` writes it.
pub fn error_with(parts: &[&[u8]]) -> Reply {
    Reply::Error(parts.concat())
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

/// Text with arbitrary bytes, for messages that are not error replies.
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Case-insensitive option match on the C string (`strcasecmp`).
pub fn is_opt(arg: &[u8], name: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(name.as_bytes())
}

/// The destination of a STORE-style command (SINTERSTORE and friends, ZRANGESTORE, SORT ...
/// STORE): `setKey` of a non-empty result (the old key expired first, its TTL dropped), or
/// `dbDelete` when the result is empty; the command propagates verbatim whenever the
/// destination changed. Answers the result's length.
fn store_aggregate(
    ctx: &mut Ctx<'_>,
    argv: &[Vec<u8>],
    dst: &[u8],
    result: super::keyspace::Value,
    len: usize,
) -> Reply {
    if !result.is_empty_aggregate() {
        ctx.lookup(dst);
        ctx.db().set(dst, result, false);
        ctx.propagate(argv.to_vec());
    } else if ctx.db().remove(dst).is_some() {
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(len as i64)
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

/// `addReplyDouble`.
pub fn double_reply(d: f64) -> Reply {
    Reply::Double(d)
}

/// `stringmatchlen` (`util.c`): Redis's glob matching (`*`, `?`, `[...]`, `\\`), case-sensitive
/// unless `nocase`.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    glob_at(pattern, string, nocase, &mut false)
}

/// `stringmatchlen_impl`; `skip_longer` is its `skipLongerMatches` cut-off.
fn glob_at(mut p: &[u8], mut s: &[u8], nocase: bool, skip_longer: &mut bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if glob_at(&p[1..], s, nocase, skip_longer) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.len() >= 2 && p[0] == b'\\' {
                        p = &p[1..];
                        if p[0] == s[0] {
                            matched = true;
                        }
                    } else if p.first() == Some(&b']') {
                        break;
                    } else if p.is_empty() {
                        // Unterminated class: stringmatchlen steps back onto the last byte.
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        let mut c = s[0];
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            start = start.to_ascii_lowercase();
                            end = end.to_ascii_lowercase();
                            c = c.to_ascii_lowercase();
                        }
                        p = &p[2..];
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if eq(p[0], s[0]) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0]) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0]) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1.min(p.len())..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands implemented here that Redis refuses in scripts are refused here too, with
    /// Redis's arity: `REDIS_NOSCRIPT` and the command table agree.
    #[test]
    fn implemented_noscript_commands_carry_the_flag_and_redis_arity() {
        for &(full_name, arity) in REDIS_NOSCRIPT {
            let argv: Vec<Vec<u8>> = full_name
                .split('|')
                .map(|p| p.as_bytes().to_vec())
                .collect();
            let Some(spec) = lookup(&argv) else {
                continue;
            };
            assert_eq!(spec.full_name, full_name);
            assert_eq!(spec.arity, arity, "{full_name}");
            let refused = spec.flags & flags::NOSCRIPT != 0 || matches!(spec.kind, Kind::Server(_));
            assert!(refused, "{full_name} runs in scripts");
        }
    }

    #[test]
    fn unimplemented_noscript_commands_get_redis_refusal() {
        let refusal = |line: &str| {
            let argv: Vec<Vec<u8>> = line.split(' ').map(|p| p.as_bytes().to_vec()).collect();
            refused_in_scripts(&argv)
        };
        let not_allowed = Some("This Redis command is not allowed from script");
        let wrong_arity = Some("Wrong number of args calling Redis command from script");
        assert_eq!(refusal("DEBUG sleep 0"), not_allowed);
        assert_eq!(refusal("debug"), wrong_arity);
        assert_eq!(refusal("SHUTDOWN"), not_allowed);
        assert_eq!(refusal("acl whoami"), not_allowed);
        assert_eq!(refusal("acl whoami x"), wrong_arity);
        assert_eq!(refusal("acl"), wrong_arity);
        assert_eq!(refusal("acl nosuch"), None);
        assert_eq!(refusal("pfadd h a"), None);
    }
}
