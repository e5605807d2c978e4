//! Set commands (`t_set.c`). Replies list members in the set's iteration order: ascending for
//! an intset, byte order for a hash table (random in Redis); see [`SetValue`].

use super::keys::{parse_cursor, scan_options, scan_reply, scan_slot, scan_walk};
use super::{is_opt, store_aggregate, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::number::string2ll;
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;
use crate::redis::types::SetValue;

/// `lookupKeyRead` plus `checkType`: `Err` on WRONGTYPE.
fn read_set<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a SetValue>, Reply> {
    match ctx.lookup(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(wrongtype()),
    }
}

fn members_reply(set: &SetValue) -> Reply {
    Reply::Set(set.iter().map(|m| Reply::Bulk(m.into_owned())).collect())
}

pub fn sadd(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let key = &argv[1];
    match ctx.lookup(key).map(|e| &e.value) {
        None => {
            ctx.db()
                .insert_new(key, Value::Set(SetValue::for_member(&argv[2])));
        }
        Some(Value::Set(_)) => {}
        Some(_) => return wrongtype(),
    }
    let Some(Value::Set(set)) = ctx.db().get_mut(key).map(|e| &mut e.value) else {
        return wrongtype();
    };
    let added = argv[2..].iter().filter(|m| set.add(m)).count();
    if added > 0 {
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(added as i64)
}

pub fn srem(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let key = &argv[1];
    let deleted = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        None => return Reply::Integer(0),
        Some(Value::Set(s)) => argv[2..].iter().filter(|m| s.remove(m)).count(),
        Some(_) => return wrongtype(),
    };
    if deleted > 0 {
        ctx.db().remove_if_empty(key);
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(deleted as i64)
}

/// `smoveCommand`: a missing source answers 0 before any type check of the destination.
pub fn smove(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let (src, dst, member) = (&argv[1], &argv[2], &argv[3]);
    let src_type = ctx.lookup(src).map(|e| matches!(e.value, Value::Set(_)));
    let dst_type = ctx.lookup(dst).map(|e| matches!(e.value, Value::Set(_)));
    match (src_type, dst_type) {
        (None, _) => return Reply::Integer(0),
        (Some(false), _) | (_, Some(false)) => return wrongtype(),
        _ => {}
    }
    if src == dst {
        return match ctx.db().get(src).map(|e| &e.value) {
            Some(Value::Set(s)) => Reply::Integer(i64::from(s.contains(member))),
            _ => Reply::Integer(0),
        };
    }
    let removed = match ctx.db().get_mut(src).map(|e| &mut e.value) {
        Some(Value::Set(s)) => s.remove(member),
        _ => false,
    };
    if !removed {
        return Reply::Integer(0);
    }
    ctx.db().remove_if_empty(src);
    if dst_type.is_none() {
        ctx.db()
            .insert_new(dst, Value::Set(SetValue::for_member(member)));
    }
    let added = match ctx.db().get_mut(dst).map(|e| &mut e.value) {
        Some(Value::Set(s)) => s.add(member),
        _ => false,
    };
    // The propagated SMOVE touches its first key, the source; the destination only when the
    // member was new there (`signalModifiedKey`).
    if added {
        let db = ctx.db;
        ctx.core.touch_watched_key(db, dst);
    }
    ctx.propagate(argv.to_vec());
    Reply::Integer(1)
}

pub fn sismember(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_set(ctx, &argv[1]) {
        Ok(s) => Reply::Integer(i64::from(s.is_some_and(|s| s.contains(&argv[2])))),
        Err(e) => e,
    }
}

pub fn smismember(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_set(ctx, &argv[1]) {
        Ok(s) => Reply::Array(
            argv[2..]
                .iter()
                .map(|m| Reply::Integer(i64::from(s.is_some_and(|s| s.contains(m)))))
                .collect(),
        ),
        Err(e) => e,
    }
}

pub fn scard(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_set(ctx, &argv[1]) {
        Ok(s) => Reply::Integer(s.map_or(0, |s| s.len() as i64)),
        Err(e) => e,
    }
}

/// SPOP key [count] (`spopCommand`, t_set.c:598-641): one random member, removed, and
/// propagated as `SREM key member`; the key goes once its set is empty.
pub fn spop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match argv.len() {
        2 => {}
        3 => return spop_with_count(ctx, argv),
        _ => return syntax_error(),
    }
    let key = &argv[1];
    let len = match read_set(ctx, key) {
        Ok(None) => return Reply::Nil,
        Ok(Some(set)) => set.len(),
        Err(e) => return e,
    };
    let index = ctx.core.random_below(len);
    let Some(Value::Set(set)) = ctx.db().get_mut(key).map(|e| &mut e.value) else {
        return Reply::Nil;
    };
    let Some(member) = set.nth(index) else {
        return Reply::Nil;
    };
    set.remove(&member);
    ctx.db().remove_if_empty(key);
    ctx.propagate(vec![b"SREM".to_vec(), key.clone(), member.clone()]);
    Reply::Bulk(member)
}

/// `SPOP_MOVE_STRATEGY_MUL` (t_set.c:455).
const SPOP_MOVE_STRATEGY_MUL: usize = 5;

/// `spopWithCountCommand` (t_set.c:457-596): the count is checked before the key; a count of
/// at least the set's size answers the whole set as SUNION does and propagates `DEL key`; a
/// small count pops members one at a time (answered in the order picked); a count close to the
/// size picks the members that stay instead, into a new set (encoded after its first member,
/// so a hash table of integers becomes an intset again), and answers the rest in the old set's
/// order. Either way each popped member propagates as `SREM key member`.
fn spop_with_count(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let count = match string2ll(&argv[2]) {
        Some(c) if c >= 0 => c as usize,
        _ => return Reply::error("ERR value is out of range, must be positive"),
    };
    let key = &argv[1];
    let size = match read_set(ctx, key) {
        Ok(None) => return Reply::Set(Vec::new()),
        Ok(Some(set)) => set.len(),
        Err(e) => return e,
    };
    if count == 0 {
        return Reply::Set(Vec::new());
    }
    if count >= size {
        let Some(Value::Set(set)) = ctx.db().remove(key).map(|e| e.value) else {
            return Reply::Set(Vec::new());
        };
        let mut whole = SetValue::default();
        for m in set.iter() {
            whole.add(&m);
        }
        ctx.propagate(vec![b"DEL".to_vec(), key.clone()]);
        return members_reply(&whole);
    }
    let remaining = size - count;
    let picks: Vec<usize> = if remaining * SPOP_MOVE_STRATEGY_MUL > count {
        (0..count)
            .map(|i| ctx.core.random_below(size - i))
            .collect()
    } else {
        (0..remaining)
            .map(|i| ctx.core.random_below(size - i))
            .collect()
    };
    let Some(Value::Set(set)) = ctx.db().get_mut(key).map(|e| &mut e.value) else {
        return Reply::Set(Vec::new());
    };
    let popped: Vec<Vec<u8>> = if remaining * SPOP_MOVE_STRATEGY_MUL > count {
        picks
            .into_iter()
            .filter_map(|index| {
                let member = set.nth(index)?;
                set.remove(&member);
                Some(member)
            })
            .collect()
    } else {
        let mut kept: Option<SetValue> = None;
        for index in picks {
            let Some(member) = set.nth(index) else {
                continue;
            };
            set.remove(&member);
            kept.get_or_insert_with(|| SetValue::for_member(&member))
                .add(&member);
        }
        let popped = set.iter().map(|m| m.into_owned()).collect();
        if let Some(kept) = kept {
            *set = kept;
        }
        popped
    };
    for member in &popped {
        ctx.propagate(vec![b"SREM".to_vec(), key.clone(), member.clone()]);
    }
    Reply::Set(popped.into_iter().map(Reply::Bulk).collect())
}

/// The sets at `keys` (`None` for a missing key), or WRONGTYPE at the first key of another type.
fn lookup_sets(ctx: &mut Ctx<'_>, keys: &[Vec<u8>]) -> Result<Vec<Option<SetValue>>, Reply> {
    keys.iter()
        .map(|key| read_set(ctx, key).map(|s| s.cloned()))
        .collect()
}

/// A STORE variant's result into its destination ([`store_aggregate`]).
fn store(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], dst: &[u8], result: SetValue) -> Reply {
    let len = result.len();
    store_aggregate(ctx, argv, dst, Value::Set(result), len)
}

/// What `sinterGenericCommand` answers.
enum InterMode<'a> {
    Members,
    Cardinality { limit: u64 },
    Store { argv: &'a [Vec<u8>], dst: &'a [u8] },
}

/// `sinterGenericCommand`: iterates the smallest set (ties keep argument order: glibc's qsort is
/// a merge sort), so an intset smallest set answers in ascending order.
fn sinter_generic(ctx: &mut Ctx<'_>, keys: &[Vec<u8>], mode: InterMode<'_>) -> Reply {
    let sets = match lookup_sets(ctx, keys) {
        Ok(sets) => sets,
        Err(e) => return e,
    };
    let Some(mut sets) = sets.into_iter().collect::<Option<Vec<SetValue>>>() else {
        return match mode {
            InterMode::Members => Reply::Set(Vec::new()),
            InterMode::Cardinality { .. } => Reply::Integer(0),
            InterMode::Store { argv, dst } => store(ctx, argv, dst, SetValue::default()),
        };
    };
    sets.sort_by_key(SetValue::len);
    let Some((first, rest)) = sets.split_first() else {
        return Reply::Set(Vec::new());
    };
    let common = first.iter().filter(|m| rest.iter().all(|s| s.contains(m)));
    match mode {
        InterMode::Members => Reply::Set(common.map(|m| Reply::Bulk(m.into_owned())).collect()),
        InterMode::Cardinality { limit } => {
            let mut count = 0u64;
            for _ in common {
                count += 1;
                if limit > 0 && count >= limit {
                    break;
                }
            }
            Reply::Integer(count as i64)
        }
        InterMode::Store { argv, dst } => {
            let mut result = SetValue::default();
            for m in common {
                result.add(&m);
            }
            store(ctx, argv, dst, result)
        }
    }
}

pub fn smembers(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sinter_generic(ctx, &argv[1..], InterMode::Members)
}

pub fn sinter(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sinter_generic(ctx, &argv[1..], InterMode::Members)
}

pub fn sinterstore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sinter_generic(
        ctx,
        &argv[2..],
        InterMode::Store {
            argv,
            dst: &argv[1],
        },
    )
}

/// `getRangeLongFromObjectOrReply` with a message: a non-number and an out-of-range number get
/// the same error.
fn parse_at_least(arg: &[u8], min: i64, message: &str) -> Result<i64, Reply> {
    string2ll(arg)
        .filter(|&v| v >= min)
        .ok_or_else(|| Reply::error(format!("ERR {message}")))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit] (`sinterCardCommand`).
pub fn sintercard(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let numkeys = match parse_at_least(&argv[1], 1, "numkeys should be greater than 0") {
        Ok(n) => n as u64,
        Err(e) => return e,
    };
    if numkeys > (argv.len() - 2) as u64 {
        return Reply::error("ERR Number of keys can't be greater than number of args");
    }
    let numkeys = numkeys as usize;
    let mut limit = 0u64;
    let mut j = 2 + numkeys;
    while j < argv.len() {
        if is_opt(&argv[j], "limit") && j + 1 < argv.len() {
            j += 1;
            match parse_at_least(&argv[j], 0, "LIMIT can't be negative") {
                Ok(l) => limit = l as u64,
                Err(e) => return e,
            }
        } else {
            return syntax_error();
        }
        j += 1;
    }
    sinter_generic(ctx, &argv[2..2 + numkeys], InterMode::Cardinality { limit })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Diff,
}

/// `sunionDiffGenericCommand`: the result is built in a fresh intset with `setTypeAdd` (and,
/// for SDIFF's second algorithm, `setTypeRemove`), so its encoding, and with it the reply's
/// order, follows Redis's: SDIFF's algorithm choice matters when a non-integer member of the
/// first set is added and then removed.
fn sunion_diff(
    ctx: &mut Ctx<'_>,
    keys: &[Vec<u8>],
    op: SetOp,
    dst: Option<(&[Vec<u8>], &[u8])>,
) -> Reply {
    let sets = match lookup_sets(ctx, keys) {
        Ok(sets) => sets,
        Err(e) => return e,
    };
    // `sets[0] == sets[j]`: the same object, or both missing.
    let same_set = (1..keys.len()).any(|j| {
        sets[0].is_some() == sets[j].is_some() && (sets[0].is_none() || keys[0] == keys[j])
    });
    let mut result = SetValue::default();
    match (op, &sets[0]) {
        (SetOp::Union, _) => {
            for set in sets.iter().flatten() {
                for m in set.iter() {
                    result.add(&m);
                }
            }
        }
        (SetOp::Diff, _) if same_set => {}
        (SetOp::Diff, None) => {}
        (SetOp::Diff, Some(first)) => {
            let others: Vec<&SetValue> = sets[1..].iter().flatten().collect();
            let algo_one_work = first.len() as u64 * (1 + others.len() as u64) / 2;
            let algo_two_work =
                first.len() as u64 + others.iter().map(|s| s.len() as u64).sum::<u64>();
            if algo_one_work <= algo_two_work {
                for m in first.iter() {
                    if !others.iter().any(|s| s.contains(&m)) {
                        result.add(&m);
                    }
                }
            } else {
                for m in first.iter() {
                    result.add(&m);
                }
                for set in others {
                    if result.is_empty() {
                        break;
                    }
                    for m in set.iter() {
                        result.remove(&m);
                    }
                }
            }
        }
    }
    match dst {
        None => members_reply(&result),
        Some((argv, dst)) => store(ctx, argv, dst, result),
    }
}

pub fn sunion(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sunion_diff(ctx, &argv[1..], SetOp::Union, None)
}

pub fn sunionstore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sunion_diff(ctx, &argv[2..], SetOp::Union, Some((argv, &argv[1])))
}

pub fn sdiff(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sunion_diff(ctx, &argv[1..], SetOp::Diff, None)
}

pub fn sdiffstore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sunion_diff(ctx, &argv[2..], SetOp::Diff, Some((argv, &argv[1])))
}

/// SSCAN key cursor [MATCH pattern] [COUNT count] (`sscanCommand`, `scanGenericCommand`). The
/// cursor is checked first, then the key (missing: an empty scan), then the options. An intset
/// is answered whole with cursor 0, whatever the cursor and COUNT, as in Redis. A hash-table set
/// is walked as SCAN walks the keyspace ([`scan_walk`]).
pub fn sscan(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_cursor(&argv[2]) else {
        return Reply::error("ERR invalid cursor");
    };
    let set = match read_set(ctx, &argv[1]) {
        Ok(Some(set)) => set,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match scan_options(argv, 3, false) {
        Ok(opts) => opts,
        Err(e) => return e,
    };
    let (visited, next) = if set.is_intset() {
        (set.iter().map(|m| m.into_owned()).collect(), 0)
    } else {
        let members = set.iter().map(|m| (scan_slot(&m), m.into_owned()));
        scan_walk(members, cursor, opts.count)
    };
    let found = visited.into_iter().filter(|m| opts.matches(m)).collect();
    scan_reply(next, found)
}
