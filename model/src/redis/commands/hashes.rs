//! Hash commands (`t_hash.c`).

use super::keys::{parse_cursor, scan_options, scan_reply, scan_slot, scan_walk};
use super::{parse_i64, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;
use crate::redis::types::HashValue;

/// `hashTypeLookupWriteOrCreate` without the create: `Err` on WRONGTYPE.
fn read_hash<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a HashValue>, Reply> {
    match ctx.lookup(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(wrongtype()),
    }
}

/// The hash at `key`, created empty if missing.
fn write_hash<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<&'a mut HashValue, Reply> {
    match ctx.lookup(key).map(|e| &e.value) {
        None => {
            ctx.db().insert_new(key, Value::Hash(HashValue::default()));
        }
        Some(Value::Hash(_)) => {}
        Some(_) => return Err(wrongtype()),
    }
    match ctx.db().get_mut(key).map(|e| &mut e.value) {
        Some(Value::Hash(h)) => Ok(h),
        _ => Err(wrongtype()),
    }
}

/// `hsetCommand` (HSET and HMSET): always propagated verbatim. HSET answers the number of new
/// fields, HMSET `+OK`.
fn hset_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], name: &str) -> Reply {
    if argv.len() % 2 == 1 {
        return Reply::error(format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let hash = match write_hash(ctx, &argv[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let created = argv[2..]
        .chunks(2)
        .filter(|pair| hash.set(&pair[0], pair[1].clone()))
        .count();
    ctx.propagate(argv.to_vec());
    if name == "hmset" {
        Reply::ok()
    } else {
        Reply::Integer(created as i64)
    }
}

pub fn hset(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    hset_generic(ctx, argv, "hset")
}

pub fn hmset(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    hset_generic(ctx, argv, "hmset")
}

/// `hsetnxCommand`: propagated only when the field was set.
pub fn hsetnx(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let hash = match write_hash(ctx, &argv[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    if hash.get(&argv[2]).is_some() {
        return Reply::Integer(0);
    }
    hash.set(&argv[2], argv[3].clone());
    ctx.propagate(argv.to_vec());
    Reply::Integer(1)
}

/// `hmgetCommand`: a missing key is an empty hash, one nil per field.
pub fn hmget(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let hash = match read_hash(ctx, &argv[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    Reply::Array(
        argv[2..]
            .iter()
            .map(|f| hash.and_then(|h| h.get(f)).map_or(Reply::Nil, Reply::bulk))
            .collect(),
    )
}

/// `genericHgetallCommand` for HKEYS / HVALS: a flat array in the order HGETALL uses.
fn hkeys_or_vals(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], keys: bool) -> Reply {
    match read_hash(ctx, &argv[1]) {
        Ok(h) => Reply::Array(
            h.into_iter()
                .flat_map(|h| h.iter())
                .map(|(f, v)| Reply::Bulk(if keys { f.clone() } else { v.clone() }))
                .collect(),
        ),
        Err(e) => e,
    }
}

pub fn hkeys(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    hkeys_or_vals(ctx, argv, true)
}

pub fn hvals(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    hkeys_or_vals(ctx, argv, false)
}

/// `hstrlenCommand`: 0 for a missing key or field.
pub fn hstrlen(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &argv[1]) {
        Ok(h) => Reply::Integer(
            h.and_then(|h| h.get(&argv[2]))
                .map_or(0, |v| v.len() as i64),
        ),
        Err(e) => e,
    }
}

pub fn hget(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &argv[1]) {
        Ok(h) => h
            .and_then(|h| h.get(&argv[2]))
            .map_or(Reply::Nil, Reply::bulk),
        Err(e) => e,
    }
}

pub fn hgetall(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &argv[1]) {
        Ok(h) => Reply::Map(
            h.into_iter()
                .flat_map(|h| h.iter())
                .map(|(f, v)| (Reply::Bulk(f.clone()), Reply::Bulk(v.clone())))
                .collect(),
        ),
        Err(e) => e,
    }
}

pub fn hexists(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &argv[1]) {
        Ok(h) => Reply::Integer(i64::from(h.is_some_and(|h| h.get(&argv[2]).is_some()))),
        Err(e) => e,
    }
}

pub fn hlen(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_hash(ctx, &argv[1]) {
        Ok(h) => Reply::Integer(h.map_or(0, |h| h.len() as i64)),
        Err(e) => e,
    }
}

pub fn hincrby(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let incr = match parse_i64(&argv[3]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let hash = match write_hash(ctx, &argv[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let current = match hash.get(&argv[2]) {
        None => 0,
        Some(v) => match crate::redis::number::string2ll(v) {
            Some(v) => v,
            None => return Reply::error("ERR hash value is not an integer"),
        },
    };
    let Some(value) = current.checked_add(incr) else {
        return Reply::error("ERR increment or decrement would overflow");
    };
    hash.set(&argv[2], value.to_string().into_bytes());
    ctx.propagate(argv.to_vec());
    Reply::Integer(value)
}

/// HINCRBYFLOAT key field increment (`hincrbyfloatCommand`): the increment is checked before
/// the key's type; `long double` arithmetic and formatting as INCRBYFLOAT
/// (`number::long_double_add_human`); propagated as `HSET key field <value>`.
pub fn hincrbyfloat(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    use crate::redis::number::{LongDouble, check_long_double, long_double_add_human};
    match check_long_double(&argv[3]) {
        LongDouble::Invalid => return super::not_float(),
        LongDouble::Infinite => return Reply::error("ERR value is NaN or Infinity"),
        LongDouble::Finite => {}
    }
    let hash = match write_hash(ctx, &argv[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let current = hash.get(&argv[2]);
    if current.is_some_and(|v| check_long_double(v) == LongDouble::Invalid) {
        return Reply::error("ERR hash value is not a float");
    }
    let Some(value) = long_double_add_human(current, &argv[3]) else {
        return Reply::error("ERR increment would produce NaN or Infinity");
    };
    hash.set(&argv[2], value.clone());
    ctx.propagate(vec![
        b"HSET".to_vec(),
        argv[1].clone(),
        argv[2].clone(),
        value.clone(),
    ]);
    Reply::Bulk(value)
}

pub fn hdel(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let key = &argv[1];
    let deleted = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        None => return Reply::Integer(0),
        Some(Value::Hash(h)) => argv[2..].iter().filter(|f| h.remove(f)).count(),
        Some(_) => return wrongtype(),
    };
    if deleted > 0 {
        ctx.db().remove_if_empty(key);
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(deleted as i64)
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] (`hscanCommand`, `scanGenericCommand`): field
/// and value pairs, MATCH testing the field. A listpack answers whole in its order with cursor
/// 0, whatever the cursor and COUNT, as in Redis; a hash table is walked as SCAN walks the
/// keyspace (`scan_walk`).
pub fn hscan(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_cursor(&argv[2]) else {
        return Reply::error("ERR invalid cursor");
    };
    let hash = match read_hash(ctx, &argv[1]) {
        Ok(Some(h)) => h,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match scan_options(argv, 3, false) {
        Ok(opts) => opts,
        Err(e) => return e,
    };
    let pairs = hash.iter().map(|pair| (scan_slot(&pair.0), pair));
    let (visited, next) = if hash.is_table() {
        scan_walk(pairs, cursor, opts.count)
    } else {
        (pairs.map(|(_, pair)| pair).collect(), 0)
    };
    let found = visited
        .into_iter()
        .filter(|(field, _)| opts.matches(field))
        .flat_map(|(field, value)| [field.clone(), value.clone()])
        .collect();
    scan_reply(next, found)
}
