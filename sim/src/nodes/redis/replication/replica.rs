//! The replica's side of replication (`syncWithMaster`, `readSyncBulkPayload`): connect to
//! the master, `PSYNC`, load a full resync's snapshot or continue, then apply the stream in
//! order, acknowledging `REPLCONF GETACK`; on any failure, retry a second later.

use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use model::history::{EventKind, render_command};
use model::marks::{Mark, mark};
use model::redis::{Reply, RequestParser};

use super::REPL_TIMEOUT;
use crate::nodes::REDIS_PORT;
use crate::nodes::redis::Node;
use crate::nodes::redis::persistence;
use crate::nodes::resp::{encode_command, encode_commands};
use crate::world::net::socket::NetConn;
use crate::world::time::Time;

/// The replica's side of the link, for as long as it replicates `master`: connect, PSYNC,
/// apply the stream; on any failure wait a second and start over.
pub(super) async fn replica_link(node: Rc<Node>, master: String) {
    loop {
        if let Err(why) = sync_with_master(&node, &master).await {
            let was_up = {
                let mut repl = node.repl.borrow_mut();
                let was_up = repl.link_up;
                repl.link_up = false;
                repl.master_writer = None;
                if was_up {
                    repl.link_down_since_us = Some(node.world.time.now_us());
                }
                was_up
            };
            if was_up {
                node.world.record(
                    &node.name,
                    EventKind::Replication {
                        what: "link-down".into(),
                        detail: format!("{master}: {why}"),
                    },
                );
            }
        }
        let retry = node.world.time.true_duration_us(&node.name, 1000);
        madsim::time::sleep(Duration::from_micros(retry)).await;
    }
}

async fn read_reply(time: &Time, conn: &mut NetConn, buf: &mut BytesMut) -> Result<Reply, String> {
    loop {
        if let Some((reply, used)) = Reply::decode(buf).map_err(|e| e.to_string())? {
            let _ = buf.split_to(used);
            return Ok(reply);
        }
        read_more(time, conn, buf).await?;
    }
}

async fn read_more(time: &Time, conn: &mut NetConn, buf: &mut BytesMut) -> Result<(), String> {
    match time.timeout(REPL_TIMEOUT, conn.read_buf(buf)).await {
        Err(_) => Err("MASTER timeout: no data nor PING received".into()),
        Ok(Ok(0)) => Err("connection closed by master".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(_)) => Ok(()),
    }
}

async fn sync_with_master(node: &Rc<Node>, master: &str) -> Result<(), String> {
    let mut conn = match node
        .world
        .time
        .timeout(
            REPL_TIMEOUT,
            NetConn::connect(&node.world, &node.name, master, REDIS_PORT),
        )
        .await
    {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("connect timeout".into()),
    };
    let (replid, offset) = {
        let repl = node.repl.borrow();
        (repl.replid.clone(), repl.offset)
    };
    let handshake = encode_commands(&[
        vec![
            b"REPLCONF".to_vec(),
            b"listening-port".to_vec(),
            REDIS_PORT.to_string().into_bytes(),
        ],
        vec![
            b"PSYNC".to_vec(),
            replid.into_bytes(),
            (offset + 1).to_string().into_bytes(),
        ],
    ]);
    conn.send(handshake).map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(4096);
    read_reply(&node.world.time, &mut conn, &mut buf).await?;
    let answer = match read_reply(&node.world.time, &mut conn, &mut buf).await? {
        Reply::Status(s) => s,
        Reply::Error(e) => return Err(String::from_utf8_lossy(&e).into_owned()),
        other => return Err(format!("unexpected PSYNC reply {other:?}")),
    };
    let words: Vec<&str> = answer.split(' ').collect();
    let detail = match words.as_slice() {
        ["FULLRESYNC", replid, offset] => {
            let offset: i64 = offset.parse().map_err(|_| "bad FULLRESYNC offset")?;
            let payload = match read_reply(&node.world.time, &mut conn, &mut buf).await? {
                Reply::Bulk(payload) => payload,
                other => return Err(format!("unexpected RDB payload {other:?}")),
            };
            load_snapshot(node, master, replid, offset, payload)?;
            mark(Mark::ReplicaFullResync);
            format!("{master}: full resync at offset {offset}")
        }
        ["CONTINUE", new_replid] => {
            mark(Mark::ReplicaPartialResync);
            let mut repl = node.repl.borrow_mut();
            if !new_replid.eq_ignore_ascii_case(&repl.replid) {
                repl.replid2 = std::mem::replace(&mut repl.replid, new_replid.to_string());
                repl.second_offset = repl.offset + 1;
            }
            format!("{master}: partial resync from offset {}", repl.offset + 1)
        }
        _ => return Err(format!("unexpected PSYNC reply {answer}")),
    };
    {
        let mut repl = node.repl.borrow_mut();
        repl.link_up = true;
        repl.link_down_since_us = None;
        repl.last_io_us = Some(node.world.time.now_us());
        repl.master_writer = Some(conn.writer());
    }
    node.world.record(
        &node.name,
        EventKind::Replication {
            what: "link-up".into(),
            detail,
        },
    );
    let mut parser = RequestParser::new();
    loop {
        while !buf.is_empty() {
            match parser.parse(&mut buf) {
                // A fault triggered by this write at its instant stops the replica here.
                Ok(Some(argv)) => {
                    if apply(node, master, &conn, &argv) {
                        madsim::task::yield_now().await;
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(format!("protocol error from master: {e}")),
            }
        }
        read_more(&node.world.time, &mut conn, &mut buf).await?;
        node.repl.borrow_mut().last_io_us = Some(node.world.time.now_us());
    }
}

/// FULLRESYNC: drop the whole dataset, load the master's (`readSyncBulkPayload`); with an AOF,
/// the replica rewrites it to the new dataset.
fn load_snapshot(
    node: &Node,
    master: &str,
    replid: &str,
    offset: i64,
    payload: Vec<u8>,
) -> Result<(), String> {
    let now_ms = node.world.time.wall_ms(&node.name);
    let mut commands = Vec::new();
    let mut bytes = BytesMut::from(&payload[..]);
    let mut parser = RequestParser::new();
    while let Some(argv) = parser.parse(&mut bytes).map_err(|e| e.to_string())? {
        commands.push(argv);
    }
    {
        let mut server = node.server.borrow_mut();
        server.apply_replicated(now_ms, &[b"FLUSHALL".to_vec()]);
        for argv in &commands {
            server.apply_replicated(now_ms, argv);
        }
        server.take_propagated();
    }
    if node.fsync != persistence::Fsync::Off {
        node.world.disks.with(&node.name, |disk| {
            disk.durable = commands.clone();
            disk.page_cache.clear();
        });
    }
    {
        let mut repl = node.repl.borrow_mut();
        repl.replid = replid.to_string();
        repl.replid2 = "0".repeat(40);
        repl.second_offset = -1;
        repl.offset = offset;
        repl.backlog.clear();
    }
    node.observe_owner("replication", now_ms);
    let _ = master;
    Ok(())
}

/// Applies one command of the master's stream; true when its `replicated` event injected a
/// fault at its instant (`World::record`).
fn apply(node: &Node, master: &str, conn: &NetConn, argv: &[Vec<u8>]) -> bool {
    let name = argv[0].to_ascii_lowercase();
    let bytes = encode_command(argv);
    if name == b"replconf" {
        if argv
            .get(1)
            .is_some_and(|a| a.eq_ignore_ascii_case(b"getack"))
        {
            let offset = node.repl.borrow().offset.to_string().into_bytes();
            let _ = conn.send(encode_command(&[
                b"REPLCONF".to_vec(),
                b"ACK".to_vec(),
                offset,
            ]));
        }
        node.repl.borrow_mut().append_backlog(&bytes);
        return false;
    }
    node.repl.borrow_mut().append_backlog(&bytes);
    if name == b"ping" || name == b"multi" || name == b"exec" || name == b"select" {
        return false;
    }
    let now_ms = node.world.time.wall_ms(&node.name);
    node.server.borrow_mut().apply_replicated(now_ms, argv);
    node.server.borrow_mut().take_propagated();
    persistence::append(&node.world, &node.name, node.fsync, &[argv.to_vec()]);
    let offset = node.repl.borrow().offset;
    let injected = node.world.record(
        &node.name,
        EventKind::Replicated {
            master: master.to_string(),
            command: render_command(argv),
            offset,
        },
    );
    if !node.world.procs.is_crashed(&node.name) {
        node.observe_owner("replication", now_ms);
    }
    injected
}
