//! A RESP client connection over the simulated network (`world::net::socket`): what Jedis or redis-py
//! does on one socket.

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

/// A command as a RESP multibulk request.
pub fn encode_command(argv: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command_into(&mut out, argv);
    out
}

/// Several commands, one after the other (a pipeline, a replication stream).
pub fn encode_commands(commands: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    for argv in commands {
        encode_command_into(&mut out, argv);
    }
    out
}

/// Appends `*<argc>\r\n` and `$<len>\r\n<arg>\r\n` per argument: written straight into the
/// buffer, without a `Reply` copy of every argument (every command of a run goes through here).
fn encode_command_into(out: &mut Vec<u8>, argv: &[Vec<u8>]) {
    let mut number = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(number.format(argv.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in argv {
        out.push(b'$');
        out.extend_from_slice(number.format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

impl RespConn {
    /// Connects node `local` to node `peer` listening at `addr`.
    pub async fn connect(
        world: &Arc<World>,
        local: &str,
        peer: &str,
        addr: SocketAddr,
    ) -> io::Result<RespConn> {
        let conn = NetConn::connect(world, local, peer, addr).await?;
        Ok(RespConn {
            conn,
            buf: BytesMut::with_capacity(512),
        })
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
    pub fn is_closed(&mut self) -> bool {
        use std::task::{Context, Poll, Waker};
        if !self.buf.is_empty() {
            return true;
        }
        let mut read = std::pin::pin!(self.conn.read_buf(&mut self.buf));
        match read.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Pending => false,
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => true,
            // Unsolicited data: the connection is out of step with its requests.
            Poll::Ready(Ok(_)) => true,
        }
    }

    pub async fn call(&mut self, argv: &[Vec<u8>]) -> io::Result<Reply> {
        self.send(argv)?;
        self.read_reply().await
    }
}

/// Long enough for a reply that already reached a paused node to be read after it resumes
/// (madsim sleeps at least 1 ms, including the socket's own delivery wait).
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
    match madsim::time::timeout(limit, &mut future).await {
        Ok(value) => Some(value),
        Err(_) if world.procs.resumes(node) != resumes => {
            madsim::time::timeout(PAUSE_GRACE, future).await.ok()
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_encode_as_an_array_of_bulk_strings() {
        let commands = vec![
            vec![
                b"SET".to_vec(),
                b"lock".to_vec(),
                vec![0, b'\r', b'\n', 255],
            ],
            vec![],
            vec![Vec::new(), b"x".repeat(1000)],
        ];
        let mut expected = Vec::new();
        for argv in &commands {
            let reply = Reply::Array(argv.iter().map(|a| Reply::Bulk(a.clone())).collect());
            assert_eq!(encode_command(argv), reply.encode());
            expected.extend(reply.encode());
        }
        assert_eq!(encode_commands(&commands), expected);
    }
}
