//! Sorted set commands (`t_zset.c`).

use super::{double_reply, is_opt, parse_f64, parse_i64, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::number::strtod_full;
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

/// `zrangeGenericCommand` (ZRANGE with BYSCORE/REV/LIMIT/WITHSCORES, ZRANGEBYSCORE).
/// BYLEX is parsed but only its error paths are implemented.
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    argv: &[Vec<u8>],
    mut rangetype: RangeType,
    mut reverse: Option<bool>,
) -> Reply {
    let protocol = ctx.protocol;
    let mut withscores = false;
    let mut offset: i64 = 0;
    let mut limit: i64 = -1;
    let mut j = 4;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let opt = &argv[j];
        if is_opt(opt, "withscores") {
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
    let (mut minidx, mut maxidx) = (2, 3);
    if reverse && rangetype != RangeType::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    match rangetype {
        RangeType::Rank => {
            let (start, end) = match (parse_i64(&argv[minidx]), parse_i64(&argv[maxidx])) {
                (Ok(s), Ok(e)) => (s, e),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            let zset = match read_zset(ctx, &argv[1]) {
                Err(e) => return e,
                Ok(None) => return Reply::Array(vec![]),
                Ok(Some(z)) => z,
            };
            let len = zset.len() as i64;
            let mut start = if start < 0 { len + start } else { start };
            let end = if end < 0 { len + end } else { end };
            start = start.max(0);
            if start > end || start >= len {
                return Reply::Array(vec![]);
            }
            let end = end.min(len - 1);
            let count = (end - start + 1) as usize;
            let items: Vec<&Scored> = if reverse {
                zset.iter().rev().skip(start as usize).take(count).collect()
            } else {
                zset.iter().skip(start as usize).take(count).collect()
            };
            emit(items, withscores, protocol)
        }
        RangeType::Score => {
            let (Some(min), Some(max)) = (parse_bound(&argv[minidx]), parse_bound(&argv[maxidx]))
            else {
                return Reply::error("ERR min or max is not a float");
            };
            let zset = match read_zset(ctx, &argv[1]) {
                Err(e) => return e,
                Ok(None) => return Reply::Array(vec![]),
                Ok(Some(z)) => z,
            };
            if offset > 0 && offset >= zset.len() as i64 {
                return Reply::Array(vec![]);
            }
            if offset < 0 {
                return Reply::Array(vec![]);
            }
            let take = if limit < 0 {
                usize::MAX
            } else {
                limit as usize
            };
            let items: Vec<&Scored> = if reverse {
                zset.iter()
                    .rev()
                    .skip_while(|s| !below_max(s.score, max))
                    .skip(offset as usize)
                    .take_while(|s| above_min(s.score, min))
                    .take(take)
                    .collect()
            } else {
                zset.iter()
                    .skip_while(|s| !above_min(s.score, min))
                    .skip(offset as usize)
                    .take_while(|s| below_max(s.score, max))
                    .take(take)
                    .collect()
            };
            emit(items, withscores, protocol)
        }
        RangeType::Lex | RangeType::Auto => {
            let (Some(min), Some(max)) = (parse_lex(&argv[minidx]), parse_lex(&argv[maxidx]))
            else {
                return Reply::error("ERR min or max not valid string range item");
            };
            let zset = match read_zset(ctx, &argv[1]) {
                Err(e) => return e,
                Ok(None) => return Reply::Array(vec![]),
                Ok(Some(z)) => z,
            };
            if offset < 0 || (offset > 0 && offset >= zset.len() as i64) {
                return Reply::Array(vec![]);
            }
            let take = if limit < 0 {
                usize::MAX
            } else {
                limit as usize
            };
            emit(
                lex_range(zset, &min, &max, reverse, offset as usize, take),
                false,
                protocol,
            )
        }
    }
}

/// A bound of `zslParseLexRangeItem`: `-`, `+`, `(member` or `[member`.
enum Lex {
    Min,
    Max,
    Open(Vec<u8>),
    Closed(Vec<u8>),
}

fn parse_lex(arg: &[u8]) -> Option<Lex> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(Lex::Min),
        b'+' if arg.len() == 1 => Some(Lex::Max),
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
    zrange_generic(ctx, argv, RangeType::Auto, None)
}

pub fn zrangebyscore(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    zrange_generic(ctx, argv, RangeType::Score, Some(false))
}
