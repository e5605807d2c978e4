//! String commands (`t_string.c`).

use super::{c_str, not_integer, parse_i64, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::number;
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
    argv: &mut [Vec<u8>],
    flags: &SetFlags,
    value_at: usize,
    expire: Option<(usize, ExpireUnit, ExpireKind)>,
    replies: Option<(Reply, Reply)>,
) -> Reply {
    let when = match expire {
        Some((at, unit, kind)) => match expire_ms(ctx, name, &argv[at], unit, kind) {
            Ok(ms) => Some(ms),
            Err(e) => return e,
        },
        None => None,
    };
    let key = &argv[1];
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
    let effect = if !ctx.core.config.propagates_effects {
        // Nothing reads the stream: the effect only names the key it writes (WATCH, blocked
        // clients), not a second copy of the value.
        vec![b"SET".to_vec(), key.clone()]
    } else if let Some(when) = when {
        vec![
            b"SET".to_vec(),
            key.clone(),
            argv[value_at].clone(),
            b"PXAT".to_vec(),
            when.to_string().into_bytes(),
        ]
    } else if flags.get {
        argv.iter()
            .enumerate()
            .filter(|(i, a)| *i < 3 || !c_str(a).eq_ignore_ascii_case(b"get"))
            .map(|(_, a)| a.clone())
            .collect()
    } else {
        argv.to_vec()
    };
    let value = ctx.take_arg(argv, value_at);
    let key = &argv[1];
    ctx.db().set(key, Value::Str(value), flags.keepttl);
    if let Some(when) = when {
        ctx.db().set_expire(key, when);
    }
    ctx.propagate(effect);
    if flags.get {
        return old;
    }
    replies.map(|(ok, _)| ok).unwrap_or_else(Reply::ok)
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ms-ts|KEEPTTL]
/// (`parseExtendedStringArgumentsOrReply`, note: a repeated EX/PX is accepted, the last wins).
pub fn set(ctx: &mut Ctx<'_>, argv: &mut [Vec<u8>]) -> Reply {
    let mut flags = SetFlags::default();
    let mut expire: Option<(usize, ExpireUnit, ExpireKind)> = None;
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
            expire = Some((j + 1, ExpireUnit::Seconds, ExpireKind::Relative));
            j += 1;
        } else if is("px") && !flags.keepttl && !flags.ex && !flags.exat && !flags.pxat && has_next
        {
            flags.px = true;
            expire = Some((j + 1, ExpireUnit::Milliseconds, ExpireKind::Relative));
            j += 1;
        } else if is("exat") && !flags.keepttl && !flags.ex && !flags.px && !flags.pxat && has_next
        {
            flags.exat = true;
            expire = Some((j + 1, ExpireUnit::Seconds, ExpireKind::Absolute));
            j += 1;
        } else if is("pxat") && !flags.keepttl && !flags.ex && !flags.exat && !flags.px && has_next
        {
            flags.pxat = true;
            expire = Some((j + 1, ExpireUnit::Milliseconds, ExpireKind::Absolute));
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    set_generic(ctx, "set", argv, &flags, 2, expire, None)
}

pub fn setnx(ctx: &mut Ctx<'_>, argv: &mut [Vec<u8>]) -> Reply {
    let flags = SetFlags {
        nx: true,
        ..SetFlags::default()
    };
    let replies = Some((Reply::Integer(1), Reply::Integer(0)));
    set_generic(ctx, "setnx", argv, &flags, 2, None, replies)
}

pub fn setex(ctx: &mut Ctx<'_>, argv: &mut [Vec<u8>]) -> Reply {
    let flags = SetFlags {
        ex: true,
        ..SetFlags::default()
    };
    let expire = Some((2, ExpireUnit::Seconds, ExpireKind::Relative));
    set_generic(ctx, "setex", argv, &flags, 3, expire, None)
}

pub fn psetex(ctx: &mut Ctx<'_>, argv: &mut [Vec<u8>]) -> Reply {
    let flags = SetFlags {
        px: true,
        ..SetFlags::default()
    };
    let expire = Some((2, ExpireUnit::Milliseconds, ExpireKind::Relative));
    set_generic(ctx, "psetex", argv, &flags, 3, expire, None)
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

/// `msetGenericCommand`: every key is looked up for writing (an expired one is deleted, and the
/// `DEL` propagated, first), set without its TTL; propagated verbatim. MSETNX sets nothing and
/// answers 0 if any key exists.
fn mset_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], nx: bool) -> Reply {
    if argv.len().is_multiple_of(2) {
        let name = if nx { "msetnx" } else { "mset" };
        return Reply::error(format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    if nx {
        for pair in argv[1..].chunks(2) {
            if ctx.lookup_mut(&pair[0]).is_some() {
                return Reply::Integer(0);
            }
        }
    }
    for pair in argv[1..].chunks(2) {
        ctx.lookup_mut(&pair[0]);
        ctx.db().set(&pair[0], Value::Str(pair[1].clone()), false);
    }
    ctx.propagate(argv.to_vec());
    if nx { Reply::Integer(1) } else { Reply::ok() }
}

pub fn mset(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    mset_generic(ctx, argv, false)
}

pub fn msetnx(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    mset_generic(ctx, argv, true)
}

/// GETEX key [EX s|PX ms|EXAT ts|PXAT ms-ts|PERSIST] (`getexCommand`): options are parsed
/// first, then a missing key answers nil before the time is validated. Never propagated as
/// is: an expiry becomes `PEXPIREAT key <ms>` (`DEL key` if EXAT/PXAT is already past, on a
/// master), PERSIST becomes `PERSIST key` when a TTL was removed.
pub fn getex(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut persist = false;
    let mut expire: Option<(&[u8], ExpireUnit, ExpireKind)> = None;
    let mut j = 2;
    while j < argv.len() {
        let opt = c_str(&argv[j]);
        let has_next = j + 1 < argv.len();
        let is = |name: &str| opt.eq_ignore_ascii_case(name.as_bytes());
        let current = expire.map(|(_, unit, kind)| (unit, kind));
        let free_for = |unit, kind| !persist && current.is_none_or(|c| c == (unit, kind));
        let chosen = if is("persist") && expire.is_none() {
            persist = true;
            None
        } else if is("ex") && has_next && free_for(ExpireUnit::Seconds, ExpireKind::Relative) {
            Some((ExpireUnit::Seconds, ExpireKind::Relative))
        } else if is("px") && has_next && free_for(ExpireUnit::Milliseconds, ExpireKind::Relative) {
            Some((ExpireUnit::Milliseconds, ExpireKind::Relative))
        } else if is("exat") && has_next && free_for(ExpireUnit::Seconds, ExpireKind::Absolute) {
            Some((ExpireUnit::Seconds, ExpireKind::Absolute))
        } else if is("pxat") && has_next && free_for(ExpireUnit::Milliseconds, ExpireKind::Absolute)
        {
            Some((ExpireUnit::Milliseconds, ExpireKind::Absolute))
        } else {
            return syntax_error();
        };
        if let Some((unit, kind)) = chosen {
            expire = Some((&argv[j + 1], unit, kind));
            j += 1;
        }
        j += 1;
    }
    let key = &argv[1];
    let value = match get_string(ctx, key) {
        Ok(Some(v)) => v,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    let when = match expire {
        Some((arg, unit, kind)) => match expire_ms(ctx, "getex", arg, unit, kind) {
            Ok(ms) => Some((ms, kind)),
            Err(e) => return e,
        },
        None => None,
    };
    match when {
        Some((ms, ExpireKind::Absolute)) if ms <= ctx.now && !ctx.is_replica() => {
            ctx.db().remove(key);
            ctx.propagate(vec![b"DEL".to_vec(), key.clone()]);
        }
        Some((ms, _)) => {
            ctx.db().set_expire(key, ms);
            ctx.propagate(vec![
                b"PEXPIREAT".to_vec(),
                key.clone(),
                ms.to_string().into_bytes(),
            ]);
        }
        None if persist && ctx.db().persist(key) => {
            ctx.propagate(vec![b"PERSIST".to_vec(), key.clone()]);
        }
        None => {}
    }
    Reply::Bulk(value)
}

/// GETRANGE key start end (`getrangeCommand`): C's index arithmetic, wrapping included.
pub fn getrange(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut start = match parse_i64(&argv[2]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut end = match parse_i64(&argv[3]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let s = match get_string(ctx, &argv[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Bulk(Vec::new()),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Reply::Bulk(Vec::new());
    }
    if start < 0 {
        start = len.wrapping_add(start);
    }
    if end < 0 {
        end = len.wrapping_add(end);
    }
    start = start.max(0);
    end = end.max(0);
    if end as u64 >= len as u64 {
        end = len - 1;
    }
    if start > end || len == 0 {
        return Reply::Bulk(Vec::new());
    }
    Reply::Bulk(s[start as usize..=end as usize].to_vec())
}

/// `checkStringLength`: a string may not outgrow proto-max-bulk-len (the master's stream is
/// exempt, `mustObeyClient`).
fn check_string_length(ctx: &Ctx<'_>, size: i64, append: i64) -> Result<(), Reply> {
    if ctx.from_master {
        return Ok(());
    }
    match size.checked_add(append) {
        Some(total) if total <= crate::redis::resp::PROTO_MAX_BULK_LEN => Ok(()),
        _ => Err(Reply::error(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        )),
    }
}

/// SETRANGE key offset value (`setrangeCommand`): zero-padded; an empty value writes nothing
/// (and creates no key); propagated verbatim when it wrote.
pub fn setrange(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let offset = match parse_i64(&argv[2]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    if offset < 0 {
        return Reply::error("ERR offset is out of range");
    }
    let (key, value) = (&argv[1], &argv[3]);
    let exists = match ctx.lookup(key).map(|e| &e.value) {
        None => false,
        Some(Value::Str(_)) => true,
        Some(_) => return wrongtype(),
    };
    if value.is_empty() {
        return match ctx.lookup(key).map(|e| &e.value) {
            Some(Value::Str(s)) => Reply::Integer(s.len() as i64),
            _ => Reply::Integer(0),
        };
    }
    if let Err(e) = check_string_length(ctx, offset, value.len() as i64) {
        return e;
    }
    if !exists {
        ctx.db().set(key, Value::Str(Vec::new()), false);
    }
    let Some(Value::Str(s)) = ctx.db().get_mut(key).map(|e| &mut e.value) else {
        return wrongtype();
    };
    let offset = offset as usize;
    if s.len() < offset + value.len() {
        s.resize(offset + value.len(), 0);
    }
    s[offset..offset + value.len()].copy_from_slice(value);
    let len = s.len() as i64;
    ctx.propagate(argv.to_vec());
    Reply::Integer(len)
}

/// INCRBYFLOAT key increment (`incrbyfloatCommand`): `long double` arithmetic and formatting
/// (`number::long_double_add_human`), the TTL kept; propagated as `SET key <value> KEEPTTL`.
pub fn incrbyfloat(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let key = &argv[1];
    let current = match ctx.lookup(key).map(|e| &e.value) {
        None => None,
        Some(Value::Str(s)) => Some(s.clone()),
        Some(_) => return wrongtype(),
    };
    let valid = |s: &[u8]| number::check_long_double(s) != number::LongDouble::Invalid;
    if !current.as_deref().is_none_or(valid) || !valid(&argv[2]) {
        return super::not_float();
    }
    let Some(value) = number::long_double_add_human(current.as_deref(), &argv[2]) else {
        return Reply::error("ERR increment would produce NaN or Infinity");
    };
    match ctx.db().get_mut(key) {
        Some(entry) => entry.value = Value::Str(value.clone()),
        None => ctx.db().set(key, Value::Str(value.clone()), false),
    }
    ctx.propagate(vec![
        b"SET".to_vec(),
        key.clone(),
        value.clone(),
        b"KEEPTTL".to_vec(),
    ]);
    Reply::Bulk(value)
}
