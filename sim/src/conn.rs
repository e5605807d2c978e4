//! A RESP client connection over madsim TCP: what Jedis or redis-py does on one socket.
//!
//! madsim's `TcpStream` sends nothing until `flush()`, so every request is written and flushed.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use bytes::BytesMut;
use madsim::net::TcpStream;
use model::redis::Reply;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::world::World;

pub struct RespConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl RespConn {
    pub async fn connect(addr: SocketAddr) -> io::Result<RespConn> {
        let stream = TcpStream::connect(addr).await?;
        Ok(RespConn {
            stream,
            buf: BytesMut::with_capacity(512),
        })
    }

    /// Sends one command as a RESP multibulk request.
    pub async fn send(&mut self, argv: &[Vec<u8>]) -> io::Result<()> {
        let request = Reply::Array(argv.iter().map(|a| Reply::Bulk(a.clone())).collect()).encode();
        self.stream.write_all(&request).await?;
        self.stream.flush().await
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
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed by peer",
                ));
            }
        }
    }

    pub async fn call(&mut self, argv: &[Vec<u8>]) -> io::Result<Reply> {
        self.send(argv).await?;
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
    let resumes = world.resumes(node);
    let mut future = pin!(future);
    match madsim::time::timeout(limit, &mut future).await {
        Ok(value) => Some(value),
        Err(_) if world.resumes(node) != resumes => {
            madsim::time::timeout(PAUSE_GRACE, future).await.ok()
        }
        Err(_) => None,
    }
}
