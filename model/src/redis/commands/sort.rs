//! SORT and SORT_RO (`sort.c` `sortCommandGeneric`).

use std::cmp::Ordering;

use super::{c_str, is_opt, not_integer, store_aggregate, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::number::{string2ll, strtod_full};
use crate::redis::reply::Reply;
use crate::redis::server::Ctx;

/// The parsed options, in `sortCommandGeneric`'s names.
struct Options {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    /// The index of STORE's destination in argv.
    store: Option<usize>,
    sort_by: Option<Vec<u8>>,
    dont_sort: bool,
    gets: Vec<Vec<u8>>,
}

/// The option loop: a LIMIT whose numbers do not parse answers their error, anything unknown
/// (STORE in SORT_RO, an option missing its arguments) a syntax error, before the key is read.
fn parse(argv: &[Vec<u8>], readonly: bool) -> Result<Options, Reply> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        sort_by: None,
        dont_sort: false,
        gets: Vec::new(),
    };
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let arg = &argv[j];
        if is_opt(arg, "asc") {
            o.desc = false;
        } else if is_opt(arg, "desc") {
            o.desc = true;
        } else if is_opt(arg, "alpha") {
            o.alpha = true;
        } else if is_opt(arg, "limit") && left >= 2 {
            o.limit_start = string2ll(&argv[j + 1]).ok_or_else(not_integer)?;
            o.limit_count = string2ll(&argv[j + 2]).ok_or_else(not_integer)?;
            j += 2;
        } else if !readonly && is_opt(arg, "store") && left >= 1 {
            o.store = Some(j + 1);
            j += 1;
        } else if is_opt(arg, "by") && left >= 1 {
            // A pattern without `*` (`nosort`) keeps the value's own order, even if a later BY
            // has one: Redis never clears `dontsort`.
            o.sort_by = Some(argv[j + 1].clone());
            if !c_str(&argv[j + 1]).contains(&b'*') {
                o.dont_sort = true;
            }
            j += 1;
        } else if is_opt(arg, "get") && left >= 1 {
            o.gets.push(argv[j + 1].clone());
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok(o)
}

/// The destination of a SORT ... STORE that parsed (what it writes, for WATCH and blocked
/// clients).
pub(crate) fn store_key(argv: &[Vec<u8>]) -> Option<&Vec<u8>> {
    parse(argv, false).ok()?.store.map(|i| &argv[i])
}

/// `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` (in the C string)
/// becomes the element, and a `->field` after it (not at the end) reads that hash field. A
/// missing key, a key of another type, or a pattern without `*` gives nothing.
fn lookup_by_pattern(ctx: &mut Ctx<'_>, pattern: &[u8], subst: &[u8]) -> Option<Vec<u8>> {
    if pattern.first() == Some(&b'#') && pattern.get(1).is_none_or(|&b| b == 0) {
        return Some(subst.to_vec());
    }
    let spat = c_str(pattern);
    let star = spat.iter().position(|&b| b == b'*')?;
    let arrow = spat[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| f + 2 < spat.len());
    let field_len = arrow.map_or(0, |f| pattern.len() - f - 2);
    let postfix_len = pattern.len() - (star + 1) - arrow.map_or(0, |_| field_len + 2);
    let key = [
        &pattern[..star],
        subst,
        &pattern[star + 1..star + 1 + postfix_len],
    ]
    .concat();
    match (ctx.lookup(&key).map(|e| &e.value), arrow) {
        (Some(Value::Hash(h)), Some(f)) => h.get(&pattern[f + 2..]).map(<[u8]>::to_vec),
        (Some(Value::Str(s)), None) => Some(s.clone()),
        _ => None,
    }
}

/// `strtod` over the C string, as SORT scores elements: the whole string must convert (an empty
/// one is 0), no NaN, no overflow or underflow (`ERANGE`).
fn sort_score(bytes: &[u8]) -> Option<f64> {
    let s = c_str(bytes);
    if s.is_empty() {
        return Some(0.0);
    }
    match strtod_full(s) {
        Some((v, false)) if !v.is_nan() => Some(v),
        _ => None,
    }
}

/// `strcoll` in the C (or C.UTF-8) locale: byte order of the C strings.
fn coll(a: &[u8], b: &[u8]) -> Ordering {
    c_str(a).cmp(c_str(b))
}

/// One element to sort (`redisSortObject`): its score, or the BY value ALPHA compares.
struct Item {
    obj: Vec<u8>,
    score: f64,
    cmp_obj: Option<Vec<u8>>,
}

pub fn sort(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sort_generic(ctx, argv, false)
}

pub fn sort_ro(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    sort_generic(ctx, argv, true)
}

fn sort_generic(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], readonly: bool) -> Reply {
    let mut o = match parse(argv, readonly) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let in_script = ctx.in_script;
    // Lists and sorted sets keep their order, a set is in hash order: with STORE or from a
    // script, a set is sorted by ALPHA instead so that replicas get the same result.
    let is_set = matches!(ctx.lookup(&argv[1]).map(|e| &e.value), Some(Value::Set(_)));
    if o.dont_sort && is_set && (o.store.is_some() || in_script) {
        o.dont_sort = false;
        o.alpha = true;
        o.sort_by = None;
    }
    let elements: Vec<Vec<u8>> = match ctx.lookup_mut(&argv[1]).map(|e| &mut e.value) {
        None => Vec::new(),
        Some(Value::List(l)) => {
            if o.dont_sort && o.desc {
                l.iter().rev().cloned().collect()
            } else {
                l.iter().cloned().collect()
            }
        }
        Some(Value::Set(s)) => s.iter().map(|m| m.into_owned()).collect(),
        Some(Value::ZSet(z)) => {
            z.convert_to_table();
            if o.dont_sort && o.desc {
                z.iter().rev().map(|s| s.member.clone()).collect()
            } else {
                z.iter().map(|s| s.member.clone()).collect()
            }
        }
        Some(_) => return wrongtype(),
    };
    let len = elements.len() as i64;
    let start = o.limit_start.max(0);
    let mut end = if o.limit_count < 0 {
        len - 1
    } else {
        start.saturating_add(o.limit_count) - 1
    };
    let (start, end) = if start >= len {
        (len - 1, len - 2)
    } else {
        if end >= len {
            end = len - 1;
        }
        (start, end)
    };
    let mut vector: Vec<Item> = elements
        .into_iter()
        .map(|obj| Item {
            obj,
            score: 0.0,
            cmp_obj: None,
        })
        .collect();
    let mut conversion_error = false;
    if !o.dont_sort {
        for item in &mut vector {
            let by_val = match &o.sort_by {
                Some(pattern) => match lookup_by_pattern(ctx, pattern, &item.obj) {
                    Some(v) => v,
                    None => continue,
                },
                None => item.obj.clone(),
            };
            if o.alpha {
                if o.sort_by.is_some() {
                    item.cmp_obj = Some(by_val);
                }
            } else {
                match sort_score(&by_val) {
                    Some(score) => item.score = score,
                    None => conversion_error = true,
                }
            }
        }
        let store = o.store.is_some();
        let by_pattern = o.sort_by.is_some();
        let compare = |a: &Item, b: &Item| {
            let cmp = if !o.alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.obj.cmp(&b.obj))
            } else if by_pattern {
                match (&a.cmp_obj, &b.cmp_obj) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) if store => x.cmp(y),
                    (Some(x), Some(y)) => coll(x, y),
                }
            } else if store {
                a.obj.cmp(&b.obj)
            } else {
                coll(&a.obj, &b.obj)
            };
            if o.desc { cmp.reverse() } else { cmp }
        };
        // `sortCompare` leaves ALPHA BY ties equal, so the algorithm decides their order:
        // glibc's qsort is a stable merge sort; with BY and a LIMIT that cuts, Redis's own
        // partial quicksort (`pqsort.c`) sorts only what the range needs.
        if by_pattern && (start != 0 || end != len - 1) {
            if end >= start {
                pqsort(&mut vector, &compare, start as usize, end as usize);
            }
        } else {
            vector.sort_by(compare);
        }
    }
    if conversion_error {
        return Reply::error("ERR One or more scores can't be converted into double");
    }
    let picked = if end >= start {
        &vector[start as usize..=end as usize]
    } else {
        &[][..]
    };
    let Some(dst) = o.store.map(|i| &argv[i]) else {
        let mut out = Vec::new();
        for item in picked {
            if o.gets.is_empty() {
                out.push(Reply::Bulk(item.obj.clone()));
            }
            for pattern in &o.gets {
                out.push(match lookup_by_pattern(ctx, pattern, &item.obj) {
                    Some(v) => Reply::Bulk(v),
                    None => Reply::Nil,
                });
            }
        }
        return Reply::Array(out);
    };
    let mut list = std::collections::VecDeque::new();
    for item in picked {
        if o.gets.is_empty() {
            list.push_back(item.obj.clone());
        }
        for pattern in &o.gets {
            list.push_back(lookup_by_pattern(ctx, pattern, &item.obj).unwrap_or_default());
        }
    }
    let stored = list.len();
    store_aggregate(ctx, argv, dst, Value::List(list), stored)
}

/// `pqsort.c` (Bentley & McIlroy's quicksort, as NetBSD's qsort), which skips the partitions
/// outside the elements `lrange..=rrange`: the same swaps, so the same order of ties.
fn pqsort<T>(v: &mut [T], cmp: &dyn Fn(&T, &T) -> Ordering, lrange: usize, rrange: usize) {
    // A partition `lo..lo + n` wholly before or after the range is left alone.
    let outside = |lo: usize, n: usize| {
        (lrange < lo && rrange < lo) || (lrange >= lo + n && rrange >= lo + n)
    };
    let mut a = 0;
    let mut n = v.len();
    let mut stack = Vec::new();
    loop {
        pq_partition(v, cmp, &mut a, &mut n, &mut stack, &outside);
        match stack.pop() {
            Some((lo, m)) => {
                a = lo;
                n = m;
            }
            None => return,
        }
    }
}

/// One `_pqsort` call: partitions `a..a + n`, queues the left part (which `_pqsort` recurses
/// into first) and loops on the right part; returns when nothing is left to do here.
fn pq_partition<T>(
    v: &mut [T],
    cmp: &dyn Fn(&T, &T) -> Ordering,
    a: &mut usize,
    n: &mut usize,
    stack: &mut Vec<(usize, usize)>,
    outside: &dyn Fn(usize, usize) -> bool,
) {
    loop {
        let (base, len) = (*a, *n);
        if len < 7 {
            for pm in base + 1..base + len {
                let mut pl = pm;
                while pl > base && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = base + len / 2;
        if len > 7 {
            let mut pl = base;
            let mut pn = base + len - 1;
            if len > 40 {
                let d = len / 8;
                pl = med3(v, cmp, pl, pl + d, pl + 2 * d);
                pm = med3(v, cmp, pm - d, pm, pm + d);
                pn = med3(v, cmp, pn - 2 * d, pn - d, pn);
            }
            pm = med3(v, cmp, pl, pm, pn);
        }
        v.swap(base, pm);
        let (mut pa, mut pb) = (base + 1, base + 1);
        let (mut pc, mut pd) = (base + len - 1, base + len - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[base]);
                if c == Ordering::Greater {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[base]);
                if c == Ordering::Less {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = base + len;
        let r = (pa - base).min(pb - pa);
        vec_swap(v, base, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vec_swap(v, pb, pn - r, r);
        let left = pb - pa;
        let right = pd - pc;
        if right > 1 && !outside(pn - right, right) {
            // `_pqsort` recurses into the left part first, then iterates on the right: the
            // right part waits on the stack under the left one.
            if left > 1 && !outside(base, left) {
                stack.push((pn - right, right));
                *a = base;
                *n = left;
                continue;
            }
            *a = pn - right;
            *n = right;
            continue;
        }
        if left > 1 && !outside(base, left) {
            *a = base;
            *n = left;
            continue;
        }
        return;
    }
}

/// `med3`: the index of the median of three.
fn med3<T>(v: &[T], cmp: &dyn Fn(&T, &T) -> Ordering, a: usize, b: usize, c: usize) -> usize {
    let lt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Less;
    let gt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Greater;
    if lt(a, b) {
        if lt(b, c) {
            b
        } else if lt(a, c) {
            c
        } else {
            a
        }
    } else if gt(b, c) {
        b
    } else if lt(a, c) {
        a
    } else {
        c
    }
}

/// `vecswap`: swaps `n` elements from `i` with `n` from `j`, in order.
fn vec_swap<T>(v: &mut [T], i: usize, j: usize, n: usize) {
    for k in 0..n {
        v.swap(i + k, j + k);
    }
}
