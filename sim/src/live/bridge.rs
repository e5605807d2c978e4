//! Bridges: real loopback ports into the simulated network.
//!
//! Each client gets its own port for each node (masters, replicas, Sentinels, the resource),
//! so the port a real connection arrives on tells which (client, node) link it is. An accepted
//! connection becomes a simulated TCP connection opened *from the simulated node `client-i`*
//! to the node's simulated address: the world's network faults (partition, one-way cuts,
//! isolation, delays, dropped connections) and the client node's pause and crash apply to that
//! link exactly as to a simulated client's.
//!
//! The real side (listeners and sockets) runs on a real tokio runtime started before the
//! simulation; it hands the simulation what it reads through the pacer's [`Inbox`] and gets
//! what to write through a tokio channel per connection. The simulated side is a relay task on
//! the client's node (`relay`); Sentinel replies are rewritten on the way out from simulated
//! addresses to the client's own real ports (`rewrite`), and the resource is translated from
//! `LOCKSIM.READ`/`LOCKSIM.WRITE` to the simulated resource's protocol (`live::resource`).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use bytes::BytesMut;
use model::history::{EventKind, render_command};
use model::redis::{Protocol, Reply, RequestParser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::Inbound;
use super::observe::register_tokens;
use super::pacer::Inbox;
use crate::nodes::resource::RESOURCE_PORT;
use crate::nodes::{REDIS_PORT, SENTINEL_PORT};
use crate::world::World;
use crate::world::net::socket::NetConn;

/// The real loopback address every bridge listens on.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Which real port each client reaches each node on.
#[derive(Clone, Debug, Default)]
pub struct Ports {
    /// client name → node name → port.
    pub by_client: BTreeMap<String, BTreeMap<String, u16>>,
}

impl Ports {
    pub fn port(&self, client: &str, node: &str) -> Option<u16> {
        self.by_client.get(client)?.get(node).copied()
    }

    /// `host:port` of each of `nodes` for `client`, in order.
    pub fn addresses(&self, client: &str, nodes: &[String]) -> Vec<String> {
        nodes
            .iter()
            .filter_map(|node| self.port(client, node))
            .map(|port| format!("{LOOPBACK}:{port}"))
            .collect()
    }
}

/// Binds a listener for every (client, node) pair (port 0: the kernel picks a free one, so
/// several live runs share a machine) and serves them on `runtime`.
pub fn listen(
    runtime: &tokio::runtime::Handle,
    clients: &[String],
    nodes: &[String],
    inbox: Arc<Inbox<Inbound>>,
) -> Result<Ports, String> {
    let mut ports = Ports::default();
    for client in clients {
        for node in nodes {
            let listener = std::net::TcpListener::bind((LOOPBACK, 0))
                .map_err(|e| format!("cannot listen on {LOOPBACK} for {client} → {node}: {e}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            listener
                .set_nonblocking(true)
                .map_err(|e| format!("{client} → {node}: {e}"))?;
            ports
                .by_client
                .entry(client.clone())
                .or_default()
                .insert(node.clone(), port);
            let (client, node, inbox) = (client.clone(), node.clone(), inbox.clone());
            let _guard = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| format!("{client} → {node}: {e}"))?;
            runtime.spawn(accept_loop(listener, client, node, inbox));
        }
    }
    Ok(ports)
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    client: String,
    node: String,
    inbox: Arc<Inbox<Inbound>>,
) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let conn = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (to_real, from_sim) = unbounded_channel();
        inbox.push(Inbound::Open {
            conn,
            client: client.clone(),
            node: node.clone(),
            to_real,
            adopt: None,
        });
        tokio::spawn(real_socket(stream, conn, from_sim, inbox.clone()));
    }
}

/// One real connection: what it reads goes to the simulation, what the simulation sends is
/// written; it closes when either side does.
pub(crate) async fn real_socket(
    mut stream: tokio::net::TcpStream,
    conn: u64,
    mut from_sim: UnboundedReceiver<Vec<u8>>,
    inbox: Arc<Inbox<Inbound>>,
) {
    let mut buf = BytesMut::with_capacity(4096);
    loop {
        tokio::select! {
            read = stream.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => inbox.push(Inbound::Data { conn, bytes: buf.split().to_vec() }),
            },
            out = from_sim.recv() => match out {
                Some(bytes) => {
                    if stream.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                None => return,
            },
        }
    }
    inbox.push(Inbound::Closed { conn });
}

/// The simulated port a node listens on.
pub fn node_port(node: &str) -> u16 {
    if node == "resource" {
        RESOURCE_PORT
    } else if node.starts_with("sentinel-") {
        SENTINEL_PORT
    } else {
        REDIS_PORT
    }
}

/// The simulated side of one bridged connection, run on the `client`'s node: a connection from
/// `client` to `node` in the simulated network, relaying bytes both ways (`pump`) through `tap`.
/// It ends (closing the real socket) when either side closes, or with the client node (a crash).
///
/// `client` is a client node (a client process's connection, `ClientTap`: the commands it sends
/// are recorded as `command_sent`, with `observe` they register the client's tokens
/// (`observe::register_tokens`), and Sentinel replies are rewritten to the client's ports) or a
/// server node (a real process's own connection to another, `redis_server::links::PeerTap`:
/// relayed as it is, the replication stream to a replica reported as `replicated`). `adopt`
/// names a real connection to `node`'s process that already exists (`links::Links::hand_over`):
/// the simulated connection goes to the node's adoption port and names it first.
pub async fn relay(
    world: Arc<World>,
    client: String,
    node: String,
    adopt: Option<u64>,
    from_real: UnboundedReceiver<Vec<u8>>,
    to_real: UnboundedSender<Vec<u8>>,
    mut tap: impl Tap,
) {
    let port = match adopt {
        Some(_) => ADOPTION_PORT,
        None => node_port(&node),
    };
    let Ok(conn) = NetConn::connect(&world, &client, &node, port).await else {
        return;
    };
    if let Some(id) = adopt
        && conn.send(id.to_le_bytes().to_vec()).is_err()
    {
        return;
    }
    pump(&world, conn, from_real, to_real, &mut tap).await;
}

/// The simulated port where a server node adopts real connections that existed before the
/// run (`redis_server::links`): each simulated connection to it starts with the 8-byte id
/// (little-endian) of the real connection it continues.
pub const ADOPTION_PORT: u16 = 16379;

/// What a relay learns from the bytes it carries, recorded once they are on their way.
pub enum Seen {
    /// An event of the trace (and the triggers it completes) on `node`.
    Event { node: String, kind: EventKind },
    /// `client`'s command left the lock key written on `node` (`World::lock_written`).
    LockWritten { node: String, client: String },
    /// The lock key on `node` is gone.
    LockGone { node: String },
}

impl Seen {
    async fn record(self, world: &World) {
        match self {
            Seen::Event { node, kind } => world.emit(&node, None, kind).await,
            Seen::LockWritten { node, client } => world.lock_written(&node, &client),
            Seen::LockGone { node } => world.lock_gone(&node),
        }
    }
}

/// What a relay does to the bytes it carries besides carrying them.
pub trait Tap {
    /// Bytes from the real side on their way into the simulated connection: what to send.
    fn toward_sim(&mut self, bytes: Vec<u8>) -> Vec<u8> {
        bytes
    }
    /// Bytes read from the simulated connection on their way to the real side: what to write
    /// now (what it leaves in `buf` waits for more); an error ends the connection.
    fn toward_real(&mut self, buf: &mut BytesMut) -> Result<Vec<u8>, String> {
        Ok(buf.split().to_vec())
    }
    /// What the bytes carried last showed, recorded after they went on.
    fn seen(&mut self) -> Vec<Seen> {
        Vec::new()
    }
}

/// Relays bytes between a simulated connection and a real one (the channels of its socket on
/// the real side, `real_socket`) through `tap`, until either side closes.
pub async fn pump(
    world: &World,
    conn: NetConn,
    mut from_real: UnboundedReceiver<Vec<u8>>,
    to_real: UnboundedSender<Vec<u8>>,
    tap: &mut impl Tap,
) {
    let (mut reader, writer) = conn.split();
    let mut buf = BytesMut::with_capacity(4096);
    loop {
        tokio::select! {
            bytes = from_real.recv() => match bytes {
                Some(bytes) => {
                    let bytes = tap.toward_sim(bytes);
                    if !bytes.is_empty() && writer.send(bytes).is_err() {
                        return;
                    }
                }
                None => return,
            },
            read = reader.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => match tap.toward_real(&mut buf) {
                    Ok(out) => {
                        if !out.is_empty() && to_real.send(out).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                },
            },
        }
        for seen in tap.seen() {
            seen.record(world).await;
        }
    }
}

/// A client process's connection to a Redis node or a Sentinel (see `relay`).
pub struct ClientTap {
    world: Arc<World>,
    ports: Arc<Ports>,
    client: String,
    node: String,
    observe: bool,
    key: Vec<u8>,
    /// Its commands as they arrive; `None` once it sent something that is not RESP (the node
    /// answers that; nothing more to learn here).
    requests: Option<(RequestParser, BytesMut)>,
    seen: Vec<Seen>,
}

impl ClientTap {
    pub fn new(
        world: Arc<World>,
        ports: Arc<Ports>,
        client: String,
        node: String,
        observe: bool,
    ) -> ClientTap {
        let key = world.scheme.key().into_bytes();
        ClientTap {
            world,
            ports,
            client,
            node,
            observe,
            key,
            requests: Some((RequestParser::new(), BytesMut::new())),
            seen: Vec::new(),
        }
    }

    fn sentinel(&self) -> bool {
        self.node.starts_with("sentinel-")
    }
}

impl Tap for ClientTap {
    /// Each command is `command_sent` once its bytes are on their way, as the simulated
    /// client records it after writing it (`nodes::client::env`).
    fn toward_sim(&mut self, bytes: Vec<u8>) -> Vec<u8> {
        let register = self.observe && !self.sentinel();
        if let Some((parser, pending)) = self.requests.as_mut() {
            pending.extend_from_slice(&bytes);
            loop {
                match parser.parse(pending) {
                    Ok(Some(argv)) => {
                        if register {
                            register_tokens(&self.world, &self.client, &self.key, &argv);
                        }
                        self.seen.push(Seen::Event {
                            node: self.client.clone(),
                            kind: EventKind::CommandSent {
                                server: self.node.clone(),
                                command: render_command(&argv),
                            },
                        });
                    }
                    Ok(None) => break,
                    Err(_) => {
                        self.requests = None;
                        break;
                    }
                }
            }
        }
        bytes
    }

    fn toward_real(&mut self, buf: &mut BytesMut) -> Result<Vec<u8>, String> {
        if self.sentinel() {
            rewrite_replies(&self.world, &self.ports, &self.client, buf)
        } else {
            Ok(buf.split().to_vec())
        }
    }

    fn seen(&mut self) -> Vec<Seen> {
        std::mem::take(&mut self.seen)
    }
}

/// Rewrites the node addresses in the complete Sentinel replies in `buf` to `client`'s real
/// ports.
fn rewrite_replies(
    world: &World,
    ports: &Ports,
    client: &str,
    buf: &mut BytesMut,
) -> Result<Vec<u8>, String> {
    let real = |ip: &[u8], port: &[u8]| -> Option<(String, u16)> {
        let ip: IpAddr = std::str::from_utf8(ip).ok()?.parse().ok()?;
        let port: u16 = std::str::from_utf8(port).ok()?.parse().ok()?;
        let node = world.procs.name_of(ip);
        (node_port(&node) == port).then_some(())?;
        Some((LOOPBACK.to_string(), ports.port(client, &node)?))
    };
    reencode(buf, &real)
}

/// Decodes the complete replies in `buf` (RESP3 or RESP2: a client that sent `HELLO 3` gets
/// maps), rewrites the addresses in them, and encodes them again in the protocol they came in.
fn reencode(buf: &mut BytesMut, real: &RealAddr<'_>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some((mut reply, used)) = Reply::decode_resp3(buf)? {
        let _ = buf.split_to(used);
        rewrite(&mut reply, real);
        let protocol = if uses_resp3(&reply) {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        reply.encode_with(protocol, &mut out);
    }
    Ok(out)
}

fn uses_resp3(reply: &Reply) -> bool {
    match reply {
        Reply::Map(_)
        | Reply::Set(_)
        | Reply::Push(_)
        | Reply::Double(_)
        | Reply::Bool(_)
        | Reply::BigNumber(_)
        | Reply::Verbatim { .. } => true,
        Reply::Array(items) | Reply::Sequence(items) => items.iter().any(uses_resp3),
        _ => false,
    }
}

type RealAddr<'a> = dyn Fn(&[u8], &[u8]) -> Option<(String, u16)> + 'a;

/// Rewrites every simulated node address in a Sentinel reply: `[ip, port]` pairs
/// (`get-master-addr-by-name`), `ip`/`port` fields of flat key-value arrays (`SENTINEL
/// replicas`, `sentinels`, `master`), and `ip port` inside text (`+switch-master <name> <old ip>
/// <old port> <new ip> <new port>`, `+sdown`, and the other event messages).
pub fn rewrite(reply: &mut Reply, real: &RealAddr<'_>) {
    match reply {
        Reply::Bulk(text) => {
            if let Some(rewritten) = rewrite_text(text, real) {
                *text = rewritten;
            }
        }
        Reply::Array(items) | Reply::Push(items) | Reply::Set(items) | Reply::Sequence(items) => {
            rewrite_fields(items, real);
            if items.len() == 2
                && let (Some(ip), Some(port)) = (bytes_of(&items[0]), bytes_of(&items[1]))
                && let Some((host, port)) = real(&ip, &port)
            {
                items[0] = Reply::Bulk(host.into_bytes());
                items[1] = Reply::Bulk(port.to_string().into_bytes());
                return;
            }
            for item in items {
                rewrite(item, real);
            }
        }
        Reply::Map(pairs) => {
            let ip = pairs.iter().position(|(k, _)| k.as_bulk() == Some(b"ip"));
            let port = pairs.iter().position(|(k, _)| k.as_bulk() == Some(b"port"));
            if let (Some(i), Some(p)) = (ip, port)
                && let (Some(ip), Some(port)) = (bytes_of(&pairs[i].1), bytes_of(&pairs[p].1))
                && let Some((host, port)) = real(&ip, &port)
            {
                pairs[i].1 = Reply::Bulk(host.into_bytes());
                pairs[p].1 = Reply::Bulk(port.to_string().into_bytes());
            }
            for (_, value) in pairs {
                rewrite(value, real);
            }
        }
        _ => {}
    }
}

/// `ip` and `port` fields of a flat key-value array.
fn rewrite_fields(items: &mut [Reply], real: &RealAddr<'_>) {
    let field = |name: &[u8]| {
        (0..items.len().saturating_sub(1))
            .step_by(2)
            .find(|&i| items[i].as_bulk() == Some(name))
    };
    if let (Some(i), Some(p)) = (field(b"ip"), field(b"port"))
        && let (Some(ip), Some(port)) = (bytes_of(&items[i + 1]), bytes_of(&items[p + 1]))
        && let Some((host, port)) = real(&ip, &port)
    {
        items[i + 1] = Reply::Bulk(host.into_bytes());
        items[p + 1] = Reply::Bulk(port.to_string().into_bytes());
    }
}

fn bytes_of(reply: &Reply) -> Option<Vec<u8>> {
    match reply {
        Reply::Bulk(b) => Some(b.clone()),
        Reply::Status(s) => Some(s.as_bytes().to_vec()),
        Reply::Integer(n) => Some(n.to_string().into_bytes()),
        _ => None,
    }
}

/// `… <ip> <port> …` in a text: each pair that is a node's address becomes the real one.
fn rewrite_text(text: &[u8], real: &RealAddr<'_>) -> Option<Vec<u8>> {
    let words: Vec<&[u8]> = text.split(|&b| b == b' ').collect();
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(words.len());
    let mut changed = false;
    let mut i = 0;
    while i < words.len() {
        if i + 1 < words.len()
            && let Some((host, port)) = real(words[i], words[i + 1])
        {
            out.push(host.into_bytes());
            out.push(port.to_string().into_bytes());
            changed = true;
            i += 2;
            continue;
        }
        out.push(words[i].to_vec());
        i += 1;
    }
    changed.then(|| out.join(&b' '))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real(ip: &[u8], port: &[u8]) -> Option<(String, u16)> {
        match (ip, port) {
            (b"10.1.0.1", b"6379") => Some(("127.0.0.1".into(), 40001)),
            (b"10.4.1.1", b"6379") => Some(("127.0.0.1".into(), 40002)),
            _ => None,
        }
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn get_master_addr_by_name_gives_the_clients_own_port() {
        let mut reply = Reply::Array(vec![bulk("10.4.1.1"), bulk("6379")]);
        rewrite(&mut reply, &real);
        assert_eq!(reply, Reply::Array(vec![bulk("127.0.0.1"), bulk("40002")]));
    }

    #[test]
    fn switch_master_messages_are_rewritten_inside_the_text() {
        let mut reply = Reply::Array(vec![
            bulk("message"),
            bulk("+switch-master"),
            bulk("redis-1 10.1.0.1 6379 10.4.1.1 6379"),
        ]);
        rewrite(&mut reply, &real);
        assert_eq!(
            reply,
            Reply::Array(vec![
                bulk("message"),
                bulk("+switch-master"),
                bulk("redis-1 127.0.0.1 40001 127.0.0.1 40002"),
            ])
        );
    }

    #[test]
    fn flat_fields_and_unknown_addresses() {
        let mut reply = Reply::Array(vec![Reply::Array(vec![
            bulk("name"),
            bulk("10.4.1.1:6379"),
            bulk("ip"),
            bulk("10.4.1.1"),
            bulk("port"),
            bulk("6379"),
        ])]);
        rewrite(&mut reply, &real);
        let Reply::Array(outer) = &reply else {
            panic!()
        };
        let Reply::Array(fields) = &outer[0] else {
            panic!()
        };
        assert_eq!(fields[3], bulk("127.0.0.1"));
        assert_eq!(fields[5], bulk("40002"));
        let mut other = Reply::Array(vec![bulk("10.9.9.9"), bulk("6379")]);
        rewrite(&mut other, &real);
        assert_eq!(other, Reply::Array(vec![bulk("10.9.9.9"), bulk("6379")]));
    }

    /// What redis-py 8.1 gets from a Sentinel after `HELLO 3`: maps (`%`), rewritten and sent
    /// on in RESP3; a RESP2 reply stays RESP2, RESP2's `$-1` null included.
    #[test]
    fn resp3_maps_are_decoded_rewritten_and_sent_back_as_resp3() {
        let masters = Reply::Array(vec![Reply::Map(vec![
            (bulk("name"), bulk("redis-1")),
            (bulk("ip"), bulk("10.1.0.1")),
            (bulk("port"), bulk("6379")),
        ])]);
        let mut buf = BytesMut::from(&masters.encode_for(Protocol::Resp3)[..]);
        buf.extend_from_slice(b"$-1\r\n");
        let out = reencode(&mut buf, &real).unwrap();
        assert!(buf.is_empty());
        assert!(out.starts_with(b"*1\r\n%3\r\n"), "{out:?}");
        assert!(out.ends_with(b"$-1\r\n"), "{out:?}");
        let Ok(Some((Reply::Array(items), _))) = Reply::decode_resp3(&out) else {
            panic!("{out:?}")
        };
        let Reply::Map(pairs) = &items[0] else {
            panic!("{items:?}")
        };
        let field = |name: &str| pairs.iter().find(|(k, _)| *k == bulk(name)).map(|(_, v)| v);
        assert_eq!(field("name"), Some(&bulk("redis-1")));
        assert_eq!(field("ip"), Some(&bulk("127.0.0.1")));
        assert_eq!(field("port"), Some(&bulk("40001")));
    }
}
