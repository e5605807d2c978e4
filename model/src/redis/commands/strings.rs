//! String commands (`t_string.c`).

use super::{c_str, not_integer, parse_i64, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;

/// `getGenericCommand`: the string value, nil, or WRONGTYPE.
fn get_string(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    match ctx.lookup(key) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::Str(s) => Ok(Some(s.clone())),
            _ => Err(wrongtype()),
        },
    }
}

pub fn get(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match get_string(ctx, &argv[1]) {
        Ok(Some(v)) => Reply::Bulk(v),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

pub fn mget(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut out = Vec::with_capacity(argv.len() - 1);
    for key in &argv[1..] {
        out.push(match ctx.lookup(key).map(|e| &e.value) {
            Some(Value::Str(s)) => Reply::Bulk(s.clone()),
            _ => Reply::Nil,
        });
    }
    Reply::Array(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpireUnit {
    Seconds,
    Milliseconds,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpireKind {
    /// EX / PX: relative to now.
    Relative,
    /// EXAT / PXAT: absolute.
    Absolute,
}

#[derive(Default)]
struct SetFlags {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    ex: bool,
    px: bool,
    exat: bool,
    pxat: bool,
}

impl SetFlags {
    fn any_expire(&self) -> bool {
        self.ex || self.px || self.exat || self.pxat
    }
}

/// `getExpireMillisecondsOrReply`: the absolute expiry in ms.
fn expire_ms(
    ctx: &Ctx<'_>,
    name: &str,
    arg: &[u8],
    unit: ExpireUnit,
    kind: ExpireKind,
) -> Result<i64, Reply> {
    let invalid = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
    let mut ms = parse_i64(arg)?;
    if ms <= 0 || (unit == ExpireUnit::Seconds && ms > i64::MAX / 1000) {
        return Err(invalid());
    }
    if unit == ExpireUnit::Seconds {
        ms *= 1000;
    }
    if kind == ExpireKind::Relative {
        ms = ms.wrapping_add(ctx.now);
    }
    if ms <= 0 {
        return Err(invalid());
    }
    Ok(ms)
}

/// `setGenericCommand`. `replies`: what to answer on success / on an NX/XX abort (SETNX
/// answers 1/0). Returns the reply; propagation follows Redis 7.0.15: any expiry option becomes
/// `SET key value PXAT <ms>` (NX/XX/GET dropped), otherwise GET is dropped; aborted sets
/// propagate nothing.
#[allow(clippy::too_many_arguments)]
fn set_generic(
    ctx: &mut Ctx<'_>,
    name: &str,
    argv: &[Vec<u8>],
    flags: &SetFlags,
    key: &[u8],
    value: &[u8],
    expire: Option<(&[u8], ExpireUnit, ExpireKind)>,
    replies: Option<(Reply, Reply)>,
) -> Reply {
    let when = match expire {
        Some((arg, unit, kind)) => match expire_ms(ctx, name, arg, unit, kind) {
            Ok(ms) => Some(ms),
            Err(e) => return e,
        },
        None => None,
    };
    let mut old = Reply::Nil;
    if flags.get {
        match get_string(ctx, key) {
            Ok(Some(v)) => old = Reply::Bulk(v),
            Ok(None) => {}
            Err(e) => return e,
        }
    }
    let found = ctx.lookup_mut(key).is_some();
    if (flags.nx && found) || (flags.xx && !found) {
        if flags.get {
            return old;
        }
        return replies.map(|(_, abort)| abort).unwrap_or(Reply::Nil);
    }
    ctx.db().set(key, Value::Str(value.to_vec()), flags.keepttl);
    if let Some(when) = when {
        ctx.db().set_expire(key, when);
    }
    match when {
        Some(when) => ctx.propagate(vec![
            b"SET".to_vec(),
            key.to_vec(),
            value.to_vec(),
            b"PXAT".to_vec(),
            when.to_string().into_bytes(),
        ]),
        _ if flags.get => ctx.propagate(
            argv.iter()
                .enumerate()
                .filter(|(i, a)| *i < 3 || !c_str(a).eq_ignore_ascii_case(b"get"))
                .map(|(_, a)| a.clone())
                .collect(),
        ),
        _ => ctx.propagate(argv.to_vec()),
    }
    if flags.get {
        return old;
    }
    replies.map(|(ok, _)| ok).unwrap_or_else(Reply::ok)
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ms-ts|KEEPTTL]
/// (`parseExtendedStringArgumentsOrReply`, note: a repeated EX/PX is accepted, the last wins).
pub fn set(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut flags = SetFlags::default();
    let mut expire: Option<(&[u8], ExpireUnit, ExpireKind)> = None;
    let mut j = 3;
    while j < argv.len() {
        let opt = c_str(&argv[j]);
        let has_next = j + 1 < argv.len();
        let is = |name: &str| opt.eq_ignore_ascii_case(name.as_bytes());
        if is("nx") && !flags.xx {
            flags.nx = true;
        } else if is("xx") && !flags.nx {
            flags.xx = true;
        } else if is("get") {
            flags.get = true;
        } else if is("keepttl") && !flags.any_expire() {
            flags.keepttl = true;
        } else if is("ex") && !flags.keepttl && !flags.exat && !flags.px && !flags.pxat && has_next
        {
            flags.ex = true;
            expire = Some((&argv[j + 1], ExpireUnit::Seconds, ExpireKind::Relative));
            j += 1;
        } else if is("px") && !flags.keepttl && !flags.ex && !flags.exat && !flags.pxat && has_next
        {
            flags.px = true;
            expire = Some((&argv[j + 1], ExpireUnit::Milliseconds, ExpireKind::Relative));
            j += 1;
        } else if is("exat") && !flags.keepttl && !flags.ex && !flags.px && !flags.pxat && has_next
        {
            flags.exat = true;
            expire = Some((&argv[j + 1], ExpireUnit::Seconds, ExpireKind::Absolute));
            j += 1;
        } else if is("pxat") && !flags.keepttl && !flags.ex && !flags.exat && !flags.px && has_next
        {
            flags.pxat = true;
            expire = Some((&argv[j + 1], ExpireUnit::Milliseconds, ExpireKind::Absolute));
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    set_generic(ctx, "set", argv, &flags, &argv[1], &argv[2], expire, None)
}

pub fn setnx(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let flags = SetFlags {
        nx: true,
        ..SetFlags::default()
    };
    let replies = Some((Reply::Integer(1), Reply::Integer(0)));
    set_generic(
        ctx, "setnx", argv, &flags, &argv[1], &argv[2], None, replies,
    )
}

pub fn setex(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let flags = SetFlags {
        ex: true,
        ..SetFlags::default()
    };
    let expire = Some((
        argv[2].as_slice(),
        ExpireUnit::Seconds,
        ExpireKind::Relative,
    ));
    set_generic(ctx, "setex", argv, &flags, &argv[1], &argv[3], expire, None)
}

pub fn psetex(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let flags = SetFlags {
        px: true,
        ..SetFlags::default()
    };
    let expire = Some((
        argv[2].as_slice(),
        ExpireUnit::Milliseconds,
        ExpireKind::Relative,
    ));
    set_generic(
        ctx, "psetex", argv, &flags, &argv[1], &argv[3], expire, None,
    )
}

/// GETSET: propagated as `SET key value`.
pub fn getset(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let old = match get_string(ctx, &argv[1]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    ctx.db().set(&argv[1], Value::Str(argv[2].clone()), false);
    ctx.propagate(vec![b"SET".to_vec(), argv[1].clone(), argv[2].clone()]);
    old.map_or(Reply::Nil, Reply::Bulk)
}

/// GETDEL: propagated as `DEL key`.
pub fn getdel(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match get_string(ctx, &argv[1]) {
        Ok(Some(v)) => {
            ctx.db().remove(&argv[1]);
            ctx.propagate(vec![b"DEL".to_vec(), argv[1].clone()]);
            Reply::Bulk(v)
        }
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

/// `incrDecrCommand`: the TTL is kept.
fn incr_decr(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], incr: i64) -> Reply {
    let key = &argv[1];
    let current = match ctx.lookup(key).map(|e| &e.value) {
        None => 0,
        Some(Value::Str(s)) => match crate::redis::number::string2ll(s) {
            Some(v) => v,
            None => return not_integer(),
        },
        Some(_) => return wrongtype(),
    };
    let Some(value) = current.checked_add(incr) else {
        return Reply::error("ERR increment or decrement would overflow");
    };
    let text = value.to_string().into_bytes();
    match ctx.db().get_mut(key) {
        Some(entry) => entry.value = Value::Str(text),
        None => ctx.db().set(key, Value::Str(text), false),
    }
    ctx.propagate(argv.to_vec());
    Reply::Integer(value)
}

pub fn incr(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    incr_decr(ctx, argv, 1)
}

pub fn decr(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    incr_decr(ctx, argv, -1)
}

pub fn incrby(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match parse_i64(&argv[2]) {
        Ok(incr) => incr_decr(ctx, argv, incr),
        Err(e) => e,
    }
}

pub fn decrby(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match parse_i64(&argv[2]) {
        Ok(i64::MIN) => Reply::error("ERR decrement would overflow"),
        Ok(decr) => incr_decr(ctx, argv, -decr),
        Err(e) => e,
    }
}

pub fn append(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let len = match ctx.lookup_mut(&argv[1]) {
        None => {
            ctx.db().set(&argv[1], Value::Str(argv[2].clone()), false);
            argv[2].len()
        }
        Some(entry) => match &mut entry.value {
            Value::Str(s) => {
                s.extend_from_slice(&argv[2]);
                s.len()
            }
            _ => return wrongtype(),
        },
    };
    ctx.propagate(argv.to_vec());
    Reply::Integer(len as i64)
}

pub fn strlen(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match get_string(ctx, &argv[1]) {
        Ok(v) => Reply::Integer(v.map_or(0, |s| s.len() as i64)),
        Err(e) => e,
    }
}
