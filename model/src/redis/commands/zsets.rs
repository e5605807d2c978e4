//! Sorted set commands (`t_zset.c`).

use super::keys::{parse_cursor, scan_options, scan_reply, scan_slot, scan_walk};
use super::{double_reply, is_opt, parse_f64, parse_i64, store_aggregate, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::number::{fmt_g17, strtod_full};
use crate::redis::reply::{Protocol, Reply};
use crate::redis::server::Ctx;
use crate::redis::types::{Scored, ZSet};

fn read_zset<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a ZSet>, Reply> {
    match ctx.lookup(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(wrongtype()),
    }
}

const NX: u8 = 1;
const XX: u8 = 2;
const GT: u8 = 4;
const LT: u8 = 8;
const INCR: u8 = 16;

/// `zaddGenericCommand` (ZADD and ZINCRBY).
fn zadd_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], mut flags: u8) -> Reply {
    let mut ch = false;
    let mut idx = 2;
    while idx < argv.len() {
        let opt = &argv[idx];
        if is_opt(opt, "nx") {
            flags |= NX;
        } else if is_opt(opt, "xx") {
            flags |= XX;
        } else if is_opt(opt, "ch") {
            ch = true;
        } else if is_opt(opt, "incr") {
            flags |= INCR;
        } else if is_opt(opt, "gt") {
            flags |= GT;
        } else if is_opt(opt, "lt") {
            flags |= LT;
        } else {
            break;
        }
        idx += 1;
    }
    let (incr, nx, xx, gt, lt) = (
        flags & INCR != 0,
        flags & NX != 0,
        flags & XX != 0,
        flags & GT != 0,
        flags & LT != 0,
    );
    let elements = argv.len() - idx;
    if elements % 2 == 1 || elements == 0 {
        return syntax_error();
    }
    let elements = elements / 2;
    if nx && xx {
        return Reply::error("ERR XX and NX options at the same time are not compatible");
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Reply::error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if incr && elements > 1 {
        return Reply::error("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(elements);
    for j in 0..elements {
        match parse_f64(&argv[idx + j * 2]) {
            Ok(s) => scores.push(s),
            Err(e) => return e,
        }
    }
    let key = &argv[1];
    let (mut added, mut updated, mut processed) = (0, 0, 0);
    let mut last_score = 0.0;
    match ctx.lookup(key).map(|e| &e.value) {
        None if xx => {
            return if incr { Reply::Nil } else { Reply::Integer(0) };
        }
        None => {
            ctx.db().insert_new(key, Value::ZSet(ZSet::default()));
        }
        Some(Value::ZSet(_)) => {}
        Some(_) => return wrongtype(),
    }
    let Some(Value::ZSet(zset)) = ctx.db().get_mut(key).map(|e| &mut e.value) else {
        return wrongtype();
    };
    let mut nan = false;
    for (j, &input) in scores.iter().enumerate() {
        let member = &argv[idx + 1 + j * 2];
        let mut score = input;
        match zset.score(member) {
            Some(current) => {
                if nx {
                    continue;
                }
                if incr {
                    score += current;
                    if score.is_nan() {
                        nan = true;
                        break;
                    }
                }
                if (lt && score >= current) || (gt && score <= current) {
                    continue;
                }
                if score != current {
                    zset.insert(member, score);
                    updated += 1;
                }
            }
            None if !xx => {
                zset.insert(member, score);
                added += 1;
            }
            None => continue,
        }
        processed += 1;
        last_score = score;
    }
    ctx.db().remove_if_empty(key);
    if added + updated > 0 {
        ctx.propagate(argv.to_vec());
    }
    if nan {
        return Reply::error("ERR resulting score is not a number (NaN)");
    }
    if incr {
        if processed > 0 {
            double_reply(last_score)
        } else {
            Reply::Nil
        }
    } else {
        Reply::Integer(if ch { added + updated } else { added })
    }
}

pub fn zadd(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zadd_generic(ctx, argv, 0)
}

pub fn zincrby(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zadd_generic(ctx, argv, INCR)
}

pub fn zscore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_zset(ctx, &argv[1]) {
        Ok(z) => z
            .and_then(|z| z.score(&argv[2]))
            .map_or(Reply::Nil, double_reply),
        Err(e) => e,
    }
}

pub fn zcard(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    match read_zset(ctx, &argv[1]) {
        Ok(z) => Reply::Integer(z.map_or(0, |z| z.len() as i64)),
        Err(e) => e,
    }
}

pub fn zrem(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let key = &argv[1];
    let deleted = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        None => return Reply::Integer(0),
        Some(Value::ZSet(z)) => argv[2..].iter().filter(|m| z.remove(m)).count(),
        Some(_) => return wrongtype(),
    };
    if deleted > 0 {
        ctx.db().remove_if_empty(key);
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(deleted as i64)
}

/// A score bound of `zslParseRange`: `(` makes it exclusive; strtod with no range checks.
#[derive(Clone, Copy)]
struct Bound {
    value: f64,
    exclusive: bool,
}

fn parse_bound(arg: &[u8]) -> Option<Bound> {
    let (text, exclusive) = match arg.strip_prefix(b"(") {
        Some(rest) => (rest, true),
        None => (arg, false),
    };
    let text = super::c_str(text);
    let value = if text.is_empty() {
        0.0
    } else {
        strtod_full(text)?.0
    };
    if value.is_nan() {
        return None;
    }
    Some(Bound { value, exclusive })
}

fn above_min(score: f64, min: Bound) -> bool {
    if min.exclusive {
        score > min.value
    } else {
        score >= min.value
    }
}

fn below_max(score: f64, max: Bound) -> bool {
    if max.exclusive {
        score < max.value
    } else {
        score <= max.value
    }
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed range: ranks (`getLongFromObjectOrReply`), scores (`zslParseRange`) or members
/// (`zslParseLexRange`).
enum Range {
    Rank(i64, i64),
    Score(Bound, Bound),
    Lex(Lex, Lex),
}

/// The range of `min` and `max` with each kind's error reply.
fn parse_range(rangetype: RangeType, min: &[u8], max: &[u8]) -> Result<Range, Reply> {
    match rangetype {
        RangeType::Rank | RangeType::Auto => Ok(Range::Rank(parse_i64(min)?, parse_i64(max)?)),
        RangeType::Score => match (parse_bound(min), parse_bound(max)) {
            (Some(min), Some(max)) => Ok(Range::Score(min, max)),
            _ => Err(Reply::error("ERR min or max is not a float")),
        },
        RangeType::Lex => match (parse_lex(min), parse_lex(max)) {
            (Some(min), Some(max)) => Ok(Range::Lex(min, max)),
            _ => Err(Reply::error("ERR min or max not valid string range item")),
        },
    }
}

/// The members a range selects, in the order `genericZrangebyrankCommand`,
/// `genericZrangebyscoreCommand` and `genericZrangebylexCommand` walk them: the first member in
/// range, then `offset` members skipped unchecked, then up to `limit` (negative: all) members
/// while they stay in range. Ranks ignore `offset` and `limit`.
fn select<'a>(
    zset: &'a ZSet,
    range: &Range,
    reverse: bool,
    offset: i64,
    limit: i64,
) -> Vec<&'a Scored> {
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    // A negative offset walks off the end (`while (ln && offset--)`).
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    match range {
        Range::Rank(start, end) => {
            let len = zset.len() as i64;
            let start = if *start < 0 { len + start } else { *start }.max(0);
            let end = if *end < 0 { len + end } else { *end };
            if start > end || start >= len {
                return vec![];
            }
            let count = (end.min(len - 1) - start + 1) as usize;
            if reverse {
                zset.iter().rev().skip(start as usize).take(count).collect()
            } else {
                zset.iter().skip(start as usize).take(count).collect()
            }
        }
        Range::Score(min, max) => {
            if offset >= zset.len() {
                return vec![];
            }
            if reverse {
                zset.iter()
                    .rev()
                    .skip_while(|s| !below_max(s.score, *max))
                    .skip(offset)
                    .take_while(|s| above_min(s.score, *min))
                    .take(take)
                    .collect()
            } else {
                zset.iter()
                    .skip_while(|s| !above_min(s.score, *min))
                    .skip(offset)
                    .take_while(|s| below_max(s.score, *max))
                    .take(take)
                    .collect()
            }
        }
        Range::Lex(min, max) => lex_range(zset, min, max, reverse, offset, take),
    }
}

/// `zrangeResultEmitCBufferToClient`: with scores, RESP3 nests each [member, score] pair,
/// RESP2 lists them flat.
fn emit(items: Vec<&Scored>, withscores: bool, protocol: Protocol) -> Reply {
    let mut out = Vec::with_capacity(items.len() * if withscores { 2 } else { 1 });
    for item in items {
        let member = Reply::Bulk(item.member.clone());
        match (withscores, protocol) {
            (false, _) => out.push(member),
            (true, Protocol::Resp3) => {
                out.push(Reply::Array(vec![member, double_reply(item.score)]));
            }
            (true, Protocol::Resp2) => {
                out.push(member);
                out.push(double_reply(item.score));
            }
        }
    }
    Reply::Array(out)
}

/// `zrangeGenericCommand`: ZRANGE (BYSCORE/BYLEX/REV/LIMIT/WITHSCORES), the deprecated
/// Z[REV]RANGE[BYSCORE|BYLEX] with their fixed type and direction, and ZRANGESTORE (`store`:
/// the source is argv[2] and the result goes to argv[1]).
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    argv: &[Vec<u8>],
    store: bool,
    mut rangetype: RangeType,
    mut reverse: Option<bool>,
) -> Reply {
    let src = if store { 2 } else { 1 };
    let mut withscores = false;
    let mut offset: i64 = 0;
    let mut limit: i64 = -1;
    let mut j = src + 3;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let opt = &argv[j];
        if !store && is_opt(opt, "withscores") {
            withscores = true;
        } else if is_opt(opt, "limit") && left >= 2 {
            match (parse_i64(&argv[j + 1]), parse_i64(&argv[j + 2])) {
                (Ok(o), Ok(l)) => (offset, limit) = (o, l),
                (Err(e), _) | (_, Err(e)) => return e,
            }
            j += 2;
        } else if reverse.is_none() && is_opt(opt, "rev") {
            reverse = Some(true);
        } else if rangetype == RangeType::Auto && is_opt(opt, "bylex") {
            rangetype = RangeType::Lex;
        } else if rangetype == RangeType::Auto && is_opt(opt, "byscore") {
            rangetype = RangeType::Score;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let reverse = reverse.unwrap_or(false);
    if rangetype == RangeType::Auto {
        rangetype = RangeType::Rank;
    }
    if limit != -1 && rangetype == RangeType::Rank {
        return Reply::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && rangetype == RangeType::Lex {
        return Reply::error(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        );
    }
    let (mut minidx, mut maxidx) = (src + 1, src + 2);
    if reverse && rangetype != RangeType::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let range = match parse_range(rangetype, &argv[minidx], &argv[maxidx]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let protocol = ctx.protocol;
    let items: Vec<Scored> = match read_zset(ctx, &argv[src]) {
        Err(e) => return e,
        Ok(None) if !store => return Reply::Array(vec![]),
        Ok(None) => vec![],
        Ok(Some(zset)) => {
            let items = select(zset, &range, reverse, offset, limit);
            if !store {
                return emit(items, withscores, protocol);
            }
            items.into_iter().cloned().collect()
        }
    };
    store_range(ctx, argv, items)
}

/// `zrangeResultFinalizeStore`: the range into ZRANGESTORE's destination ([`store_aggregate`]).
fn store_range(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], items: Vec<Scored>) -> Reply {
    let count = items.len();
    let mut zset = ZSet::default();
    for item in items {
        zset.insert(&item.member, item.score);
    }
    store_aggregate(ctx, argv, &argv[1], Value::ZSet(zset), count)
}

/// A bound of `zslParseLexRangeItem`: `-`, `+`, `(member` or `[member`. `-` and `+` are tested
/// as C strings (`c[1] != '\0'`).
enum Lex {
    Min,
    Max,
    Open(Vec<u8>),
    Closed(Vec<u8>),
}

fn parse_lex(arg: &[u8]) -> Option<Lex> {
    let alone = arg.get(1).is_none_or(|&b| b == 0);
    match arg.first()? {
        b'-' if alone => Some(Lex::Min),
        b'+' if alone => Some(Lex::Max),
        b'(' => Some(Lex::Open(arg[1..].to_vec())),
        b'[' => Some(Lex::Closed(arg[1..].to_vec())),
        _ => None,
    }
}

fn lex_value(bound: &Lex) -> (i8, &[u8]) {
    match bound {
        Lex::Min => (-1, &[]),
        Lex::Max => (1, &[]),
        Lex::Open(v) | Lex::Closed(v) => (0, v),
    }
}

/// `sdscmplex`: `-` sorts before and `+` after every member.
fn cmp_lex(a: &Lex, b: &Lex) -> std::cmp::Ordering {
    let (ka, va) = lex_value(a);
    let (kb, vb) = lex_value(b);
    ka.cmp(&kb).then_with(|| {
        if ka == 0 {
            va.cmp(vb)
        } else {
            std::cmp::Ordering::Equal
        }
    })
}

fn gte_min(member: &[u8], min: &Lex) -> bool {
    match min {
        Lex::Min => true,
        Lex::Max => false,
        Lex::Open(v) => member > v.as_slice(),
        Lex::Closed(v) => member >= v.as_slice(),
    }
}

fn lte_max(member: &[u8], max: &Lex) -> bool {
    match max {
        Lex::Max => true,
        Lex::Min => false,
        Lex::Open(v) => member < v.as_slice(),
        Lex::Closed(v) => member <= v.as_slice(),
    }
}

/// `genericZrangebylexCommand` over the (score, member) order, as `zzlIsInLexRange`,
/// `zzlFirstInLexRange` / `zzlLastInLexRange` walk it: the first member past the start bound must
/// also be within the end bound, then the offset is skipped and members are taken while they
/// stay within the end bound.
fn lex_range<'a>(
    zset: &'a ZSet,
    min: &Lex,
    max: &Lex,
    reverse: bool,
    offset: usize,
    take: usize,
) -> Vec<&'a Scored> {
    let cmp = cmp_lex(min, max);
    let exclusive = !matches!(min, Lex::Closed(_)) || !matches!(max, Lex::Closed(_));
    if cmp == std::cmp::Ordering::Greater || (cmp == std::cmp::Ordering::Equal && exclusive) {
        return vec![];
    }
    let (Some(first), Some(last)) = (zset.iter().next(), zset.iter().next_back()) else {
        return vec![];
    };
    if !gte_min(&last.member, min) || !lte_max(&first.member, max) {
        return vec![];
    }
    let items: Vec<&Scored> = if reverse {
        zset.iter().rev().collect()
    } else {
        zset.iter().collect()
    };
    let start_ok = |m: &[u8]| {
        if reverse {
            lte_max(m, max)
        } else {
            gte_min(m, min)
        }
    };
    let end_ok = |m: &[u8]| {
        if reverse {
            gte_min(m, min)
        } else {
            lte_max(m, max)
        }
    };
    let Some(start) = items.iter().position(|s| start_ok(&s.member)) else {
        return vec![];
    };
    if !end_ok(&items[start].member) {
        return vec![];
    }
    items[start..]
        .iter()
        .skip(offset)
        .take_while(|s| end_ok(&s.member))
        .take(take)
        .copied()
        .collect()
}

pub fn zrange(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, false, RangeType::Auto, None)
}

pub fn zrangestore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, true, RangeType::Auto, None)
}

pub fn zrevrange(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, false, RangeType::Rank, Some(true))
}

pub fn zrangebyscore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, false, RangeType::Score, Some(false))
}

pub fn zrevrangebyscore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, false, RangeType::Score, Some(true))
}

pub fn zrangebylex(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, false, RangeType::Lex, Some(false))
}

pub fn zrevrangebylex(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, false, RangeType::Lex, Some(true))
}

/// `zremrangeGenericCommand`: the range is parsed before the key is looked up; the command
/// propagates verbatim when it removed something, and an emptied set is deleted.
fn zremrange_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], rangetype: RangeType) -> Reply {
    let range = match parse_range(rangetype, &argv[2], &argv[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let key = &argv[1];
    let zset = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        None => return Reply::Integer(0),
        Some(Value::ZSet(z)) => z,
        Some(_) => return wrongtype(),
    };
    let members: Vec<Vec<u8>> = select(zset, &range, false, 0, -1)
        .into_iter()
        .map(|s| s.member.clone())
        .collect();
    for member in &members {
        zset.remove(member);
    }
    if !members.is_empty() {
        ctx.db().remove_if_empty(key);
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(members.len() as i64)
}

pub fn zremrangebyrank(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zremrange_generic(ctx, argv, RangeType::Rank)
}

pub fn zremrangebyscore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zremrange_generic(ctx, argv, RangeType::Score)
}

pub fn zremrangebylex(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zremrange_generic(ctx, argv, RangeType::Lex)
}

/// `zcountCommand` / `zlexcountCommand`: the range is parsed first; a missing key counts 0.
fn count_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], rangetype: RangeType) -> Reply {
    let range = match parse_range(rangetype, &argv[2], &argv[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read_zset(ctx, &argv[1]) {
        Err(e) => e,
        Ok(None) => Reply::Integer(0),
        Ok(Some(zset)) => Reply::Integer(select(zset, &range, false, 0, -1).len() as i64),
    }
}

pub fn zcount(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    count_generic(ctx, argv, RangeType::Score)
}

pub fn zlexcount(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    count_generic(ctx, argv, RangeType::Lex)
}

/// `zrankGenericCommand`: nil for a missing key or member.
fn rank_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], reverse: bool) -> Reply {
    match read_zset(ctx, &argv[1]) {
        Err(e) => e,
        Ok(z) => z
            .and_then(|z| z.rank(&argv[2], reverse))
            .map_or(Reply::Nil, |r| Reply::Integer(r as i64)),
    }
}

pub fn zrank(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    rank_generic(ctx, argv, false)
}

pub fn zrevrank(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    rank_generic(ctx, argv, true)
}

/// `zmscoreCommand`: a missing key is an empty set, one nil per member.
pub fn zmscore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let zset = match read_zset(ctx, &argv[1]) {
        Err(e) => return e,
        Ok(z) => z,
    };
    Reply::Array(
        argv[2..]
            .iter()
            .map(|m| {
                zset.and_then(|z| z.score(m))
                    .map_or(Reply::Nil, double_reply)
            })
            .collect(),
    )
}

/// `zpopMinMaxCommand` / `genericZpopCommand`: a flat [member, score, ...] array, except with
/// a count in RESP3, which nests each pair. Propagated verbatim when it popped something.
fn zpop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], max: bool) -> Reply {
    if argv.len() > 3 {
        return syntax_error();
    }
    let count = match argv.get(2) {
        None => None,
        Some(arg) => match crate::redis::number::string2ll(arg) {
            Some(c) if c >= 0 => Some(c),
            _ => return Reply::error("ERR value is out of range, must be positive"),
        },
    };
    let nested = count.is_some() && ctx.protocol == Protocol::Resp3;
    let key = &argv[1];
    let zset = match ctx.lookup_mut(key).map(|e| &mut e.value) {
        None => return Reply::Array(vec![]),
        Some(Value::ZSet(z)) => z,
        Some(_) => return wrongtype(),
    };
    let count = match count {
        Some(0) => return Reply::Array(vec![]),
        Some(c) => c,
        None => 1,
    };
    let mut out = Vec::new();
    for _ in 0..count {
        let Some(item) = zset.pop(max) else { break };
        let (member, score) = (Reply::Bulk(item.member), double_reply(item.score));
        if nested {
            out.push(Reply::Array(vec![member, score]));
        } else {
            out.push(member);
            out.push(score);
        }
    }
    ctx.db().remove_if_empty(key);
    ctx.propagate(argv.to_vec());
    Reply::Array(out)
}

pub fn zpopmin(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zpop(ctx, argv, false)
}

pub fn zpopmax(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zpop(ctx, argv, true)
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count] (`zscanCommand`, `scanGenericCommand`): member
/// and score pairs, the score as `%.17g` text, MATCH testing the member. A listpack answers whole
/// in (score, member) order with cursor 0, whatever the cursor and COUNT, as in Redis; a skiplist
/// is walked as SCAN walks the keyspace (`scan_walk`).
pub fn zscan(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let Some(cursor) = parse_cursor(&argv[2]) else {
        return Reply::error("ERR invalid cursor");
    };
    let zset = match read_zset(ctx, &argv[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(e) => return e,
    };
    let opts = match scan_options(argv, 3, false) {
        Ok(opts) => opts,
        Err(e) => return e,
    };
    let pairs = zset
        .iter()
        .map(|s| (scan_slot(&s.member), (s.member.as_slice(), s.score)));
    let (visited, next) = if zset.is_table() {
        scan_walk(pairs, cursor, opts.count)
    } else {
        (pairs.map(|(_, pair)| pair).collect(), 0)
    };
    let found = visited
        .into_iter()
        .filter(|(member, _)| opts.matches(member))
        .flat_map(|(member, score)| [member.to_vec(), score_text(score, zset.is_table())])
        .collect();
    scan_reply(next, found)
}

/// A score as ZSCAN reads it back: a skiplist formats it with `ld2string` (`%.17Lg`); a listpack
/// stored it as an integer when `double2ll` allows (integral, within ±2^62: `zzlInsertAt`),
/// otherwise as `d2string` text (`%.17g`).
fn score_text(score: f64, skiplist: bool) -> Vec<u8> {
    const LIMIT: f64 = 4_611_686_018_427_387_904.0;
    if !skiplist && score.fract() == 0.0 && (-LIMIT..=LIMIT).contains(&score) {
        return (score as i64).to_string().into_bytes();
    }
    fmt_g17(score).into_bytes()
}
