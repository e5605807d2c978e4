//! Server↔server links through the simulated network (`--backend redis-server`): every
//! connection one real process opens to another — a replica's replication link to its master,
//! a Sentinel's links to masters, replicas and the other Sentinels — goes through a real
//! loopback port that is bridged into the simulated world as a connection from the source
//! node to the destination node, exactly as a client's bridged connection is. So every
//! network fault of the scenario between two servers (partition, one-way cut, isolation,
//! `delay`, `drop_connections`) and `replica_lag_ms` (the runner's delay on each master →
//! replica link) apply to them.
//!
//! How: each node's process listens on a private port of its own address (`6380`, `26380`)
//! and announces the node's public address (`6379`, `26379` on the same address:
//! `replica-announce-ip/port`, `sentinel announce-ip/port`, `replicaof` and `sentinel monitor`
//! name it), where a listener here accepts. Every process binds its outgoing connections to its
//! own address (`bind-source-addr`), so the peer address of an accepted connection names the
//! source node. What Sentinels and replicas report (`INFO replication`, `SENTINEL replicas`,
//! `get-master-addr-by-name`) is therefore the public address, which is the node's simulated
//! identity for the clients' bridges (`bridge::rewrite`).
//!
//! The processes settle before the run (replication up, every Sentinel knowing the replicas
//! and the other Sentinels: `Cluster::wait_settled`), while the simulation does not exist yet:
//! until then each accepted connection is spliced directly to the destination's process. At
//! the run's start ([`Links::hand_over`]) each splice stops between two reads and its two real
//! sockets are handed to the simulation — no connection is closed, as none is at the
//! simulation's time 0: the source's side becomes a bridged connection from the source node
//! (`bridge::relay` with `adopt`), the destination's side is adopted by the destination node's
//! forwarder (`backend::server_node`, on `bridge::ADOPTION_PORT`). From then on every new
//! connection is bridged from its first byte.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use model::history::{EventKind, render_command};
use model::redis::RequestParser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Addresses;
use crate::live::Inbound;
use crate::live::bridge::{Seen, Tap, real_socket};
use crate::live::pacer::Inbox;
use crate::world::World;

/// How long the splices may take to stop and hand their sockets over.
const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(5);

/// The real side of an adopted connection's destination end: what its process sends (to the
/// simulation) and where to write what the simulation sends it.
pub type Adopted = (UnboundedReceiver<Vec<u8>>, UnboundedSender<Vec<u8>>);

/// One connection spliced before the run: its source node, destination node, and the task
/// that gives its two sockets back when told.
struct Splice {
    source: String,
    node: String,
    task: JoinHandle<Option<(TcpStream, TcpStream)>>,
}

/// The server↔server links of one live run.
pub struct Links {
    inbox: Arc<Inbox<Inbound>>,
    runtime: tokio::runtime::Handle,
    /// Before the hand-over: the splices made so far; `None` once the simulation has the links.
    splices: Mutex<Option<Vec<Splice>>>,
    stop_splices: watch::Sender<bool>,
    /// Destination ends waiting for their node's forwarder, by connection id.
    adoptions: Mutex<HashMap<u64, Adopted>>,
}

/// Connection ids of the links: their own range of the inbox's one space (bridges count from 1,
/// the forwarders from 2^62).
static NEXT: AtomicU64 = AtomicU64::new(1 << 61);

impl Links {
    /// Moves every node of `addresses` to a private port (its public address stays what it
    /// announces) and listens on each public address. The processes must not run yet.
    pub fn listen(
        addresses: &mut Addresses,
        inbox: Arc<Inbox<Inbound>>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Arc<Links>, String> {
        let (stop_splices, _) = watch::channel(false);
        let links = Arc::new(Links {
            inbox,
            runtime,
            splices: Mutex::new(Some(Vec::new())),
            stop_splices,
            adoptions: Mutex::default(),
        });
        let sources: BTreeMap<IpAddr, String> = addresses
            .listen
            .iter()
            .map(|(node, addr)| (addr.ip(), node.clone()))
            .collect();
        let sources = Arc::new(sources);
        // Every address is bound before any is served: a failure leaves nothing listening.
        let mut bound = Vec::new();
        for (node, addr) in &addresses.listen {
            let public = *addr;
            let private = SocketAddr::new(public.ip(), public.port() + 1);
            std::net::TcpListener::bind(private)
                .map_err(|e| format!("{node}: its process's port {private} is not free: {e}"))?;
            let listener = std::net::TcpListener::bind(public)
                .and_then(|l| l.set_nonblocking(true).map(|_| l))
                .map_err(|e| format!("{node}: cannot listen on {public}: {e}"))?;
            bound.push((node.clone(), public, private, listener));
        }
        let _guard = links.runtime.enter();
        for (node, public, private, listener) in bound {
            let listener =
                tokio::net::TcpListener::from_std(listener).map_err(|e| format!("{node}: {e}"))?;
            addresses.announce.insert(node.clone(), public);
            addresses.listen.insert(node.clone(), private);
            links.runtime.spawn(accept_loop(
                links.clone(),
                listener,
                node,
                private,
                sources.clone(),
            ));
        }
        Ok(links)
    }

    /// The run starts: every splice stops and its two sockets go to the simulation (see the
    /// module); connections accepted from now on are bridged.
    pub fn hand_over(&self) -> Result<(), String> {
        let splices = self
            .splices
            .lock()
            .expect("never poisoned")
            .take()
            .unwrap_or_default();
        let _ = self.stop_splices.send(true);
        let (done, handed) = std::sync::mpsc::channel();
        let inbox = self.inbox.clone();
        self.runtime.spawn(async move {
            let mut pairs = Vec::new();
            for splice in splices {
                if let Ok(Some((source_end, node_end))) = splice.task.await {
                    pairs.push((splice.source, splice.node, source_end, node_end));
                }
            }
            let mut adoptions = Vec::new();
            for (source, node, source_end, node_end) in pairs {
                let node_conn = NEXT.fetch_add(1, Ordering::Relaxed);
                let (to_sim, from_real) = unbounded_channel();
                inbox.push(Inbound::Dialed {
                    conn: node_conn,
                    to_sim,
                });
                let (to_node, from_sim) = unbounded_channel();
                tokio::spawn(real_socket(node_end, node_conn, from_sim, inbox.clone()));
                adoptions.push((node_conn, (from_real, to_node)));
                bridge_source(&inbox, source_end, source, node, Some(node_conn));
            }
            let _ = done.send(adoptions);
        });
        let adoptions = handed.recv_timeout(HAND_OVER_TIMEOUT).map_err(|_| {
            "the server↔server links were not handed to the simulation in time".to_string()
        })?;
        self.adoptions
            .lock()
            .expect("never poisoned")
            .extend(adoptions);
        Ok(())
    }

    /// The destination end of the adopted connection `id`, once.
    pub fn adopt(&self, id: u64) -> Option<Adopted> {
        self.adoptions.lock().expect("never poisoned").remove(&id)
    }
}

/// A connection from `source`'s process to `node`'s public address, bridged into the
/// simulation as a connection from the node `source` (its relay: `bridge::relay`).
fn bridge_source(
    inbox: &Arc<Inbox<Inbound>>,
    stream: TcpStream,
    source: String,
    node: String,
    adopt: Option<u64>,
) {
    let conn = NEXT.fetch_add(1, Ordering::Relaxed);
    let (to_real, from_sim) = unbounded_channel();
    inbox.push(Inbound::Open {
        conn,
        client: source,
        node,
        to_real,
        adopt,
    });
    tokio::spawn(real_socket(stream, conn, from_sim, inbox.clone()));
}

/// Accepts on `node`'s public address: a connection whose peer address is no node's is closed
/// (only the processes connect here); before the hand-over it is spliced to the process at
/// `private`, afterwards bridged.
async fn accept_loop(
    links: Arc<Links>,
    listener: tokio::net::TcpListener,
    node: String,
    private: SocketAddr,
    sources: Arc<BTreeMap<IpAddr, String>>,
) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Some(source) = sources.get(&peer.ip()).cloned() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut splices = links.splices.lock().expect("never poisoned");
        match splices.as_mut() {
            Some(splices) => {
                let stop = links.stop_splices.subscribe();
                let task = tokio::spawn(splice(stream, private, stop));
                splices.push(Splice {
                    source,
                    node: node.clone(),
                    task,
                });
            }
            None => bridge_source(&links.inbox, stream, source, node.clone(), None),
        }
    }
}

/// Before the run: `source_end` relayed to a new connection to the process at `private` until
/// either closes (`None`) or `stop` says the simulation takes over (the two sockets, between
/// two reads: no byte is held here).
async fn splice(
    mut source_end: TcpStream,
    private: SocketAddr,
    mut stop: watch::Receiver<bool>,
) -> Option<(TcpStream, TcpStream)> {
    let mut node_end = TcpStream::connect(private).await.ok()?;
    let _ = node_end.set_nodelay(true);
    let mut from_source = BytesMut::with_capacity(4096);
    let mut from_node = BytesMut::with_capacity(4096);
    loop {
        if *stop.borrow() {
            return Some((source_end, node_end));
        }
        tokio::select! {
            read = source_end.read_buf(&mut from_source) => match read {
                Ok(0) | Err(_) => return None,
                Ok(_) => node_end.write_all(&from_source.split()).await.ok()?,
            },
            read = node_end.read_buf(&mut from_node) => match read {
                Ok(0) | Err(_) => return None,
                Ok(_) => source_end.write_all(&from_node.split()).await.ok()?,
            },
            _ = stop.changed() => {}
        }
    }
}

/// A real process's connection to another, as its source node's relay carries it
/// (`bridge::relay`): on a replica's link to its master, each write of the master's
/// replication stream is reported as `replicated` on the replica once its bytes are on their
/// way to the replica's process (as the simulated replica records it when it applies the
/// write: `nodes::redis::replication::replica`), with the replica's offset after it when the
/// link began with a full resync (`+FULLRESYNC <id> <offset>`), `-1` when it continued
/// (`+CONTINUE`, or a link that existed before the run) and the offset is not on the wire.
pub struct PeerTap {
    /// (replica, master) on a replication link; `None` on a Sentinel's links.
    link: Option<(String, String)>,
    stream: Stream,
    buf: BytesMut,
    parser: RequestParser,
    offset: Option<i64>,
    seen: Vec<Seen>,
}

/// Where the master's side of a replication link is (`replication.c`: the handshake's
/// replies, the RDB payload of a full resync — `$<len>` or diskless `$EOF:<40-byte mark>`,
/// preceded by `\n` keep-alives — then the command stream).
#[derive(Debug, PartialEq)]
enum Stream {
    Handshake,
    Rdb,
    RdbBytes(usize),
    RdbEof(Vec<u8>),
    Commands,
    /// Not a replication link, or something this does not follow.
    Off,
}

/// Commands of the stream that are no writes (the simulated replica records none for them).
const NOT_WRITES: &[&[u8]] = &[b"ping", b"multi", b"exec", b"select", b"replconf"];

impl PeerTap {
    pub fn new(world: &World, source: &str, node: &str, adopted: bool) -> PeerTap {
        let redis = world.scenario.redis_names();
        let replication = redis.iter().any(|n| n == source) && redis.iter().any(|n| n == node);
        let stream = match (replication, adopted) {
            (false, _) => Stream::Off,
            (true, true) => Stream::Commands,
            (true, false) => Stream::Handshake,
        };
        PeerTap {
            link: replication.then(|| (source.to_string(), node.to_string())),
            stream,
            buf: BytesMut::new(),
            parser: RequestParser::new(),
            offset: None,
            seen: Vec::new(),
        }
    }

    fn line(&mut self) -> Option<BytesMut> {
        let end = self.buf.windows(2).position(|w| w == b"\r\n")?;
        let mut line = self.buf.split_to(end + 2);
        line.truncate(end);
        Some(line)
    }

    /// Follows the stream as far as `buf` goes.
    fn follow(&mut self) {
        loop {
            match &mut self.stream {
                Stream::Off => {
                    self.buf.clear();
                    return;
                }
                Stream::Handshake => {
                    let Some(line) = self.line() else { return };
                    if let Some(rest) = line.strip_prefix(b"+FULLRESYNC ") {
                        self.offset = std::str::from_utf8(rest)
                            .ok()
                            .and_then(|r| r.split(' ').nth(1)?.parse().ok());
                        self.stream = Stream::Rdb;
                    } else if line.starts_with(b"+CONTINUE") {
                        self.stream = Stream::Commands;
                    }
                }
                Stream::Rdb => {
                    while self.buf.first() == Some(&b'\n') {
                        let _ = self.buf.split_to(1);
                    }
                    let Some(line) = self.line() else { return };
                    self.stream = if let Some(mark) = line.strip_prefix(b"$EOF:") {
                        Stream::RdbEof(mark.to_vec())
                    } else {
                        match std::str::from_utf8(&line[1..])
                            .ok()
                            .and_then(|n| n.parse().ok())
                        {
                            Some(len) if line.starts_with(b"$") => Stream::RdbBytes(len),
                            _ => Stream::Off,
                        }
                    };
                }
                Stream::RdbBytes(left) => {
                    let take = (*left).min(self.buf.len());
                    let _ = self.buf.split_to(take);
                    *left -= take;
                    if *left > 0 {
                        return;
                    }
                    self.stream = Stream::Commands;
                }
                Stream::RdbEof(mark) => {
                    let mark = mark.clone();
                    match self
                        .buf
                        .windows(mark.len())
                        .position(|w| w == mark.as_slice())
                    {
                        Some(at) => {
                            let _ = self.buf.split_to(at + mark.len());
                            self.stream = Stream::Commands;
                        }
                        None => {
                            let keep = mark.len().saturating_sub(1).min(self.buf.len());
                            let _ = self.buf.split_to(self.buf.len() - keep);
                            return;
                        }
                    }
                }
                Stream::Commands => {
                    let before = self.buf.len();
                    let parsed = self.parser.parse(&mut self.buf);
                    if let Some(offset) = self.offset.as_mut() {
                        *offset += (before - self.buf.len()) as i64;
                    }
                    match parsed {
                        Ok(Some(argv)) => self.applied(&argv),
                        Ok(None) => return,
                        Err(_) => self.stream = Stream::Off,
                    }
                }
            }
        }
    }

    fn applied(&mut self, argv: &[Vec<u8>]) {
        let name = argv[0].to_ascii_lowercase();
        if NOT_WRITES.contains(&name.as_slice()) {
            return;
        }
        let Some((replica, master)) = &self.link else {
            return;
        };
        self.seen.push(Seen::Event {
            node: replica.clone(),
            kind: EventKind::Replicated {
                master: master.clone(),
                command: render_command(argv),
                offset: self.offset.unwrap_or(-1),
            },
        });
    }
}

impl Tap for PeerTap {
    fn toward_real(&mut self, buf: &mut BytesMut) -> Result<Vec<u8>, String> {
        let bytes = buf.split();
        if self.stream != Stream::Off {
            self.buf.extend_from_slice(&bytes);
            self.follow();
        }
        Ok(bytes.to_vec())
    }

    fn seen(&mut self) -> Vec<Seen> {
        std::mem::take(&mut self.seen)
    }
}
