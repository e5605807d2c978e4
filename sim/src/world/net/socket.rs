//! The connections processes hold: TCP over the simulated network. Ours, not madsim's
//! `TcpStream` (DESIGN.md, "What madsim does not give you"), so that a message costs the one task
//! poll of the process that reads it: madsim's stream hands each message to the reader's task
//! through a channel and then a sleep until it arrives, two polls (and a tokio `split` lock
//! around both), and every poll draws from madsim's one random generator (issue 32).
//!
//! - **How bytes travel**: each direction of a connection is a `Pipe`. A send takes the link's
//!   latency (drawn from the scenario's `network.latency_ms`) plus its `delay` faults' extra,
//!   never overtakes an earlier send, and sets one timer for its arrival (`Time::wake_at`); the
//!   timer moves the bytes into the receiver's buffer and wakes the reader, with no task between.
//!   A paused process's kernel still receives: the bytes wait in its buffer.
//! - **Bytes in flight survive their sender**: a process that crashed, or let a connection go
//!   (a client that gave up waiting), has its bytes delivered still, then its FIN — a request
//!   can execute after its client gave up, as after a killed process's kernel sends what it was
//!   given and then FIN. FIN and RST are segments like data: they take the link's latency and
//!   wait out a cut link, so a peer across a partition learns of a close once it heals.
//! - **Cut links** (`partition`, `isolate`): bytes sent across a cut link are held and
//!   retransmitted, the oldest first, after 1, 2, 4, ... ms (at most 10 s apart) until the link
//!   is open again; what was sent after them waits behind them. (The schedule madsim's stream
//!   used, madsim 0.2.34 `sim/net/mod.rs` `NetSim::channel`.) A connection is not answered
//!   across a cut link: a real SYN goes unanswered and is retried (Linux: after 1, 2, 4, ... s),
//!   so `connect` waits and retries while the link is cut. Callers bound it with their timeouts.
//! - **Dropped connections** (`drop_connections` fault): every connection is registered with the
//!   network (`world::net`); dropping a node's connections resets both ends at once (reads and
//!   sends fail, bytes in flight are discarded). Clients reconnect.
//! - **Closed ends**: a process reads EOF after its peer's FIN; after an RST (a peer's
//!   `NetWriter::reset`) its reads and sends fail. Bytes that reach an end its process closed
//!   are discarded; their sender learns of the close from the FIN.
//! - **A machine losing power** (`power_loss` fault): its connections are silenced
//!   (`world::net::silence_peers`): what it sent and is still in flight is lost, no FIN follows
//!   (its process's sockets close with nothing sent), and what its peers send to it vanishes;
//!   bytes that had already arrived at a peer stay readable. Once the machine is back its
//!   kernel answers the old connections with RST (`reset_silenced`): the peers' reads and sends
//!   fail. Until then only their own timeouts end their waits.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::BytesMut;
use madsim::time::Instant;

use crate::world::World;
use crate::world::procs::node_ip;

/// What travels on one direction of a connection.
enum Segment {
    Data(Vec<u8>),
    Fin,
    Rst,
}

/// One direction of one connection: from the sending end's kernel to the receiving end's.
pub(crate) struct Pipe {
    from: Arc<str>,
    to: Arc<str>,
    state: Mutex<PipeState>,
}

#[derive(Default)]
struct PipeState {
    /// Segments on their way, in order, each with the instant it arrives, or `None` while a cut
    /// link holds it (the retransmitter gives it one). Every segment with an instant has one
    /// timer, madsim fires timers in the order of their instants and instants never decrease
    /// along a pipe, so each timer delivers the first segment.
    in_flight: VecDeque<(Option<Instant>, Segment)>,
    /// The arrival of the last segment sent: the next one never arrives before it.
    last_arrival: Option<Instant>,
    /// A retransmitter holds segments for a cut link: later ones wait behind them.
    retransmitting: bool,
    /// The sending end sent its last segment (FIN or RST).
    sender_closed: bool,
    /// Arrived bytes the receiving process has not read yet.
    arrived: BytesMut,
    /// The FIN arrived: once `arrived` is read, reads see EOF.
    fin: bool,
    /// The receiving end is reset (an RST arrived, it reset the connection itself, or a fault
    /// dropped it): its reads and sends fail; what arrives is discarded.
    reset: bool,
    /// The receiving end closed: what arrives is discarded.
    receiver_closed: bool,
    /// A machine at either end lost power (`silence`): what is in flight and whatever is sent
    /// from now on is lost; nothing more arrives.
    silenced: bool,
    /// The task waiting to read.
    reader: Option<Waker>,
}

fn reset_error() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "connection reset")
}

impl Pipe {
    fn new(from: &str, to: &str) -> Arc<Pipe> {
        Arc::new(Pipe {
            from: from.into(),
            to: to.into(),
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().expect("never poisoned")
    }

    /// Whether `node` is at either end.
    pub(crate) fn touches(&self, node: &str) -> bool {
        &*self.from == node || &*self.to == node
    }

    /// Sends a segment: it arrives after the link's transit time, behind every earlier one, or
    /// waits for a retransmission while the link is cut.
    fn transmit(self: &Arc<Self>, world: &Arc<World>, segment: Segment) {
        let transit = world.net.transit(&self.from, &self.to);
        let mut state = self.lock();
        if state.silenced {
            return;
        }
        match transit {
            Some(transit) if !state.retransmitting => {
                let mut arrival = world.time.now_instant() + transit;
                if let Some(last) = state.last_arrival {
                    arrival = arrival.max(last);
                }
                state.last_arrival = Some(arrival);
                state.in_flight.push_back((Some(arrival), segment));
                drop(state);
                world.time.wake_at(arrival, &Waker::from(self.clone()));
            }
            _ => {
                state.in_flight.push_back((None, segment));
                if !state.retransmitting {
                    state.retransmitting = true;
                    drop(state);
                    world.net.spawn(retransmit(world.clone(), self.clone()));
                }
            }
        }
    }

    /// The first segment's timer fired: it arrives.
    fn deliver_first(&self) {
        let reader = {
            let mut state = self.lock();
            let Some((arrival, segment)) = state.in_flight.pop_front() else {
                return;
            };
            debug_assert!(
                arrival.is_some(),
                "only a segment with an arrival has a timer"
            );
            if state.reset || state.receiver_closed || state.silenced {
                return;
            }
            match segment {
                Segment::Data(bytes) => state.arrived.extend_from_slice(&bytes),
                Segment::Fin => state.fin = true,
                Segment::Rst => {
                    state.reset = true;
                    state.arrived.clear();
                }
            }
            state.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }

    /// Reads what arrived into `buf`; `Ok(0)` is EOF.
    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        let mut state = self.lock();
        if state.reset {
            return Poll::Ready(Err(reset_error()));
        }
        if !state.arrived.is_empty() {
            let n = state.arrived.len();
            if buf.is_empty() {
                std::mem::swap(buf, &mut state.arrived);
            } else {
                buf.extend_from_slice(&state.arrived);
            }
            state.arrived.clear();
            return Poll::Ready(Ok(n));
        }
        if state.fin {
            return Poll::Ready(Ok(0));
        }
        if !state
            .reader
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            state.reader = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Whether a read would return at once (EOF, a reset, or bytes nobody asked for).
    fn readable(&self) -> bool {
        let state = self.lock();
        state.reset || state.fin || !state.arrived.is_empty()
    }

    /// Whether the receiving end is reset.
    fn is_reset(&self) -> bool {
        self.lock().reset
    }

    /// The sending end's last segment (FIN after its bytes, or RST); nothing after it.
    fn close_sender(self: &Arc<Self>, world: &Arc<World>, last: Segment) {
        {
            let mut state = self.lock();
            if state.sender_closed {
                return;
            }
            state.sender_closed = true;
        }
        self.transmit(world, last);
    }

    /// The receiving end closed: what is unread or still arrives is discarded.
    fn close_receiver(&self) {
        let mut state = self.lock();
        state.receiver_closed = true;
        state.arrived.clear();
        state.reader = None;
    }

    /// The receiving end is reset: its reads fail from now on, what is unread or still arrives
    /// is discarded. (Segments in flight keep their timers, which find nothing to deliver.)
    pub(crate) fn reset_receiver(&self) {
        let reader = {
            let mut state = self.lock();
            state.reset = true;
            state.arrived.clear();
            state.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }

    /// Takes the segments a cut link held, once it is open again.
    fn take_held(&self) -> Vec<Segment> {
        let mut state = self.lock();
        state.retransmitting = false;
        let first_held = state
            .in_flight
            .iter()
            .position(|(arrival, _)| arrival.is_none())
            .unwrap_or(state.in_flight.len());
        state
            .in_flight
            .drain(first_held..)
            .map(|(_, segment)| segment)
            .collect()
    }

    fn is_dead(&self) -> bool {
        let state = self.lock();
        state.reset || state.receiver_closed || state.silenced
    }

    /// A machine at either end lost power: segments in flight are lost (their timers, and a
    /// retransmitter, find nothing to deliver) and so is everything sent from now on. What
    /// already arrived stays readable.
    pub(crate) fn silence(&self) {
        self.lock().silenced = true;
    }

    pub(crate) fn is_silenced(&self) -> bool {
        self.lock().silenced
    }

    /// The node that sends on this pipe.
    pub(crate) fn sender(&self) -> &str {
        &self.from
    }
}

/// A pipe is the waker of its own arrival timers (`Time::wake_at`).
impl Wake for Pipe {
    fn wake(self: Arc<Self>) {
        self.deliver_first();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.deliver_first();
    }
}

/// Retransmits what a cut link held, on the network node: the oldest segment is tried after 1,
/// 2, 4, ... ms (at most 10 s apart) until the link is open; then everything held is sent again.
async fn retransmit(world: Arc<World>, pipe: Arc<Pipe>) {
    let mut backoff = Duration::from_millis(1);
    loop {
        madsim::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(10));
        if pipe.is_dead() {
            return;
        }
        if !world.net.is_clogged(&pipe.from, &pipe.to) {
            break;
        }
    }
    for segment in pipe.take_held() {
        pipe.transmit(&world, segment);
    }
}

/// One end of a connection, as the process holding it sees it: it closes (FIN to the peer,
/// nothing more read) when the process drops its last handle — or when its process dies. Its
/// own state (reset or not) is the receiving side of its incoming pipe.
struct End {
    world: Arc<World>,
    id: u64,
    incoming: Arc<Pipe>,
    outgoing: Arc<Pipe>,
    /// The peer's name, for `NetWriter::peer`.
    peer: Rc<str>,
    /// This end's address and the peer's.
    addrs: (SocketAddr, SocketAddr),
}

impl End {
    fn send(&self, bytes: Vec<u8>) -> io::Result<()> {
        if self.incoming.is_reset() {
            return Err(reset_error());
        }
        self.world.net.count_message();
        self.outgoing.transmit(&self.world, Segment::Data(bytes));
        Ok(())
    }

    /// Resets the connection from this end: it fails at once, the peer when the RST arrives.
    fn reset(&self) {
        self.incoming.reset_receiver();
        self.outgoing.close_sender(&self.world, Segment::Rst);
    }
}

impl Drop for End {
    fn drop(&mut self) {
        if !self.incoming.is_reset() {
            self.outgoing.close_sender(&self.world, Segment::Fin);
        }
        self.incoming.close_receiver();
        self.world.net.end_closed(self.id);
    }
}

/// The sending side of a connection; cheap to clone (a server's pub/sub and replication feeds
/// write to a connection from other tasks).
#[derive(Clone)]
pub struct NetWriter {
    end: Rc<End>,
}

impl NetWriter {
    /// Sends bytes to the peer (the process's `write` + `flush`): they arrive after the link's
    /// latency, in order. Fails once the connection is reset.
    pub fn send(&self, bytes: Vec<u8>) -> io::Result<()> {
        self.end.send(bytes)
    }

    pub fn peer(&self) -> &str {
        &self.end.peer
    }

    /// Resets the connection, as closing the socket with RST does: this end fails at once, the
    /// peer once the RST reaches it.
    pub fn reset(&self) {
        self.end.reset();
    }
}

/// A connection as a process holds it.
pub struct NetConn {
    end: Rc<End>,
}

impl NetConn {
    /// Opens a connection from `local` to `peer`'s `port`: a round trip (SYN, SYN-ACK; `delay`
    /// faults slow bytes, not this), then the peer's listener has it. While a fault cuts the
    /// link the SYN goes unanswered and is sent again after 1, 2, 4, ... s; a peer that is not
    /// listening refuses (RST).
    pub async fn connect(
        world: &Arc<World>,
        local: &str,
        peer: &str,
        port: u16,
    ) -> io::Result<NetConn> {
        let mut backoff = Duration::from_secs(1);
        loop {
            if let (Some(there), Some(back)) = (
                world.net.handshake(local, peer),
                world.net.handshake(peer, local),
            ) {
                madsim::time::sleep(there + back).await;
                let cut = world.net.is_clogged(local, peer) || world.net.is_clogged(peer, local);
                if !cut {
                    let Some(backlog) = world.net.listener(peer, port) else {
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionRefused,
                            "connection refused",
                        ));
                    };
                    return Ok(backlog.connect(world, local, peer, port));
                }
            }
            madsim::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(60));
        }
    }

    fn from_end(world: &Arc<World>, accepted: Accepted) -> NetConn {
        NetConn {
            end: Rc::new(End {
                world: world.clone(),
                id: accepted.id,
                peer: accepted.outgoing.to.as_ref().into(),
                addrs: accepted.addrs,
                incoming: accepted.incoming,
                outgoing: accepted.outgoing,
            }),
        }
    }

    /// This end's address (a client's ephemeral port, which the server's `accept` reports).
    pub fn local_addr(&self) -> SocketAddr {
        self.end.addrs.0
    }

    /// The peer's address, as `accept` reports it.
    pub fn peer_addr(&self) -> SocketAddr {
        self.end.addrs.1
    }

    pub fn writer(&self) -> NetWriter {
        NetWriter {
            end: self.end.clone(),
        }
    }

    pub fn send(&self, bytes: Vec<u8>) -> io::Result<()> {
        self.end.send(bytes)
    }

    /// Reads more bytes into `buf`; `Ok(0)` is EOF. A reset connection fails at once.
    pub async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        poll_fn(|cx| self.end.incoming.poll_read(cx, buf)).await
    }

    /// Whether a read would return at once: the peer closed or reset the connection, or sent
    /// bytes nobody asked for. Registers no waker.
    pub fn is_readable(&self) -> bool {
        self.end.incoming.readable()
    }

    /// Splits into a reader (this connection without its writer handle) and the writer.
    pub fn split(self) -> (NetReader, NetWriter) {
        let writer = self.writer();
        (NetReader { end: self.end }, writer)
    }
}

/// The read half of a split connection.
pub struct NetReader {
    end: Rc<End>,
}

impl NetReader {
    pub async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        poll_fn(|cx| self.end.incoming.poll_read(cx, buf)).await
    }
}

/// One end of a connection the kernels completed: the accepting end waits in its listener's
/// backlog as one.
struct Accepted {
    id: u64,
    peer: String,
    /// This end's address and the peer's.
    addrs: (SocketAddr, SocketAddr),
    incoming: Arc<Pipe>,
    outgoing: Arc<Pipe>,
}

/// The ephemeral port of the connection `id` on its connecting node, in Linux's default
/// `ip_local_port_range` (32768-60999): the range is walked in connection order, so two
/// connections of a node share a port only 28,232 connections of the run apart.
fn ephemeral_port(id: u64) -> u16 {
    const FIRST: u64 = 32768;
    const COUNT: u64 = 60999 - 32768 + 1;
    (FIRST + (id - 1) % COUNT) as u16
}

/// A listening socket's accept queue.
#[derive(Default)]
pub(crate) struct Backlog {
    state: Mutex<BacklogState>,
}

#[derive(Default)]
struct BacklogState {
    pending: VecDeque<Accepted>,
    acceptor: Option<Waker>,
}

impl Backlog {
    fn lock(&self) -> MutexGuard<'_, BacklogState> {
        self.state.lock().expect("never poisoned")
    }

    /// `local` connects to the listener's node `peer`: queues the accepting end, returns the
    /// connecting one.
    fn connect(&self, world: &Arc<World>, local: &str, peer: &str, port: u16) -> NetConn {
        let outgoing = Pipe::new(local, peer);
        let incoming = Pipe::new(peer, local);
        let id = world
            .net
            .register_conn([outgoing.clone(), incoming.clone()]);
        let local_addr = SocketAddr::new(node_ip(local), ephemeral_port(id));
        let listener_addr = SocketAddr::new(node_ip(peer), port);
        let acceptor = {
            let mut state = self.lock();
            state.pending.push_back(Accepted {
                id,
                peer: local.to_string(),
                addrs: (listener_addr, local_addr),
                incoming: outgoing.clone(),
                outgoing: incoming.clone(),
            });
            state.acceptor.take()
        };
        if let Some(acceptor) = acceptor {
            acceptor.wake();
        }
        let connecting = Accepted {
            id,
            peer: peer.to_string(),
            addrs: (local_addr, listener_addr),
            incoming,
            outgoing,
        };
        NetConn::from_end(world, connecting)
    }
}

/// A process's listening socket on one port of its node.
pub struct NetListener {
    world: Arc<World>,
    node: String,
    port: u16,
    backlog: Arc<Backlog>,
}

impl NetListener {
    /// Listens on `node`'s `port` (taking it over from a process of the node that is gone).
    pub fn bind(world: &Arc<World>, node: &str, port: u16) -> NetListener {
        let backlog = Arc::new(Backlog::default());
        world.net.listen(node, port, backlog.clone());
        NetListener {
            world: world.clone(),
            node: node.to_string(),
            port,
            backlog,
        }
    }

    /// The next connection, and the name of the node that opened it.
    pub async fn accept(&self) -> (NetConn, String) {
        let accepted = poll_fn(|cx| {
            let mut state = self.backlog.lock();
            match state.pending.pop_front() {
                Some(accepted) => Poll::Ready(accepted),
                None => {
                    state.acceptor = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        let peer = accepted.peer.clone();
        (NetConn::from_end(&self.world, accepted), peer)
    }
}

impl Drop for NetListener {
    /// The socket closes with its process: connections not yet accepted are reset (RST).
    fn drop(&mut self) {
        self.world
            .net
            .unlisten(&self.node, self.port, &self.backlog);
        let pending = std::mem::take(&mut self.backlog.lock().pending);
        for accepted in pending {
            accepted.incoming.close_receiver();
            accepted.outgoing.close_sender(&self.world, Segment::Rst);
            self.world.net.end_closed(accepted.id);
        }
    }
}
