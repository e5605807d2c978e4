//! Keyspace commands (`db.c`) and expiry commands (`expire.c`).

use super::{c_str, lossy, not_integer, parse_i64, syntax_error};
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;

/// `delGenericCommand`: expired keys are deleted (and propagated) by the lookup, not counted.
fn del_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut deleted = 0;
    for key in &argv[1..] {
        ctx.expire_if_needed(key);
        if ctx.core.db.remove(key).is_some() {
            deleted += 1;
        }
    }
    if deleted > 0 {
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(deleted)
}

pub fn del(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    del_generic(ctx, argv)
}

pub fn unlink(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    del_generic(ctx, argv)
}

pub fn exists(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut count = 0;
    for key in &argv[1..] {
        if ctx.exists(key) {
            count += 1;
        }
    }
    Reply::Integer(count)
}

pub fn type_cmd(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let name = ctx.lookup(&argv[1]).map_or("none", |e| e.value.type_name());
    Reply::Status(name.to_string())
}

const EXPIRE_NX: u8 = 1;
const EXPIRE_XX: u8 = 2;
const EXPIRE_GT: u8 = 4;
const EXPIRE_LT: u8 = 8;

/// `parseExtendedExpireArgumentsOrReply`.
fn parse_expire_flags(argv: &[Vec<u8>]) -> Result<u8, Reply> {
    let mut flags = 0;
    for opt in &argv[3..] {
        let o = c_str(opt);
        flags |= if o.eq_ignore_ascii_case(b"nx") {
            EXPIRE_NX
        } else if o.eq_ignore_ascii_case(b"xx") {
            EXPIRE_XX
        } else if o.eq_ignore_ascii_case(b"gt") {
            EXPIRE_GT
        } else if o.eq_ignore_ascii_case(b"lt") {
            EXPIRE_LT
        } else {
            return Err(Reply::Error(format!("ERR Unsupported option {}", lossy(o))));
        };
    }
    if flags & EXPIRE_NX != 0 && flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT) != 0 {
        return Err(Reply::error(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if flags & EXPIRE_GT != 0 && flags & EXPIRE_LT != 0 {
        return Err(Reply::error(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(flags)
}

/// `expireGenericCommand`: a time in the past deletes the key (propagated as `DEL`), otherwise
/// the absolute expiry is set and propagated as `PEXPIREAT key <ms> [flags]`.
fn expire_generic(
    ctx: &mut Ctx<'_>,
    argv: &[Vec<u8>],
    name: &str,
    relative: bool,
    seconds: bool,
) -> Reply {
    let invalid = || Reply::Error(format!("ERR invalid expire time in '{name}' command"));
    let flags = match parse_expire_flags(argv) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let mut when = match parse_i64(&argv[2]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return invalid();
        }
        when *= 1000;
    }
    let basetime = if relative { ctx.now } else { 0 };
    if when > i64::MAX - basetime {
        return invalid();
    }
    when += basetime;
    let key = &argv[1];
    if ctx.lookup_mut(key).is_none() {
        return Reply::Integer(0);
    }
    if flags != 0 {
        let current = ctx.core.db.expire_of(key);
        if flags & EXPIRE_NX != 0 && current.is_some() {
            return Reply::Integer(0);
        }
        if flags & EXPIRE_XX != 0 && current.is_none() {
            return Reply::Integer(0);
        }
        if flags & EXPIRE_GT != 0 && current.is_none_or(|c| when <= c) {
            return Reply::Integer(0);
        }
        if flags & EXPIRE_LT != 0 && current.is_some_and(|c| when >= c) {
            return Reply::Integer(0);
        }
    }
    if when <= ctx.now && !ctx.is_replica() {
        ctx.core.db.remove(key);
        ctx.propagate(vec![b"DEL".to_vec(), key.clone()]);
        return Reply::Integer(1);
    }
    ctx.core.db.set_expire(key, when);
    let mut out = argv.to_vec();
    out[0] = b"PEXPIREAT".to_vec();
    out[2] = when.to_string().into_bytes();
    if name == "pexpireat" {
        out[0] = argv[0].clone();
        out[2] = argv[2].clone();
    }
    ctx.propagate(out);
    Reply::Integer(1)
}

pub fn expire(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, argv, "expire", true, true)
}

pub fn pexpire(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, argv, "pexpire", true, false)
}

pub fn expireat(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, argv, "expireat", false, true)
}

pub fn pexpireat(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    expire_generic(ctx, argv, "pexpireat", false, false)
}

/// `ttlGenericCommand`: -2 missing, -1 no TTL, else the remaining time (TTL rounds to seconds).
fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], ms: bool) -> Reply {
    if ctx.lookup(key).is_none() {
        return Reply::Integer(-2);
    }
    match ctx.core.db.expire_of(key) {
        None => Reply::Integer(-1),
        Some(when) => {
            let ttl = (when - ctx.now).max(0);
            Reply::Integer(if ms { ttl } else { (ttl + 500) / 1000 })
        }
    }
}

pub fn ttl(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    ttl_generic(ctx, &argv[1], false)
}

pub fn pttl(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    ttl_generic(ctx, &argv[1], true)
}

/// EXPIRETIME / PEXPIRETIME (7.0): the absolute expiry.
fn expiretime_generic(ctx: &mut Ctx<'_>, key: &[u8], ms: bool) -> Reply {
    if ctx.lookup(key).is_none() {
        return Reply::Integer(-2);
    }
    match ctx.core.db.expire_of(key) {
        None => Reply::Integer(-1),
        Some(when) => Reply::Integer(if ms { when } else { (when + 500) / 1000 }),
    }
}

pub fn expiretime(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    expiretime_generic(ctx, &argv[1], false)
}

pub fn pexpiretime(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    expiretime_generic(ctx, &argv[1], true)
}

pub fn persist(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if ctx.lookup_mut(&argv[1]).is_none() || !ctx.core.db.persist(&argv[1]) {
        return Reply::Integer(0);
    }
    ctx.propagate(argv.to_vec());
    Reply::Integer(1)
}

/// DBSIZE counts keys not yet reclaimed, expired or not, like `dictSize`.
pub fn dbsize(ctx: &mut Ctx<'_>, _argv: &[Vec<u8>]) -> Reply {
    Reply::Integer(ctx.core.db.len() as i64)
}

/// `getFlushCommandFlags`: an optional SYNC or ASYNC.
fn flush_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if argv.len() > 2 {
        return syntax_error();
    }
    if argv.len() == 2 && !(super::is_opt(&argv[1], "sync") || super::is_opt(&argv[1], "async")) {
        return syntax_error();
    }
    ctx.core.db.clear();
    ctx.propagate(argv.to_vec());
    Reply::ok()
}

pub fn flushdb(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    flush_generic(ctx, argv)
}

pub fn flushall(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    flush_generic(ctx, argv)
}

/// SELECT: this server has one database (as `redis-server --databases 1`).
pub fn select(_ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match crate::redis::number::string2ll(&argv[1]).and_then(|v| i32::try_from(v).ok()) {
        None => not_integer(),
        Some(0) => Reply::ok(),
        Some(_) => Reply::error("ERR DB index is out of range"),
    }
}
