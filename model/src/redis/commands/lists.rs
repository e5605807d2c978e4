//! List commands (`t_list.c`).

use std::collections::VecDeque;

use super::{is_opt, parse_i64, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;

fn read_list<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a VecDeque<Vec<u8>>>, Reply> {
    match ctx.lookup(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(wrongtype()),
    }
}

/// `pushGenericCommand`: elements are pushed one by one (LPUSH a b c gives c b a). With `xx`
/// (LPUSHX, RPUSHX) a missing key answers 0 and nothing is propagated.
fn push(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], head: bool, xx: bool) -> Reply {
    let key = &argv[1];
    match ctx.lookup(key).map(|e| &e.value) {
        None if xx => return Reply::Integer(0),
        None => {
            ctx.db().insert_new(key, Value::List(VecDeque::new()));
        }
        Some(Value::List(_)) => {}
        Some(_) => return wrongtype(),
    }
    let Some(Value::List(list)) = ctx.db().get_mut(key).map(|e| &mut e.value) else {
        return wrongtype();
    };
    for el in &argv[2..] {
        if head {
            list.push_front(el.clone());
        } else {
            list.push_back(el.clone());
        }
    }
    let len = list.len();
    ctx.propagate(argv.to_vec());
    Reply::Integer(len as i64)
}

pub fn lpush(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    push(ctx, argv, true, false)
}

pub fn rpush(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    push(ctx, argv, false, false)
}

pub fn lpushx(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    push(ctx, argv, true, true)
}

pub fn rpushx(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    push(ctx, argv, false, true)
}

/// `popGenericCommand`: without a count one bulk (or nil); with a count an array (or a null
/// array when the key is missing).
fn pop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], head: bool) -> Reply {
    if argv.len() > 3 {
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        return Reply::error(format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let count = if argv.len() == 3 {
        match crate::redis::number::string2ll(&argv[2]) {
            Some(c) if c >= 0 => Some(c),
            _ => return Reply::error("ERR value is out of range, must be positive"),
        }
    } else {
        None
    };
    let key = &argv[1];
    let list = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        // `popGenericCommand`: the null array when a count was given.
        None if count.is_some() => return Reply::NilArray,
        None => return Reply::Nil,
        Some(Value::List(l)) => l,
        Some(_) => return wrongtype(),
    };
    let take = |list: &mut VecDeque<Vec<u8>>| {
        if head {
            list.pop_front()
        } else {
            list.pop_back()
        }
    };
    let reply = match count {
        Some(0) => return Reply::Array(vec![]),
        None => Reply::Bulk(take(list).expect("lists are never empty")),
        Some(n) => {
            let n = (n as usize).min(list.len());
            Reply::Array((0..n).filter_map(|_| take(list)).map(Reply::Bulk).collect())
        }
    };
    ctx.db().remove_if_empty(key);
    ctx.propagate(argv.to_vec());
    reply
}

pub fn lpop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    pop(ctx, argv, true)
}

pub fn rpop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    pop(ctx, argv, false)
}

/// LINDEX key index (`lindexCommand`): a missing key answers nil before the index is parsed.
pub fn lindex(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let list = match read_list(ctx, &argv[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Nil,
        Ok(Some(list)) => list,
    };
    let Some(index) = crate::redis::number::string2ll(&argv[2]) else {
        return super::not_integer();
    };
    let len = list.len() as i64;
    let i = if index < 0 { len + index } else { index };
    if (0..len).contains(&i) {
        Reply::Bulk(list[i as usize].clone())
    } else {
        Reply::Nil
    }
}

pub fn lrange(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let (mut start, mut end) = match (parse_i64(&argv[2]), parse_i64(&argv[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let list = match read_list(ctx, &argv[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(vec![]),
        Ok(Some(list)) => list,
    };
    let len = list.len() as i64;
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    if start > end || start >= len {
        return Reply::Array(vec![]);
    }
    end = end.min(len - 1);
    Reply::Array(
        (start..=end)
            .map(|i| Reply::Bulk(list[i as usize].clone()))
            .collect(),
    )
}

/// LREM key count element: count > 0 from the head, < 0 from the tail, 0 all.
pub fn lrem(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let count = match parse_i64(&argv[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let key = &argv[1];
    let list = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        None => return Reply::Integer(0),
        Some(Value::List(l)) => l,
        Some(_) => return wrongtype(),
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0;
    if count >= 0 {
        let mut i = 0;
        while i < list.len() && removed < limit {
            if list[i] == argv[3] {
                list.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
    } else {
        let mut i = list.len();
        while i > 0 && removed < limit {
            i -= 1;
            if list[i] == argv[3] {
                list.remove(i);
                removed += 1;
            }
        }
    }
    if removed > 0 {
        ctx.db().remove_if_empty(key);
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(removed as i64)
}

pub fn llen(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_list(ctx, &argv[1]) {
        Ok(l) => Reply::Integer(l.map_or(0, |l| l.len() as i64)),
        Err(e) => e,
    }
}

/// LTRIM key start stop (`ltrimCommand`): indexes are parsed before the key is looked up; a
/// missing key is `+OK`. Propagated only when it removed something, but the key counts as
/// modified for WATCH either way (`signalModifiedKey`).
pub fn ltrim(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let (start, end) = match (parse_i64(&argv[2]), parse_i64(&argv[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let key = &argv[1];
    let list = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        None => return Reply::ok(),
        Some(Value::List(l)) => l,
        Some(_) => return wrongtype(),
    };
    let len = list.len() as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end };
    let (ltrim, rtrim) = if start > end || start >= len {
        (len, 0)
    } else {
        (start, len - end.min(len - 1) - 1)
    };
    list.drain(..ltrim as usize);
    list.truncate(list.len() - rtrim as usize);
    ctx.db().remove_if_empty(key);
    if ltrim + rtrim > 0 {
        ctx.propagate(argv.to_vec());
    } else {
        let db = ctx.db;
        ctx.core.touch_watched_key(db, key);
    }
    Reply::ok()
}

/// LSET key index element (`lsetCommand`): the key is looked up before the index is parsed.
pub fn lset(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let list = match ctx.lookup_mut(&argv[1]).map(|e| &mut e.value) {
        None => return Reply::error("ERR no such key"),
        Some(Value::List(l)) => l,
        Some(_) => return wrongtype(),
    };
    let index = match parse_i64(&argv[2]) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let len = list.len() as i64;
    let i = if index < 0 { len + index } else { index };
    if !(0..len).contains(&i) {
        return Reply::error("ERR index out of range");
    }
    list[i as usize] = argv[3].clone();
    ctx.propagate(argv.to_vec());
    Reply::ok()
}

/// LINSERT key BEFORE|AFTER pivot element (`linsertCommand`): -1 when the pivot is missing, 0
/// when the key is.
pub fn linsert(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let after = if is_opt(&argv[2], "after") {
        true
    } else if is_opt(&argv[2], "before") {
        false
    } else {
        return syntax_error();
    };
    let list = match ctx.lookup_mut(&argv[1]).map(|e| &mut e.value) {
        None => return Reply::Integer(0),
        Some(Value::List(l)) => l,
        Some(_) => return wrongtype(),
    };
    let Some(pivot) = list.iter().position(|el| *el == argv[3]) else {
        return Reply::Integer(-1);
    };
    list.insert(pivot + usize::from(after), argv[4].clone());
    let len = list.len();
    ctx.propagate(argv.to_vec());
    Reply::Integer(len as i64)
}

/// `getPositiveLongFromObjectOrReply` with a message: used for a bad number too.
fn parse_non_negative(arg: &[u8], message: &str) -> Result<i64, Reply> {
    match crate::redis::number::string2ll(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(Reply::error(format!("ERR {message}"))),
    }
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len] (`lposCommand`): options are
/// parsed before the key is looked up; indexes are always counted from the head.
pub fn lpos(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        let opt = &argv[j];
        if is_opt(opt, "rank") && more {
            j += 1;
            rank = match parse_i64(&argv[j]) {
                Ok(r) => r,
                Err(e) => return e,
            };
            if rank == 0 {
                return Reply::error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                );
            }
        } else if is_opt(opt, "count") && more {
            j += 1;
            count = match parse_non_negative(&argv[j], "COUNT can't be negative") {
                Ok(c) => Some(c),
                Err(e) => return e,
            };
        } else if is_opt(opt, "maxlen") && more {
            j += 1;
            maxlen = match parse_non_negative(&argv[j], "MAXLEN can't be negative") {
                Ok(m) => m,
                Err(e) => return e,
            };
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let from_tail = rank < 0;
    // C's `rank = -rank` leaves LONG_MIN negative: every match then counts, and the COUNT test
    // (`matches-rank+1 >= count`) wraps below zero and never stops the scan.
    let wrapped = rank == i64::MIN;
    let rank = rank.unsigned_abs();
    let list = match read_list(ctx, &argv[1]) {
        Err(e) => return e,
        Ok(None) if count.is_some() => return Reply::Array(vec![]),
        Ok(None) => return Reply::Nil,
        Ok(Some(list)) => list,
    };
    let len = list.len();
    let scan = if maxlen == 0 {
        len
    } else {
        len.min(maxlen as usize)
    };
    let position = |i: usize| if from_tail { len - 1 - i } else { i };
    let mut matches: u64 = 0;
    let mut found = Vec::new();
    for i in 0..scan {
        if list[position(i)] != argv[2] {
            continue;
        }
        matches += 1;
        if !wrapped && matches < rank {
            continue;
        }
        found.push(Reply::Integer(position(i) as i64));
        match count {
            None => break,
            Some(c) if !wrapped && c != 0 && (matches - rank + 1) as i64 >= c => break,
            Some(_) => {}
        }
    }
    match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    }
}

/// LEFT or RIGHT (`getListPositionFromObjectOrReply`): true for the head.
pub(crate) fn parse_position(arg: &[u8]) -> Result<bool, Reply> {
    if is_opt(arg, "right") {
        Ok(false)
    } else if is_opt(arg, "left") {
        Ok(true)
    } else {
        Err(syntax_error())
    }
}

/// The element moved from the list at `src` to the one at `dst` (created if missing), the
/// emptied source deleted; `Err` with WRONGTYPE if `dst` is not a list. The caller checked that
/// `src` holds a list.
pub(crate) fn move_element(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from_head: bool,
    to_head: bool,
) -> Result<Option<Vec<u8>>, Reply> {
    match ctx.lookup(dst).map(|e| &e.value) {
        None | Some(Value::List(_)) => {}
        Some(_) => return Err(wrongtype()),
    }
    let value = match ctx.db().get_mut(src).map(|e| &mut e.value) {
        Some(Value::List(list)) if from_head => list.pop_front(),
        Some(Value::List(list)) => list.pop_back(),
        _ => None,
    };
    let Some(value) = value else {
        return Ok(None);
    };
    let list = match ctx.db().get_mut(dst).map(|e| &mut e.value) {
        Some(Value::List(list)) => list,
        _ => match ctx.db().insert_new(dst, Value::List(VecDeque::new())) {
            Value::List(list) => list,
            _ => return Ok(None),
        },
    };
    if to_head {
        list.push_front(value.clone());
    } else {
        list.push_back(value.clone());
    }
    ctx.db().remove_if_empty(src);
    Ok(Some(value))
}

/// `lmoveGenericCommand` (LMOVE, RPOPLPUSH, and BLMOVE / BRPOPLPUSH finding an element): nil for
/// a missing source; `propagated` is what replicas get (the command itself, or the non-blocking
/// form of a blocking one).
pub(crate) fn lmove_generic(
    ctx: &mut Ctx<'_>,
    argv: &[Vec<u8>],
    from_head: bool,
    to_head: bool,
    propagated: Vec<Vec<u8>>,
) -> Reply {
    match ctx.lookup(&argv[1]).map(|e| &e.value) {
        None => return Reply::Nil,
        Some(Value::List(_)) => {}
        Some(_) => return wrongtype(),
    }
    match move_element(ctx, &argv[1], &argv[2], from_head, to_head) {
        Err(e) => e,
        Ok(None) => Reply::Nil,
        Ok(Some(value)) => {
            ctx.propagate(propagated);
            Reply::Bulk(value)
        }
    }
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT: propagated verbatim.
pub fn lmove(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let (from_head, to_head) = match (parse_position(&argv[3]), parse_position(&argv[4])) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    lmove_generic(ctx, argv, from_head, to_head, argv.to_vec())
}

/// RPOPLPUSH source destination: propagated verbatim.
pub fn rpoplpush(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    lmove_generic(ctx, argv, false, true, argv.to_vec())
}
