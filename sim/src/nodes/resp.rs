//! A RESP client connection over the simulated network (`world::net::socket`): what Jedis or redis-py
//! does on one socket.

use model::marks::{Mark, mark};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use std::sync::Arc;

use bytes::BytesMut;
use model::redis::Reply;

use crate::world::World;
use crate::world::net::socket::NetConn;

pub struct RespConn {
    conn: NetConn,
    buf: BytesMut,
}

pub use model::redis::resp::{encode_command, encode_commands};

impl RespConn {
    /// Connects node `local` to node `peer` listening on `port`.
    pub async fn connect(
        world: &Arc<World>,
        local: &str,
        peer: &str,
        port: u16,
    ) -> io::Result<RespConn> {
        let conn = NetConn::connect(world, local, peer, port).await?;
        Ok(RespConn {
            conn,
            buf: BytesMut::with_capacity(512),
        })
    }

    /// This end's address, as the server's `accept` saw it.
    pub fn local_addr(&self) -> SocketAddr {
        self.conn.local_addr()
    }

    /// Sends one command as a RESP multibulk request.
    pub fn send(&mut self, argv: &[Vec<u8>]) -> io::Result<()> {
        self.conn.send(encode_command(argv))
    }

    /// Sends several commands in one write (a pipeline).
    pub fn send_pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> io::Result<()> {
        self.conn.send(encode_commands(commands))
    }

    /// Reads the next reply; EOF means the server closed the connection (or crashed).
    pub async fn read_reply(&mut self) -> io::Result<Reply> {
        loop {
            if let Some((reply, used)) = Reply::decode(&self.buf)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            {
                let _ = self.buf.split_to(used);
                return Ok(reply);
            }
            if self.conn.read_buf(&mut self.buf).await? == 0 {
                mark(Mark::ConnectionLost);
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed by peer",
                ));
            }
        }
    }

    /// Whether the server already closed this connection (an EOF or reset is waiting): what
    /// redis-py checks on a pooled connection before reusing it (`can_read`), reconnecting
    /// instead of failing the command on a connection that died while idle.
    /// Unsolicited data counts too: the connection is out of step with its requests.
    pub fn is_closed(&self) -> bool {
        !self.buf.is_empty() || self.conn.is_readable()
    }

    pub async fn call(&mut self, argv: &[Vec<u8>]) -> io::Result<Reply> {
        self.send(argv)?;
        self.read_reply().await
    }
}

/// Long enough for a reply that already reached a paused node to be read after it resumes
/// (madsim sleeps at least 1 ms).
const PAUSE_GRACE: Duration = Duration::from_millis(2);

/// Awaits `future` for at most `limit`, as a blocking socket read with a timeout does. If `node`
/// was paused meanwhile (a GC pause), a reply that arrived during the pause was already in the
/// socket buffer before the deadline, so it is still returned — Kleppmann's paused client does
/// go on to use it.
pub async fn with_timeout<T>(
    world: &World,
    node: &str,
    limit: Duration,
    future: impl Future<Output = T>,
) -> Option<T> {
    let resumes = world.procs.resumes(node);
    let mut future = pin!(future);
    match world.time.timeout(limit, &mut future).await {
        Ok(value) => Some(value),
        Err(_) if world.procs.resumes(node) != resumes => {
            world.time.timeout(PAUSE_GRACE, future).await.ok()
        }
        Err(_) => {
            mark(Mark::CommandTimedOut);
            None
        }
    }
}
