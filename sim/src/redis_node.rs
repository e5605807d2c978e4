//! A Redis node: the model's `RedisServer` behind a madsim TCP listener (the madsim-etcd-client
//! pattern: a pure state machine wrapped by a thin simulated server).
//!
//! Expiry follows this node's own wall clock, as real Redis's `mstime()` does; active expiry
//! runs every 100 ms (hz 10). Every executed command is recorded, so a command that runs after
//! its client gave up is visible in the trace, and every change of the lock key's owner too.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use madsim::net::{TcpListener, TcpStream};
use madsim::time::sleep;
use model::history::{EventKind, render_command, render_reply};
use model::redis::keyspace::Value;
use model::redis::{ClientId, Outcome, RedisServer, Reply, RequestParser, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedSender;

use crate::REDIS_PORT;
use crate::world::{World, stream_seed};

/// Redis's `hz 10`: the active expire cycle runs ten times a second.
const ACTIVE_EXPIRE_PERIOD: Duration = Duration::from_millis(100);

struct Node {
    world: Arc<World>,
    name: String,
    server: RefCell<RedisServer>,
    lock_key: Vec<u8>,
    /// The lock key's owner as last observed (for `key_owner` events).
    owner: RefCell<Option<String>>,
    /// Where each connection's outgoing bytes go.
    outboxes: RefCell<BTreeMap<ClientId, UnboundedSender<Vec<u8>>>>,
}

pub async fn redis_node(world: Arc<World>, name: String) {
    // `ServerConfig` gains fields as the model grows (replication, persistence).
    #[allow(clippy::needless_update)]
    let config = ServerConfig {
        seed: stream_seed(world.seed, &name),
        ..Default::default()
    };
    let node = Rc::new(Node {
        lock_key: world.scheme.key().into_bytes(),
        server: RefCell::new(RedisServer::new(config)),
        owner: RefCell::new(None),
        outboxes: RefCell::default(),
        world,
        name,
    });
    let listener = TcpListener::bind(("0.0.0.0", REDIS_PORT))
        .await
        .expect("the Redis port is free");
    madsim::task::spawn_local(active_expiry(node.clone()));
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let client = node.world.name_of(peer.ip());
        madsim::task::spawn_local(serve_connection(node.clone(), stream, client));
    }
}

async fn active_expiry(node: Rc<Node>) {
    loop {
        sleep(ACTIVE_EXPIRE_PERIOD).await;
        let now_ms = node.world.wall_ms(&node.name);
        node.server.borrow_mut().active_expire_cycle(now_ms);
        node.observe_owner("expiry", now_ms);
    }
}

/// One client connection: a reader that parses and executes requests in order, and a writer
/// fed through a channel so that pub/sub messages from other connections interleave correctly.
async fn serve_connection(node: Rc<Node>, stream: TcpStream, client: String) {
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (out, mut outbox) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let id = node.server.borrow_mut().connect();
    node.outboxes.borrow_mut().insert(id, out.clone());
    madsim::task::spawn_local(async move {
        while let Some(bytes) = outbox.recv().await {
            if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
    });
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(512);
    'connection: loop {
        match reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut replies = Vec::new();
        loop {
            match parser.parse(&mut buf) {
                Ok(Some(argv)) => {
                    node.execute(id, &client, &argv)
                        .await
                        .encode_into(&mut replies);
                    node.deliver_pushes();
                }
                Ok(None) => break,
                Err(error) => {
                    // networking.c: reply with the protocol error, then close the connection.
                    Reply::error(format!("ERR {error}")).encode_into(&mut replies);
                    let _ = out.send(replies);
                    break 'connection;
                }
            }
        }
        if out.send(replies).is_err() {
            break;
        }
    }
    node.outboxes.borrow_mut().remove(&id);
    node.server.borrow_mut().disconnect(id);
}

impl Node {
    async fn execute(&self, id: ClientId, client: &str, argv: &[Vec<u8>]) -> Reply {
        let now_ms = self.world.wall_ms(&self.name);
        // A lease that ran out before this command is the clock's doing, not this client's.
        self.observe_owner("expiry", now_ms);
        let outcome = self.server.borrow_mut().execute(id, now_ms, argv);
        let reply = match outcome {
            Outcome::Reply(reply) => reply,
            // No replicas yet: WAIT returns at once when it asks for none, else after its timeout
            // (forever for 0), acknowledging nobody — replication.c waitCommand.
            Outcome::Wait {
                numreplicas,
                timeout_ms,
            } => {
                if numreplicas > 0 {
                    if timeout_ms == 0 {
                        std::future::pending::<()>().await;
                    }
                    sleep(Duration::from_millis(timeout_ms as u64)).await;
                }
                Reply::Integer(0)
            }
        };
        self.world.record(
            &self.name,
            EventKind::Executed {
                client: client.into(),
                command: render_command(argv),
                reply: render_reply(&reply),
            },
        );
        self.observe_owner(client, now_ms);
        reply
    }

    /// Sends pub/sub messages produced by the last command to their subscribers.
    fn deliver_pushes(&self) {
        let pushes = self.server.borrow_mut().take_pushes();
        let outboxes = self.outboxes.borrow();
        for (client, reply) in pushes {
            if let Some(out) = outboxes.get(&client) {
                let _ = out.send(reply.encode());
            }
        }
    }

    /// Records a `key_owner` event when the lock key's owner changed, attributing it to `by`.
    fn observe_owner(&self, by: &str, now_ms: i64) {
        let owner = lock_tokens(&self.server.borrow(), &self.lock_key, now_ms)
            .iter()
            .find_map(|token| self.world.owner_of(token));
        let mut last = self.owner.borrow_mut();
        if *last != owner {
            let key = String::from_utf8_lossy(&self.lock_key).into_owned();
            self.world.record(
                &self.name,
                EventKind::KeyOwner {
                    key,
                    owner: owner.clone(),
                    by: by.into(),
                },
            );
            *last = owner;
        }
    }
}

/// The values that can identify the lock's owner, without touching the keyspace: a string's
/// value, or a hash's field names (Redisson stores `uuid:threadId → count`). A logically expired
/// key has none.
fn lock_tokens(server: &RedisServer, key: &[u8], now_ms: i64) -> Vec<Vec<u8>> {
    let Some(entry) = server.db().get(key) else {
        return Vec::new();
    };
    if entry.expire_at.is_some_and(|at| now_ms > at) {
        return Vec::new();
    }
    match &entry.value {
        Value::Str(value) => vec![value.clone()],
        Value::Hash(hash) => hash.iter().map(|(field, _)| field.clone()).collect(),
        _ => Vec::new(),
    }
}
