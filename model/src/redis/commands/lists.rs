//! List commands (`t_list.c`).

use std::collections::VecDeque;

use super::{parse_i64, wrongtype};
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

/// `pushGenericCommand`: elements are pushed one by one (LPUSH a b c gives c b a).
fn push(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], head: bool) -> Reply {
    let key = &argv[1];
    match ctx.lookup(key).map(|e| &e.value) {
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
    push(ctx, argv, true)
}

pub fn rpush(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    push(ctx, argv, false)
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
