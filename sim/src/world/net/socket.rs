//! The connections processes hold: our layer over madsim TCP, for what madsim does not give
//! (DESIGN.md, "What madsim does not give you").
//!
//! - **Per-link extra latency** (`delay` fault): once a connection's direction is delayed, its
//!   outgoing bytes go through a writer queue that holds each chunk until `sent + extra_ms` of its
//!   directed link, preserving order (a chunk never overtakes an earlier one). Undelayed bytes are
//!   written at once (until a queue exists: from then on everything goes through it, in order).
//! - **Bytes in flight survive their sender**: the writer queues run on the `network` node, not on
//!   the sending process, so what a process sent before a pause still arrives, and a connection
//!   the process let go of (a client that gave up waiting) still delivers it before its EOF — a
//!   request can execute after its client gave up. A crash leaves what the process wrote to the
//!   kernel: its queues drain (the delay is the link's, not the process's), then the peer reads
//!   EOF, as after a killed process's FIN.
//! - **Dropped connections** (`drop_connections` fault): every connection is registered with the
//!   network (`world::net`); dropping a node's connections resets both ends at once (reads fail, queued bytes are
//!   discarded), as a TCP RST does. Clients reconnect.
//! - **A peer's machine losing power** (`power_loss` fault): the connection's other ends are
//!   silenced (`world::net::silence_peers`): their reads wait, ignoring bytes still in flight
//!   and the EOF madsim delivers when the dead process's sockets are dropped, and their writes
//!   vanish — until the machine is back and they are reset, or their own timeouts give up.
//! - **Unanswered SYNs**: madsim refuses a connect across a clogged link at once; a real SYN goes
//!   unanswered and is retried (Linux: after 1, 2, 4, ... s), so `connect` waits and retries while
//!   the link is cut. Callers bound it with their own timeouts.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use madsim::net::TcpStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::signal::Signal;
use crate::world::World;

/// One chunk for the writer queue: the true time (µs) before which it must not leave, and bytes.
type Chunk = (u64, Vec<u8>);

/// The write side of one connection: written directly until a delay needs a queue, then owned by
/// the queue task.
struct Out {
    direct: Option<WriteHalf<TcpStream>>,
    queue: Option<UnboundedSender<Chunk>>,
}

/// Writes and flushes at once: madsim's TCP accepts every write and flush immediately.
fn write_now(writer: &mut WriteHalf<TcpStream>, bytes: &[u8]) -> io::Result<()> {
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};
    use tokio::io::AsyncWrite;
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(&mut *writer).poll_write(&mut cx, bytes) {
        Poll::Ready(Ok(n)) if n == bytes.len() => {}
        Poll::Ready(Err(e)) => return Err(e),
        _ => return Err(io::Error::other("short write on a simulated socket")),
    }
    match Pin::new(&mut *writer).poll_flush(&mut cx) {
        Poll::Ready(result) => result,
        Poll::Pending => Err(io::Error::other("flush pending on a simulated socket")),
    }
}

/// Unregisters a connection when both its reader and its writer are gone.
struct Registration {
    world: Arc<World>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.world.net.unregister_conn(self.id);
    }
}

/// The sending side of a connection; cheap to clone (a server's pub/sub and replication feeds
/// write to a connection from other tasks).
#[derive(Clone)]
pub struct NetWriter {
    world: Arc<World>,
    local: Rc<str>,
    peer: Rc<str>,
    out: Rc<RefCell<Out>>,
    reset: Signal,
    silence: Signal,
    _registration: Rc<Registration>,
}

impl NetWriter {
    /// Queues bytes for the peer (the process's `write` + `flush`): they leave after the link's
    /// extra delay, in order. Fails once the connection was reset or the queue is gone.
    pub fn send(&self, bytes: Vec<u8>) -> io::Result<()> {
        if self.reset.is_set() {
            return Err(reset_error());
        }
        if self.silence.is_set() {
            return Ok(());
        }
        self.world.net.count_message();
        let extra_us = self.world.net.extra_delay_us(&self.local, &self.peer);
        let mut out = self.out.borrow_mut();
        if out.queue.is_none() {
            if extra_us == 0 {
                let writer = out.direct.as_mut().ok_or_else(reset_error)?;
                return write_now(writer, &bytes).map_err(|_| reset_error());
            }
            let writer = out.direct.take().ok_or_else(reset_error)?;
            let (tx, rx) = unbounded_channel();
            let queue = write_queue(self.world.clone(), rx, writer, self.reset.clone());
            self.world.net.spawn(queue);
            out.queue = Some(tx);
        }
        let release_us = self.world.time.now_us() + extra_us;
        let queue = out.queue.as_ref().expect("created above");
        queue.send((release_us, bytes)).map_err(|_| reset_error())
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Resets the connection (both ends), as closing the socket with RST does.
    pub fn reset(&self) {
        self.world.net.reset_conn(self._registration.id);
    }
}

/// A connection as a process holds it: its read half and a writer.
pub struct NetConn {
    reader: ReadHalf<TcpStream>,
    writer: NetWriter,
    reset: Signal,
    /// This end's address: what the peer's `accept` saw as its peer.
    local_addr: SocketAddr,
    silence: Signal,
}

fn reset_error() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "connection reset")
}

impl NetConn {
    /// Wraps an established stream between `local` and `peer` (node names).
    pub fn new(world: &Arc<World>, local: &str, peer: &str, stream: TcpStream) -> NetConn {
        let local_addr = stream
            .local_addr()
            .expect("a simulated stream knows its address");
        let (reader, writer) = tokio::io::split(stream);
        let reset = Signal::new();
        let silence = Signal::new();
        let id = world
            .net
            .register_conn(local, peer, reset.clone(), silence.clone());
        let registration = Rc::new(Registration {
            world: world.clone(),
            id,
        });
        NetConn {
            reader,
            writer: NetWriter {
                world: world.clone(),
                local: local.into(),
                peer: peer.into(),
                out: Rc::new(RefCell::new(Out {
                    direct: Some(writer),
                    queue: None,
                })),
                reset: reset.clone(),
                silence: silence.clone(),
                _registration: registration,
            },
            reset,
            local_addr,
            silence,
        }
    }

    /// This end's address (the client's port, which the server's `accept` reports).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Opens a connection from `local` to `peer` at `addr`, retrying like an unanswered SYN while
    /// a fault cuts the link; a peer that is not listening refuses at once.
    pub async fn connect(
        world: &Arc<World>,
        local: &str,
        peer: &str,
        addr: SocketAddr,
    ) -> io::Result<NetConn> {
        let mut backoff = Duration::from_secs(1);
        loop {
            let cut = world.net.is_clogged(local, peer) || world.net.is_clogged(peer, local);
            if !cut {
                match TcpStream::connect(addr).await {
                    Ok(stream) => return Ok(NetConn::new(world, local, peer, stream)),
                    Err(e) if !world.net.is_clogged(local, peer) => return Err(e),
                    Err(_) => {}
                }
            }
            madsim::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(60));
        }
    }

    pub fn writer(&self) -> NetWriter {
        self.writer.clone()
    }

    pub fn send(&self, bytes: Vec<u8>) -> io::Result<()> {
        self.writer.send(bytes)
    }

    /// Reads more bytes into `buf`; `Ok(0)` is EOF. A reset connection fails at once.
    pub async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        read_or_reset(&mut self.reader, &self.reset, &self.silence, buf).await
    }

    /// Splits into a reader (this connection without its writer handle) and the writer.
    pub fn split(self) -> (NetReader, NetWriter) {
        (
            NetReader {
                reader: self.reader,
                reset: self.reset,
                silence: self.silence,
            },
            self.writer,
        )
    }
}

/// The read half of a split connection.
pub struct NetReader {
    reader: ReadHalf<TcpStream>,
    reset: Signal,
    silence: Signal,
}

impl NetReader {
    pub async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        read_or_reset(&mut self.reader, &self.reset, &self.silence, buf).await
    }
}

/// Reads, failing once the connection is reset; a silenced end reads nothing until then.
async fn read_or_reset(
    reader: &mut ReadHalf<TcpStream>,
    reset: &Signal,
    silence: &Signal,
    buf: &mut BytesMut,
) -> io::Result<usize> {
    if reset.is_set() {
        return Err(reset_error());
    }
    if !silence.is_set() {
        tokio::select! {
            biased;
            _ = reset.wait_set() => return Err(reset_error()),
            _ = silence.wait_set() => {}
            read = reader.read_buf(buf) => return read,
        }
    }
    reset.wait_set().await;
    Err(reset_error())
}

/// The writer queue of one direction of one connection, run on the network node: holds each
/// chunk until its release time, then writes and flushes it. Ends (dropping the write half, so
/// the peer reads EOF once the read half is gone too) when every writer handle is gone and the
/// queue is drained, or at once when the connection is reset.
async fn write_queue(
    world: Arc<World>,
    mut rx: UnboundedReceiver<Chunk>,
    mut writer: WriteHalf<TcpStream>,
    reset: Signal,
) {
    let mut last_release_us = 0;
    loop {
        let next = tokio::select! {
            biased;
            _ = reset.wait_set() => return,
            next = rx.recv() => next,
        };
        let Some((release_us, bytes)) = next else {
            return;
        };
        let release_us = release_us.max(last_release_us);
        last_release_us = release_us;
        let now = world.time.now_us();
        if release_us > now {
            tokio::select! {
                biased;
                _ = reset.wait_set() => return,
                _ = madsim::time::sleep(Duration::from_micros(release_us - now)) => {}
            }
        }
        if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
            return;
        }
    }
}
