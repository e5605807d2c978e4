//! Bitmap commands (`bitops.c`) on string values: bit 0 is the most significant bit of byte 0.

use super::{is_opt, not_integer, syntax_error, wrongtype};
use crate::redis::keyspace::Value;
use crate::redis::number::string2ll;
use crate::redis::reply::Reply;
use crate::redis::resp::PROTO_MAX_BULK_LEN;
use crate::redis::server::Ctx;

const BIT_OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";

/// `getBitOffsetFromArgument`: a bit offset whose byte is below proto-max-bulk-len (512 MB),
/// unless the command comes from our master (`mustObeyClient`).
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8]) -> Result<u64, Reply> {
    match string2ll(arg) {
        Some(n) if n >= 0 && (ctx.from_master || (n >> 3) < PROTO_MAX_BULK_LEN) => Ok(n as u64),
        _ => Err(Reply::error(BIT_OFFSET_ERR)),
    }
}

/// `lookupKeyRead` plus `checkType` for a string: `Err` on WRONGTYPE.
fn read_string<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a [u8]>, Reply> {
    match ctx.lookup(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(wrongtype()),
    }
}

/// SETBIT key offset value (`setbitCommand`): offset, then value, then the key's type are
/// checked. The string grows with zero bytes to hold the bit (`lookupStringForBitCommand`); it
/// is propagated verbatim only when it created the key, grew it or flipped the bit. Answers the
/// bit's old value.
pub fn setbit(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let offset = match bit_offset(ctx, &argv[2]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let on = match string2ll(&argv[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return Reply::error("ERR bit is not an integer or out of range"),
    };
    let key = &argv[1];
    let exists = match ctx.lookup(key).map(|e| &e.value) {
        None => false,
        Some(Value::Str(_)) => true,
        Some(_) => return wrongtype(),
    };
    if !exists {
        ctx.db().insert_new(key, Value::Str(Vec::new()));
    }
    let Some(Value::Str(s)) = ctx.db().get_mut(key).map(|e| &mut e.value) else {
        return wrongtype();
    };
    let byte = (offset >> 3) as usize;
    let mask = 1u8 << (7 - (offset & 7));
    let grown = s.len() <= byte;
    if grown {
        s.resize(byte + 1, 0);
    }
    let old = s[byte] & mask != 0;
    if on {
        s[byte] |= mask;
    } else {
        s[byte] &= !mask;
    }
    if !exists || grown || old != on {
        ctx.propagate(argv.to_vec());
    }
    Reply::Integer(i64::from(old))
}

/// GETBIT key offset (`getbitCommand`): the offset is checked before the key; bits past the end
/// (or of a missing key) are 0.
pub fn getbit(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let offset = match bit_offset(ctx, &argv[2]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let s = match read_string(ctx, &argv[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Integer(0),
        Err(e) => return e,
    };
    let byte = usize::try_from(offset >> 3).unwrap_or(usize::MAX);
    let bit = s
        .get(byte)
        .is_some_and(|b| b & (1 << (7 - (offset & 7))) != 0);
    Reply::Integer(i64::from(bit))
}

/// A byte range of the string and the masks of the bits outside a BIT range in its first and
/// last byte (`bitcountCommand`, `bitposCommand`), or `None` for an empty range.
struct Span {
    start: usize,
    end: usize,
    first_neg_mask: u8,
    last_neg_mask: u8,
}

/// The index arithmetic both commands share: negative indexes from the end, clamped to the
/// string (in bits with BIT), converted to bytes with edge masks.
fn span(len: usize, mut start: i64, mut end: i64, bit: bool) -> Option<Span> {
    let mut total = len as i64;
    if bit {
        total <<= 3;
    }
    if start < 0 {
        start = total.wrapping_add(start);
    }
    if end < 0 {
        end = total.wrapping_add(end);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    let (mut first_neg_mask, mut last_neg_mask) = (0u8, 0u8);
    if bit {
        first_neg_mask = !((1u16 << (8 - (start & 7))) - 1) as u8;
        last_neg_mask = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    Some(Span {
        start: start as usize,
        end: end as usize,
        first_neg_mask,
        last_neg_mask,
    })
}

/// `getLongLongFromObjectOrReply` with the default message.
fn parse_index(arg: &[u8]) -> Result<i64, Reply> {
    string2ll(arg).ok_or_else(not_integer)
}

/// The BYTE|BIT option (case-insensitive); anything else is a syntax error.
fn parse_unit(arg: &[u8]) -> Result<bool, Reply> {
    if is_opt(arg, "bit") {
        Ok(true)
    } else if is_opt(arg, "byte") {
        Ok(false)
    } else {
        Err(syntax_error())
    }
}

fn popcount(bytes: &[u8]) -> i64 {
    bytes.iter().map(|b| i64::from(b.count_ones())).sum()
}

/// BITCOUNT key [start end [BYTE|BIT]] (`bitcountCommand` in 7.0): a missing key answers 0
/// before any argument is read; then WRONGTYPE, the indexes, an empty negative range (0, before
/// the unit is read), the unit.
pub fn bitcount(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let s = match read_string(ctx, &argv[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Integer(0),
        Err(e) => return e,
    };
    let span = match argv.len() {
        2 => span(s.len(), 0, -1, false),
        4 | 5 => {
            let start = match parse_index(&argv[2]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            let end = match parse_index(&argv[3]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if start < 0 && end < 0 && start > end {
                return Reply::Integer(0);
            }
            let bit = match argv.get(4).map(|a| parse_unit(a)).transpose() {
                Ok(b) => b.unwrap_or(false),
                Err(e) => return e,
            };
            span(s.len(), start, end, bit)
        }
        _ => return syntax_error(),
    };
    let Some(span) = span else {
        return Reply::Integer(0);
    };
    let mut count = popcount(&s[span.start..=span.end]);
    count -= popcount(&[
        s[span.start] & span.first_neg_mask,
        s[span.end] & span.last_neg_mask,
    ]);
    Reply::Integer(count)
}

/// `redisBitpos`: the first bit equal to `bit` in `bytes`; looking for 0 in all-ones bytes
/// answers the bit just past them (the string is zero-padded), looking for 1 in zeros -1.
fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    for (i, b) in bytes.iter().enumerate() {
        let b = if bit { *b } else { !*b };
        if b != 0 {
            return (i as i64) * 8 + i64::from(b.leading_zeros());
        }
    }
    if bit { -1 } else { bytes.len() as i64 * 8 }
}

/// BITPOS key bit [start [end [BYTE|BIT]]] (`bitposCommand` in 7.0): the bit argument is read
/// first, then a missing key answers (-1 for 1, 0 for 0) before anything else; with an explicit
/// end, a 0 not found inside the range is -1 rather than the bit past it.
pub fn bitpos(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let bit = match string2ll(&argv[2]) {
        None => return not_integer(),
        Some(v @ (0 | 1)) => v == 1,
        Some(_) => return Reply::error("ERR The bit argument must be 1 or 0."),
    };
    let s = match read_string(ctx, &argv[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Integer(if bit { -1 } else { 0 }),
        Err(e) => return e,
    };
    let mut end_given = false;
    let span = match argv.len() {
        3 => span(s.len(), 0, -1, false),
        4..=6 => {
            let start = match parse_index(&argv[3]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            let unit_bit = match argv.get(5).map(|a| parse_unit(a)).transpose() {
                Ok(b) => b.unwrap_or(false),
                Err(e) => return e,
            };
            let end = match argv.get(4) {
                Some(arg) => match parse_index(arg) {
                    Ok(v) => {
                        end_given = true;
                        v
                    }
                    Err(e) => return e,
                },
                None => s.len() as i64 - 1,
            };
            span(s.len(), start, end, unit_bit)
        }
        _ => return syntax_error(),
    };
    let Some(Span {
        mut start,
        end,
        first_neg_mask,
        last_neg_mask,
    }) = span
    else {
        return Reply::Integer(-1);
    };
    let mut bytes = end - start + 1;
    let pos = 'found: {
        if first_neg_mask != 0 {
            let mut edge = if bit {
                s[start] & !first_neg_mask
            } else {
                s[start] | first_neg_mask
            };
            if last_neg_mask != 0 && bytes == 1 {
                edge = if bit {
                    edge & !last_neg_mask
                } else {
                    edge | last_neg_mask
                };
            }
            let pos = first_bit(&[edge], bit);
            if bytes == 1 || (pos != -1 && pos != 8) {
                break 'found pos;
            }
            start += 1;
            bytes -= 1;
        }
        let whole = bytes - usize::from(last_neg_mask != 0);
        if whole > 0 {
            let pos = first_bit(&s[start..start + whole], bit);
            if bytes == whole || (pos != -1 && pos != (whole as i64) << 3) {
                break 'found pos;
            }
            start += whole;
            bytes -= whole;
        }
        let edge = if bit {
            s[end] & !last_neg_mask
        } else {
            s[end] | last_neg_mask
        };
        first_bit(&[edge], bit)
    };
    if end_given && !bit && pos == (bytes as i64) << 3 {
        return Reply::Integer(-1);
    }
    Reply::Integer(if pos == -1 {
        -1
    } else {
        pos + ((start as i64) << 3)
    })
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...] (`bitopCommand`): missing sources are empty
/// strings, shorter ones are zero-padded; the result replaces the destination (TTL dropped), or
/// an empty result deletes it. Propagated verbatim when it stored or deleted; answers the
/// result's length.
pub fn bitop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    #[derive(PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = if is_opt(&argv[1], "and") {
        Op::And
    } else if is_opt(&argv[1], "or") {
        Op::Or
    } else if is_opt(&argv[1], "xor") {
        Op::Xor
    } else if is_opt(&argv[1], "not") {
        Op::Not
    } else {
        return syntax_error();
    };
    if op == Op::Not && argv.len() != 4 {
        return Reply::error("ERR BITOP NOT must be called with a single source key.");
    }
    let mut sources: Vec<Vec<u8>> = Vec::with_capacity(argv.len() - 3);
    for key in &argv[3..] {
        match read_string(ctx, key) {
            Ok(s) => sources.push(s.map(<[u8]>::to_vec).unwrap_or_default()),
            Err(e) => return e,
        }
    }
    let max_len = sources.iter().map(Vec::len).max().unwrap_or(0);
    let dest = &argv[2];
    if max_len == 0 {
        if ctx.db().remove(dest).is_some() {
            ctx.propagate(argv.to_vec());
        }
        return Reply::Integer(0);
    }
    let byte = |s: &Vec<u8>, i: usize| s.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = (0..max_len)
        .map(|i| {
            let first = byte(&sources[0], i);
            sources[1..].iter().fold(
                if op == Op::Not { !first } else { first },
                |acc, s| match op {
                    Op::And => acc & byte(s, i),
                    Op::Or => acc | byte(s, i),
                    Op::Xor | Op::Not => acc ^ byte(s, i),
                },
            )
        })
        .collect();
    ctx.expire_if_needed(dest);
    ctx.db().set(dest, Value::Str(result), false);
    ctx.propagate(argv.to_vec());
    Reply::Integer(max_len as i64)
}
