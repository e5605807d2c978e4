//! The master's side of replication: a replica's `PSYNC` (partial resync from the backlog, or a
//! full one from a snapshot), its `REPLCONF ACK`s, and `WAIT` (`replicationCron` is in the parent).

use model::marks::{Mark, mark};
use std::time::Duration;

use model::history::EventKind;
use model::redis::ClientId;

use super::ReplicaLink;
use crate::nodes::redis::Node;
use crate::nodes::redis::persistence;
use crate::nodes::resp::{encode_command, encode_commands};
use crate::world::net::socket::NetWriter;

/// `PSYNC replid offset` from a replica's connection: registers it and returns the bytes that
/// start its stream.
pub fn psync(
    node: &Node,
    conn: ClientId,
    peer: &str,
    writer: NetWriter,
    replid: &str,
    psync_offset: i64,
) -> Vec<u8> {
    let mut repl = node.repl.borrow_mut();
    let same_history = replid.eq_ignore_ascii_case(&repl.replid)
        || (replid.eq_ignore_ascii_case(&repl.replid2) && psync_offset <= repl.second_offset);
    let in_backlog = psync_offset >= repl.backlog_first() && psync_offset <= repl.offset + 1;
    let mut out = Vec::new();
    let detail = if same_history && in_backlog {
        out.extend(format!("+CONTINUE {}\r\n", repl.replid).into_bytes());
        let skip = (psync_offset - repl.backlog_first()) as usize;
        out.extend(repl.backlog.iter().skip(skip));
        format!(
            "{peer}: partial resync from offset {psync_offset} ({} bytes)",
            repl.offset + 1 - psync_offset
        )
    } else {
        let payload = encode_commands(&persistence::snapshot(&node.server.borrow()));
        out.extend(format!("+FULLRESYNC {} {}\r\n", repl.replid, repl.offset).into_bytes());
        out.extend(format!("${}\r\n", payload.len()).into_bytes());
        out.extend(payload);
        out.extend(b"\r\n");
        format!(
            "{peer}: full resync at offset {} (asked {replid} {psync_offset})",
            repl.offset
        )
    };
    // The replica is online (`src/replication.c` 780-782 for a partial resync; a full one
    // counts as online at once here: the snapshot is sent without a fork).
    repl.replicas.insert(
        conn,
        ReplicaLink {
            name: peer.to_string(),
            writer,
            ack_offset: 0,
            ack_unix_s: super::unix_s(node),
        },
    );
    drop(repl);
    super::refresh_good_replicas(node);
    node.world.record(
        &node.name,
        EventKind::Replication {
            what: "replica-sync".into(),
            detail,
        },
    );
    out
}

/// `REPLCONF ACK offset` from a replica (`src/replication.c` 1185-1194): its offset, and the
/// time in whole seconds of this node's wall clock.
pub fn ack(node: &Node, conn: ClientId, offset: i64) {
    let now_unix_s = super::unix_s(node);
    let mut repl = node.repl.borrow_mut();
    if let Some(link) = repl.replicas.get_mut(&conn) {
        link.ack_offset = link.ack_offset.max(offset);
        link.ack_unix_s = now_unix_s;
        repl.acks.bump();
    }
}

/// A replica's connection closed (`unlinkClient` refreshes the good replicas,
/// `src/networking.c` 1695).
pub fn replica_gone(node: &Node, conn: ClientId) {
    let link = node.repl.borrow_mut().replicas.remove(&conn);
    if let Some(link) = link {
        super::refresh_good_replicas(node);
        node.world.record(
            &node.name,
            EventKind::Replication {
                what: "replica-lost".into(),
                detail: link.name,
            },
        );
    }
}

/// `WAIT numreplicas timeout` (`waitCommand`): asks every replica for an ACK, then waits until
/// enough replicas acknowledged the current offset or the timeout (by this node's clock)
/// passes; returns how many did.
pub async fn wait(node: &Node, numreplicas: i64, timeout_ms: i64) -> i64 {
    let (target, acks) = {
        let repl = node.repl.borrow();
        (repl.offset, repl.acks.clone())
    };
    if node.repl.borrow().acked(target) >= numreplicas {
        return node.repl.borrow().acked(target);
    }
    let getack = encode_command(&[b"REPLCONF".to_vec(), b"GETACK".to_vec(), b"*".to_vec()]);
    node.repl.borrow_mut().feed(&getack);
    let deadline = (timeout_ms > 0).then(|| {
        node.world.time.now_us()
            + node
                .world
                .time
                .true_duration_us(&node.name, timeout_ms as u64)
    });
    loop {
        let seen = acks.value();
        let acked = node.repl.borrow().acked(target);
        if acked >= numreplicas {
            mark(Mark::WaitMet);
            return acked;
        }
        let now = node.world.time.now_us();
        match deadline {
            Some(d) if now >= d => {
                mark(Mark::WaitShort);
                if acked > 0 {
                    mark(Mark::WaitPartiallyAcked);
                }
                return acked;
            }
            Some(d) => {
                tokio::select! {
                    biased;
                    _ = acks.changed_from(seen) => {}
                    _ = madsim::time::sleep(Duration::from_micros(d - now)) => {}
                }
            }
            None => acks.changed_from(seen).await,
        }
    }
}
