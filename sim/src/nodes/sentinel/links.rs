//! Instance links (`instanceLink`): one command connection to every instance a Sentinel knows
//! (masters, replicas, the other Sentinels), reconnected at most once per PING period
//! (`sentinelReconnectInstance`), with the pending commands' callbacks in order; a reply goes
//! to the command that asked for it.

use std::time::Duration;

use bytes::BytesMut;
use model::redis::Reply;

use super::{Callback, Link, PING_PERIOD, Shared, State};
use crate::nodes::resp::encode_command;
use crate::nodes::{REDIS_PORT, SENTINEL_PORT};
use crate::world::net::socket::{NetConn, NetReader};

impl State {
    /// The instance's link, made on first use. Looked up by the borrowed name: the timer asks
    /// for every instance's link several times per tick (an owned key per call was 10 % of a
    /// Sentinel failover run, issue 32).
    pub(super) fn link(&mut self, node: &str) -> &mut Link {
        if !self.links.contains_key(node) {
            let now = self.now();
            self.links.insert(node.to_string(), Link::new(now));
        }
        self.links.get_mut(node).expect("inserted above")
    }

    /// Queues a command on an instance's link; false when the link is down.
    pub(super) fn send(&mut self, node: &str, argv: Vec<Vec<u8>>, callback: Callback) -> bool {
        let link = self.link(node);
        let Some(writer) = &link.writer else {
            return false;
        };
        if writer.send(encode_command(&argv)).is_err() {
            return false;
        }
        link.pending.push_back(callback);
        true
    }

    pub(super) fn send_words(&mut self, node: &str, words: &[&str], callback: Callback) -> bool {
        self.send(
            node,
            words.iter().map(|w| w.as_bytes().to_vec()).collect(),
            callback,
        )
    }

    /// `instanceLinkCloseConnection`.
    pub(super) fn close_link(&mut self, node: &str) {
        let link = self.link(node);
        if let Some(writer) = link.writer.take() {
            writer.reset();
        }
        link.pending.clear();
        link.generation += 1;
    }

    pub(super) fn reconnect(&mut self, node: &str, shared: &Shared) {
        let now = self.now();
        let link = self.link(node);
        if !link.disconnected() || link.connecting || now - link.last_reconn_time < PING_PERIOD {
            return;
        }
        link.last_reconn_time = now;
        link.connecting = true;
        // `sentinelReconnectInstance` (redis 7.0.15 `src/sentinel.c` 2425-2451): the
        // non-blocking connect is issued, `cc_conn_time` set and a PING queued at once
        // (`sentinelSendPing` 3094-3106), so the pending-PING clock starts at the attempt, even
        // when the connection is then refused: an instance that died is SDOWN
        // `down-after-milliseconds` after the first reconnection attempt, not after its last
        // PONG.
        link.cc_conn_time = now;
        link.last_ping_time = now;
        if link.act_ping_time == 0 {
            link.act_ping_time = now;
        }
        link.generation += 1;
        let generation = link.generation;
        madsim::task::spawn_local(connect_link(shared.clone(), node.to_string(), generation));
    }

    /// A reply on an instance link, to the command that asked for it
    /// (`sentinelPingReplyCallback`, `sentinelInfoReplyCallback`,
    /// `sentinelReceiveIsMasterDownReply`).
    pub(super) fn on_reply(&mut self, node: &str, callback: Callback, reply: Reply) {
        match callback {
            Callback::Discard => {}
            Callback::Ping => self.on_pong(node, &reply),
            Callback::Info => self.on_info(node, reply),
            Callback::IsMasterDown { master } => self.on_is_master_down(node, &master, reply),
        }
    }
}

/// Opens an instance link; on success starts reading its replies.
async fn connect_link(shared: Shared, node: String, generation: u64) {
    let world = shared.borrow().world.clone();
    let me = shared.borrow().name.clone();
    let port = if node.starts_with("sentinel-") {
        SENTINEL_PORT
    } else {
        REDIS_PORT
    };
    let result = world
        .time
        .timeout(
            Duration::from_secs(5),
            NetConn::connect(&world, &me, &node, port),
        )
        .await;
    let mut state = shared.borrow_mut();
    let link = state.link(&node);
    if link.generation != generation {
        return;
    }
    link.connecting = false;
    let Ok(Ok(conn)) = result else {
        return;
    };
    let (reader, writer) = conn.split();
    link.writer = Some(writer);
    link.pending.clear();
    // The PING queued at the attempt (`reconnect`) goes out now that the link is up.
    state.send_words(&node, &["PING"], Callback::Ping);
    drop(state);
    madsim::task::spawn_local(read_replies(shared, node, generation, reader));
}

async fn read_replies(shared: Shared, node: String, generation: u64, mut reader: NetReader) {
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        while let Ok(Some((reply, used))) = Reply::decode(&buf) {
            let _ = buf.split_to(used);
            let mut state = shared.borrow_mut();
            let link = state.link(&node);
            if link.generation != generation {
                return;
            }
            let callback = link.pending.pop_front().unwrap_or(Callback::Discard);
            state.on_reply(&node, callback, reply);
        }
        let read = reader.read_buf(&mut buf).await;
        if !matches!(read, Ok(n) if n > 0) {
            let mut state = shared.borrow_mut();
            if state.link(&node).generation == generation {
                state.close_link(&node);
            }
            return;
        }
    }
}
