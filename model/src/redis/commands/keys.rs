//! Keyspace commands (`db.c`) and expiry commands (`expire.c`).

use super::{c_str, error_with, glob_match, is_opt, parse_i64, syntax_error};
pub(super) use crate::redis::keyspace::scan_slot;
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;

/// `delGenericCommand`: expired keys are deleted (and propagated) by the lookup, not counted.
fn del_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut deleted = 0;
    for key in &argv[1..] {
        ctx.expire_if_needed(key);
        if ctx.db().remove(key).is_some() {
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
            return Err(error_with(&[b"ERR Unsupported option ", o]));
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
    let invalid = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
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
        let current = ctx.db().expire_of(key);
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
        ctx.db().remove(key);
        ctx.propagate(vec![b"DEL".to_vec(), key.clone()]);
        return Reply::Integer(1);
    }
    ctx.db().set_expire(key, when);
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
    match ctx.db().expire_of(key) {
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
    match ctx.db().expire_of(key) {
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
    if ctx.lookup_mut(&argv[1]).is_none() || !ctx.db().persist(&argv[1]) {
        return Reply::Integer(0);
    }
    ctx.propagate(argv.to_vec());
    Reply::Integer(1)
}

/// DBSIZE counts keys not yet reclaimed, expired or not, like `dictSize`.
pub fn dbsize(ctx: &mut Ctx<'_>, _argv: &[Vec<u8>]) -> Reply {
    Reply::Integer(ctx.db().len() as i64)
}

/// `getFlushCommandFlags`: an optional SYNC or ASYNC.
fn flush_flags_ok(argv: &[Vec<u8>]) -> bool {
    argv.len() == 1 || (argv.len() == 2 && (is_opt(&argv[1], "sync") || is_opt(&argv[1], "async")))
}

/// FLUSHDB: empties the client's database; watchers of its keys fail their EXEC.
pub fn flushdb(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if !flush_flags_ok(argv) {
        return syntax_error();
    }
    let db = ctx.db;
    ctx.core.touch_all_watched_in_db(db);
    ctx.db().clear();
    ctx.propagate(argv.to_vec());
    Reply::ok()
}

/// FLUSHALL: empties every database.
pub fn flushall(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    if !flush_flags_ok(argv) {
        return syntax_error();
    }
    for db in 0..ctx.core.dbs.len() {
        ctx.core.touch_all_watched_in_db(db);
        ctx.core.dbs[db].clear();
    }
    ctx.propagate(argv.to_vec());
    Reply::ok()
}

/// KEYS pattern (`keysCommand`): the matching keys that are not logically expired (not
/// deleted here), in key order (Redis: dict order).
pub fn keys(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let pattern = &argv[1];
    let all = pattern.as_slice() == b"*";
    let now = ctx.now;
    let db = ctx.db();
    Reply::Array(
        db.keys()
            .filter(|k| all || glob_match(pattern, k, false))
            .filter(|k| !db.is_expired(k, now))
            .map(|k| Reply::Bulk(k.clone()))
            .collect(),
    )
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] (`scanGenericCommand`): a hash-table
/// walk of the keyspace ([`scan_walk`]; Redis: a reverse-binary cursor over hash buckets).
pub fn scan(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_cursor(&argv[1]) else {
        return Reply::error("ERR invalid cursor");
    };
    let opts = match scan_options(argv, 2, true) {
        Ok(opts) => opts,
        Err(e) => return e,
    };
    let (visited, next) = ctx.db().scan_keys(cursor, opts.count);
    let mut found = Vec::new();
    for key in visited {
        if !opts.matches(&key) {
            continue;
        }
        let type_name = match ctx.lookup(&key) {
            None => continue,
            Some(entry) => entry.value.type_name(),
        };
        if opts
            .kind
            .is_some_and(|k| !type_name.as_bytes().eq_ignore_ascii_case(c_str(k)))
        {
            continue;
        }
        found.push(key);
    }
    scan_reply(next, found)
}

/// The options after the cursor (`scanGenericCommand` step 1), shared by SCAN, SSCAN, HSCAN and
/// ZSCAN: COUNT (at least 1), MATCH (`*` is dropped as a no-op) and, for SCAN only, TYPE.
pub(super) struct ScanOptions<'a> {
    pub count: usize,
    pub pattern: Option<&'a [u8]>,
    pub kind: Option<&'a [u8]>,
}

impl ScanOptions<'_> {
    /// MATCH filters by the element (a field or member: never by a value or score).
    pub fn matches(&self, element: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, element, false))
    }
}

/// Parses the options from `argv[first]` on; `keyspace` allows TYPE (SCAN itself).
pub(super) fn scan_options(
    argv: &[Vec<u8>],
    first: usize,
    keyspace: bool,
) -> Result<ScanOptions<'_>, Reply> {
    let mut opts = ScanOptions {
        count: 10,
        pattern: None,
        kind: None,
    };
    let mut i = first;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        if is_opt(&argv[i], "count") && more >= 1 {
            match crate::redis::number::string2ll(&argv[i + 1]) {
                None => return Err(super::not_integer()),
                Some(n) if n < 1 => return Err(syntax_error()),
                Some(n) => opts.count = usize::try_from(n).unwrap_or(usize::MAX),
            }
        } else if is_opt(&argv[i], "match") && more >= 1 {
            opts.pattern = Some(argv[i + 1].as_slice()).filter(|p| *p != b"*");
        } else if keyspace && is_opt(&argv[i], "type") && more >= 1 {
            opts.kind = Some(&argv[i + 1]);
        } else {
            return Err(syntax_error());
        }
        i += 2;
    }
    Ok(opts)
}

/// One call of a hash-table walk (`dictScan`'s guarantee, without its buckets): elements are
/// visited in slot order from the cursor, about COUNT of them (elements sharing a slot are
/// never split), and the next cursor is the next slot, 0 once the walk is complete. Elements
/// added or removed meanwhile shift nothing, so every element present for the whole walk is
/// returned, once.
pub(super) fn scan_walk<T>(
    elements: impl Iterator<Item = (u64, T)>,
    cursor: u64,
    count: usize,
) -> (Vec<T>, u64) {
    let mut pending: Vec<(u64, T)> = elements.filter(|(slot, _)| *slot >= cursor).collect();
    let mut next = 0;
    if count < pending.len() {
        pending.select_nth_unstable_by_key(count, |(slot, _)| *slot);
        let pivot = pending[count].0;
        let limit = if pending[..count].iter().any(|(slot, _)| *slot < pivot) {
            pivot
        } else {
            pivot + 1
        };
        let (taken, rest): (Vec<_>, Vec<_>) =
            pending.into_iter().partition(|(slot, _)| *slot < limit);
        next = rest.iter().map(|(slot, _)| *slot).min().unwrap_or(0);
        pending = taken;
    }
    pending.sort_by_key(|(slot, _)| *slot);
    (pending.into_iter().map(|(_, e)| e).collect(), next)
}

/// `[cursor, [element, ...]]`, the same in RESP2 and RESP3.
pub(super) fn scan_reply(cursor: u64, elements: Vec<Vec<u8>>) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(cursor.to_string().into_bytes()),
        Reply::Array(elements.into_iter().map(Reply::Bulk).collect()),
    ])
}

/// `parseScanCursorOrReply`: `strtoul` over the whole argument (an optional sign, a negative
/// number wraps around, no digits at all is 0), no leading space, no overflow.
pub(super) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let arg = c_str(arg);
    if arg
        .first()
        .is_some_and(|c| c.is_ascii_whitespace() || *c == 0x0b)
    {
        return None;
    }
    let (negative, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return arg.is_empty().then_some(0);
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// `renameGenericCommand`: the value moves with its TTL, replacing (RENAME) or not (RENAMENX)
/// an existing destination; the same name is a no-op once the key is known to exist.
/// Propagated verbatim when it moved something.
fn rename_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], nx: bool) -> Reply {
    let (src, dst) = (&argv[1], &argv[2]);
    if ctx.lookup_mut(src).is_none() {
        return Reply::error("ERR no such key");
    }
    if src == dst {
        return if nx { Reply::Integer(0) } else { Reply::ok() };
    }
    if ctx.lookup_mut(dst).is_some() {
        if nx {
            return Reply::Integer(0);
        }
        ctx.db().remove(dst);
    }
    let Some(entry) = ctx.db().remove(src) else {
        return Reply::error("ERR no such key");
    };
    ctx.db().set(dst, entry.value, false);
    if let Some(when) = entry.expire_at {
        ctx.db().set_expire(dst, when);
    }
    ctx.propagate(argv.to_vec());
    if nx { Reply::Integer(1) } else { Reply::ok() }
}

pub fn rename(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    rename_generic(ctx, argv, false)
}

pub fn renamenx(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    rename_generic(ctx, argv, true)
}

/// TOUCH key [key ...] (`touchCommand`): how many exist (an expired one is deleted on the way).
pub fn touch(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    exists(ctx, argv)
}

/// COPY source destination [DB index] [REPLACE] (`copyCommand`): the value and its TTL are
/// duplicated into the destination database; an existing destination is kept (answer 0)
/// unless REPLACE. Propagated verbatim.
pub fn copy(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let src_db = ctx.db;
    let mut dst_db = ctx.db;
    let mut replace = false;
    let mut j = 3;
    while j < argv.len() {
        if is_opt(&argv[j], "replace") {
            replace = true;
        } else if is_opt(&argv[j], "db") && j + 1 < argv.len() {
            let index = match parse_i64(&argv[j + 1]) {
                Ok(v) if i32::try_from(v).is_ok() => v,
                Ok(_) => {
                    return Reply::error(
                        "ERR value is out of range, value must between -2147483648 and 2147483647",
                    );
                }
                Err(e) => return e,
            };
            match usize::try_from(index) {
                Ok(i) if i < ctx.core.dbs.len() => dst_db = i,
                _ => return Reply::error("ERR DB index is out of range"),
            }
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let (key, newkey) = (&argv[1], &argv[2]);
    if src_db == dst_db && key == newkey {
        return Reply::error("ERR source and destination objects are the same");
    }
    let Some(entry) = ctx.lookup(key).cloned() else {
        return Reply::Integer(0);
    };
    ctx.db = dst_db;
    let exists = ctx.lookup_mut(newkey).is_some();
    if exists && !replace {
        ctx.db = src_db;
        return Reply::Integer(0);
    }
    ctx.db().remove(newkey);
    ctx.db().set(newkey, entry.value, false);
    if let Some(when) = entry.expire_at {
        ctx.db().set_expire(newkey, when);
    }
    ctx.db = src_db;
    ctx.propagate(argv.to_vec());
    Reply::Integer(1)
}
