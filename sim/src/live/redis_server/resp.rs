//! A blocking RESP2 client for the real processes: one command on one connection, or a
//! connection kept for several (`Conn`), each read bounded by a timeout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use model::redis::Reply;

/// A connection to one real process.
pub struct Conn {
    stream: TcpStream,
    addr: SocketAddr,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(addr: SocketAddr, timeout: Duration) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|_| stream.set_write_timeout(Some(timeout)))
            .and_then(|_| stream.set_nodelay(true))
            .map_err(|e| format!("{addr}: {e}"))?;
        Ok(Conn {
            stream,
            addr,
            buf: Vec::new(),
        })
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&str]) -> Result<Reply, String> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend(format!("${}\r\n", arg.len()).into_bytes());
            request.extend(arg.as_bytes());
            request.extend(b"\r\n");
        }
        self.stream
            .write_all(&request)
            .map_err(|e| format!("{}: {}: {e}", self.addr, args[0]))?;
        loop {
            if let Some((reply, used)) =
                Reply::decode(&self.buf).map_err(|e| format!("{}: {e}", self.addr))?
            {
                self.buf.drain(..used);
                return Ok(reply);
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(format!("{}: connection closed", self.addr)),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("{}: {}: {e}", self.addr, args[0])),
            }
        }
    }
}

/// One command on a fresh connection.
pub fn call(addr: SocketAddr, args: &[&str], timeout: Duration) -> Result<Reply, String> {
    Conn::open(addr, timeout)?.call(args)
}
