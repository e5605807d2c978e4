//! BLPOP, BRPOP, BLMOVE and BRPOPLPUSH (`t_list.c` `blockingPopGenericCommand`,
//! `blmoveGenericCommand`, `blocked.c`). A pop that finds nothing blocks the client
//! (`Outcome::Blocked`); a later write to one of its keys serves it in blocking order
//! (`serve_blocked_on_key`, after the writing command), and the host answers the ones whose
//! timeout passed with the null array (`RedisServer::expire_blocked`). Inside MULTI/EXEC and
//! scripts the command never blocks: it answers as timed out at once (BLMOVE with a null bulk).

use std::collections::VecDeque;

use super::lists::{lmove_generic, move_element, parse_position};
use super::wrongtype;
use crate::redis::client::{Blocked, MoveTarget};
use crate::redis::keyspace::Value;
use crate::redis::reply::Reply;
use crate::redis::server::{Core, Ctx};

/// `getTimeoutFromObjectOrReply(..., UNIT_SECONDS)`: a float number of seconds, rounded up to
/// ms; 0 waits for ever. The absolute deadline.
fn timeout_deadline(arg: &[u8], now: i64) -> Result<Option<i64>, Reply> {
    let seconds = crate::redis::number::parse_long_double(arg)
        .ok_or_else(|| Reply::error("ERR timeout is not a float or out of range"))?;
    let ms = (seconds * 1000.0).ceil();
    // C's (long long) of an out-of-range value is LLONG_MIN on x86-64: "negative".
    if !(0.0..9.2e18).contains(&ms) {
        return Err(Reply::error("ERR timeout is negative"));
    }
    let ms = ms as i64;
    Ok((ms > 0).then(|| ms.saturating_add(now)))
}

fn pop(list: &mut VecDeque<Vec<u8>>, head: bool) -> Option<Vec<u8>> {
    if head {
        list.pop_front()
    } else {
        list.pop_back()
    }
}

fn blocking_pop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], head: bool) -> Reply {
    let deadline = match timeout_deadline(&argv[argv.len() - 1], ctx.now) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let keys = &argv[1..argv.len() - 1];
    for key in keys {
        let list = match ctx.lookup_mut(key).map(|e| &mut e.value) {
            None => continue,
            Some(Value::List(l)) => l,
            Some(_) => return wrongtype(),
        };
        let Some(value) = pop(list, head) else {
            continue;
        };
        ctx.db().remove_if_empty(key);
        let name: &[u8] = if head { b"LPOP" } else { b"RPOP" };
        ctx.propagate(vec![name.to_vec(), key.clone()]);
        return Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(value)]);
    }
    if ctx.deny_blocking {
        return Reply::NilArray;
    }
    ctx.block = Some(Blocked {
        db: ctx.db,
        keys: keys.to_vec(),
        head,
        deadline_ms: deadline,
        target: None,
    });
    Reply::NilArray
}

pub fn blpop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    blocking_pop(ctx, argv, true)
}

pub fn brpop(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    blocking_pop(ctx, argv, false)
}

/// `blmoveGenericCommand`: a source list moves an element at once (propagated as LMOVE /
/// RPOPLPUSH); a missing one blocks on the source alone.
fn blmove_generic(
    ctx: &mut Ctx<'_>,
    argv: &[Vec<u8>],
    from_head: bool,
    to_head: bool,
    timeout: &[u8],
    rpoplpush: bool,
) -> Reply {
    let deadline = match timeout_deadline(timeout, ctx.now) {
        Ok(d) => d,
        Err(e) => return e,
    };
    match ctx.lookup(&argv[1]).map(|e| &e.value) {
        None => {}
        Some(Value::List(_)) => {
            let propagated = if rpoplpush {
                vec![b"RPOPLPUSH".to_vec(), argv[1].clone(), argv[2].clone()]
            } else {
                let mut p = vec![b"LMOVE".to_vec()];
                p.extend_from_slice(&argv[1..5]);
                p
            };
            return lmove_generic(ctx, argv, from_head, to_head, propagated);
        }
        Some(_) => return wrongtype(),
    }
    if ctx.deny_blocking {
        return Reply::Nil;
    }
    ctx.block = Some(Blocked {
        db: ctx.db,
        keys: vec![argv[1].clone()],
        head: from_head,
        deadline_ms: deadline,
        target: Some(MoveTarget {
            key: argv[2].clone(),
            head: to_head,
            rpoplpush,
        }),
    });
    Reply::NilArray
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout: the positions are parsed before
/// the timeout.
pub fn blmove(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    let (from_head, to_head) = match (parse_position(&argv[3]), parse_position(&argv[4])) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    blmove_generic(ctx, argv, from_head, to_head, &argv[5], false)
}

/// BRPOPLPUSH source destination timeout.
pub fn brpoplpush(ctx: &mut Ctx<'_>, argv: &[Vec<u8>]) -> Reply {
    blmove_generic(ctx, argv, false, true, &argv[3], true)
}

/// `getStringObjectFromListPosition`: how a served BLMOVE names its sides when propagated.
fn position_name(head: bool) -> Vec<u8> {
    if head {
        b"left".to_vec()
    } else {
        b"right".to_vec()
    }
}

/// `serveClientsBlockedOnListKey`: while the list at (db, key) has elements, the clients
/// blocked on it get one each, first blocked first served; each pop is propagated on its own.
/// A BLMOVE whose destination is not a list gets WRONGTYPE and pops nothing
/// (`serveClientBlockedOnList`).
pub(crate) fn serve_blocked_on_key(core: &mut Core, db: usize, key: &[u8], now: i64) {
    loop {
        let Some(&client) = core
            .blocking_keys
            .get(&(db, key.to_vec()))
            .and_then(VecDeque::front)
        else {
            return;
        };
        let Some((head, target)) = core
            .clients
            .get(&client)
            .and_then(|c| c.blocked.as_ref())
            .map(|b| (b.head, b.target.clone()))
        else {
            return;
        };
        let mut ctx = Ctx::new(core, client, now);
        ctx.db = db;
        if let Some(target) = target {
            let ready = matches!(
                ctx.lookup(key).map(|e| &e.value),
                Some(Value::List(list)) if !list.is_empty()
            );
            let moved = if ready {
                move_element(&mut ctx, key, &target.key, head, target.head)
            } else {
                Ok(None)
            };
            let reply = match moved {
                Ok(None) => {
                    core.flush_pending();
                    return;
                }
                Ok(Some(value)) => {
                    let mut effect = vec![
                        if target.rpoplpush {
                            b"RPOPLPUSH".to_vec()
                        } else {
                            b"LMOVE".to_vec()
                        },
                        key.to_vec(),
                        target.key.clone(),
                    ];
                    if !target.rpoplpush {
                        effect.push(position_name(head));
                        effect.push(position_name(target.head));
                    }
                    ctx.propagate(effect);
                    Reply::Bulk(value)
                }
                Err(e) => e,
            };
            core.unblock(client, reply);
            core.flush_pending();
            continue;
        }
        let value = match ctx.lookup_mut(key).map(|e| &mut e.value) {
            Some(Value::List(list)) => pop(list, head),
            _ => None,
        };
        let Some(value) = value else {
            core.flush_pending();
            return;
        };
        ctx.db().remove_if_empty(key);
        let name: &[u8] = if head { b"LPOP" } else { b"RPOP" };
        ctx.propagate(vec![name.to_vec(), key.to_vec()]);
        core.unblock(
            client,
            Reply::Array(vec![Reply::Bulk(key.to_vec()), Reply::Bulk(value)]),
        );
        core.flush_pending();
    }
}
