//! A Redis reply and its RESP2 encoding.
//!
//! Encoding and decoding go through `redis-protocol` so the bytes on the wire are RESP2 as
//! `redis-server` 7.0 writes them (see `networking.c`: `addReply*`).

use redis_protocol::resp2::types::{OwnedFrame, Resp2Frame};

/// One reply, as a Redis server sends it to a RESP2 client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`: a status line.
    Status(String),
    /// `-ERR ...`: the full error text without the leading `-`, e.g. `ERR syntax error`.
    Error(String),
    /// `:1`
    Integer(i64),
    /// `$3 foo`
    Bulk(Vec<u8>),
    /// `$-1`: the null bulk string.
    Nil,
    /// `*-1`: the null array (LPOP/RPOP with a count on a missing key, `t_list.c`).
    NilArray,
    /// `*2 ...`
    Array(Vec<Reply>),
    /// Several top-level replies sent back to back for one command (SUBSCRIBE to N channels).
    Sequence(Vec<Reply>),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Status("OK".to_string())
    }

    pub fn error(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    pub fn bulk(bytes: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(bytes.as_ref().to_vec())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// The bulk payload, if this is a bulk string.
    pub fn as_bulk(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_integer(&self) -> Option<i64> {
        match self {
            Reply::Integer(i) => Some(*i),
            _ => None,
        }
    }

    fn to_frames(&self, out: &mut Vec<OwnedFrame>) {
        match self {
            Reply::Sequence(replies) => replies.iter().for_each(|r| r.to_frames(out)),
            other => out.push(other.to_frame()),
        }
    }

    fn to_frame(&self) -> OwnedFrame {
        match self {
            Reply::Status(s) => OwnedFrame::SimpleString(s.as_bytes().to_vec()),
            Reply::Error(e) => OwnedFrame::Error(e.clone()),
            Reply::Integer(i) => OwnedFrame::Integer(*i),
            Reply::Bulk(b) => OwnedFrame::BulkString(b.clone()),
            // redis-protocol's RESP2 `Null` is `$-1`; a nested null array never occurs.
            Reply::Nil | Reply::NilArray => OwnedFrame::Null,
            Reply::Array(items) => OwnedFrame::Array(items.iter().map(Reply::to_frame).collect()),
            Reply::Sequence(_) => unreachable!("a sequence is flattened by to_frames"),
        }
    }

    /// Appends the RESP2 bytes of this reply to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut frames = Vec::new();
        self.to_frames(&mut frames);
        for frame in &frames {
            if matches!(self, Reply::NilArray) {
                out.extend_from_slice(b"*-1\r\n");
                continue;
            }
            let start = out.len();
            out.resize(start + frame.encode_len(false), 0);
            let written = redis_protocol::resp2::encode::encode(&mut out[start..], frame, false)
                .expect("buffer sized by encode_len");
            out.truncate(start + written);
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Decodes one reply from the front of `buf`: `Ok(None)` when more bytes are needed,
    /// otherwise the reply and how many bytes it took.
    pub fn decode(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
        match redis_protocol::resp2::decode::decode(buf) {
            Ok(Some((frame, used))) => Ok(Some((Reply::from_frame(frame), used))),
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn from_frame(frame: OwnedFrame) -> Reply {
        match frame {
            OwnedFrame::SimpleString(s) => Reply::Status(String::from_utf8_lossy(&s).into_owned()),
            OwnedFrame::Error(e) => Reply::Error(e),
            OwnedFrame::Integer(i) => Reply::Integer(i),
            OwnedFrame::BulkString(b) => Reply::Bulk(b),
            OwnedFrame::Array(items) => {
                Reply::Array(items.into_iter().map(Reply::from_frame).collect())
            }
            OwnedFrame::Null => Reply::Nil,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_redis() {
        assert_eq!(Reply::ok().encode(), b"+OK\r\n");
        assert_eq!(
            Reply::error("ERR syntax error").encode(),
            b"-ERR syntax error\r\n"
        );
        assert_eq!(Reply::Integer(-3).encode(), b":-3\r\n");
        assert_eq!(Reply::bulk("ab").encode(), b"$2\r\nab\r\n");
        assert_eq!(Reply::Nil.encode(), b"$-1\r\n");
        assert_eq!(Reply::NilArray.encode(), b"*-1\r\n");
        assert_eq!(
            Reply::Array(vec![Reply::Integer(1), Reply::Nil]).encode(),
            b"*2\r\n:1\r\n$-1\r\n"
        );
    }

    #[test]
    fn decodes_what_it_encodes() {
        let reply = Reply::Array(vec![Reply::bulk("x"), Reply::Integer(7), Reply::ok()]);
        let bytes = reply.encode();
        assert_eq!(Reply::decode(&bytes).unwrap(), Some((reply, bytes.len())));
        assert_eq!(Reply::decode(b"$5\r\nab").unwrap(), None);
    }
}
