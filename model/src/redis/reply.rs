//! A Redis reply and its encoding in RESP2 and RESP3.
//!
//! A reply is built once, by type (`addReplyMapLen`, `addReplyDouble`, `addReplyNull`, ...), and
//! encoded for the protocol of the client that receives it, as `networking.c` does: a map is a
//! flat array in RESP2, a double a bulk string, a boolean an integer, a push message an array.
//! The encoder writes the bytes directly (no intermediate frames): RESP3 doubles must be `%.17g`
//! and RESP2 has a null array, neither of which `redis-protocol`'s encoders write. Decoding (for
//! clients and tests) goes through `redis-protocol`.

use std::fmt;

use redis_protocol::resp2::types::OwnedFrame;
use redis_protocol::resp3::types::OwnedFrame as Frame3;

use super::number::fmt_g17;

/// The protocol a client speaks (`c->resp`): RESP2 until `HELLO 3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    /// The number `HELLO` and `CLIENT INFO` print.
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One reply, by type; `encode_into` writes it for one protocol.
#[derive(Clone, PartialEq)]
pub enum Reply {
    /// `+OK`: a status line.
    Status(String),
    /// `-ERR ...`: the full error text without the leading `-`, e.g. `ERR syntax error`. Bytes:
    /// Redis echoes arguments into errors as they are.
    Error(Vec<u8>),
    /// `:1`
    Integer(i64),
    /// `$3 foo`
    Bulk(Vec<u8>),
    /// `addReplyNull`: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// `addReplyNullArray`: `*-1` in RESP2 (LPOP with a count on a missing key, EXEC aborted by
    /// WATCH, BLPOP timed out), `_` in RESP3.
    NilArray,
    /// `*2 ...`
    Array(Vec<Reply>),
    /// `addReplyMapLen`: `%n` in RESP3, an array of 2n in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// `addReplySetLen`: `~n` in RESP3, an array in RESP2.
    Set(Vec<Reply>),
    /// `addReplyDouble`: `,1.5` in RESP3, a bulk string in RESP2 (`%.17g`, `inf`, `-inf`).
    Double(f64),
    /// `addReplyBool`: `#t` / `#f` in RESP3, `:1` / `:0` in RESP2.
    Bool(bool),
    /// `addReplyBigNum`: `(123` in RESP3, a bulk string in RESP2.
    BigNumber(Vec<u8>),
    /// `addReplyVerbatim`: `=n txt:...` in RESP3, a bulk string in RESP2 (INFO, CLIENT LIST).
    Verbatim { format: [u8; 3], text: Vec<u8> },
    /// `addReplyPushLen`: an out-of-band message (pub/sub), `>n` in RESP3, an array in RESP2.
    Push(Vec<Reply>),
    /// Several top-level replies sent back to back for one command (SUBSCRIBE to N channels).
    Sequence(Vec<Reply>),
}

/// As `derive(Debug)`, except that an error prints as text, as it did when it was a `String`:
/// schemes put `{reply:?}` in their event details, which are part of the trace.
impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Status(s) => f.debug_tuple("Status").field(s).finish(),
            Reply::Error(e) => f
                .debug_tuple("Error")
                .field(&String::from_utf8_lossy(e))
                .finish(),
            Reply::Integer(n) => f.debug_tuple("Integer").field(n).finish(),
            Reply::Bulk(b) => f.debug_tuple("Bulk").field(b).finish(),
            Reply::Nil => f.write_str("Nil"),
            Reply::NilArray => f.write_str("NilArray"),
            Reply::Array(items) => f.debug_tuple("Array").field(items).finish(),
            Reply::Map(pairs) => f.debug_tuple("Map").field(pairs).finish(),
            Reply::Set(items) => f.debug_tuple("Set").field(items).finish(),
            Reply::Double(x) => f.debug_tuple("Double").field(x).finish(),
            Reply::Bool(b) => f.debug_tuple("Bool").field(b).finish(),
            Reply::BigNumber(n) => f.debug_tuple("BigNumber").field(n).finish(),
            Reply::Verbatim { format, text } => f
                .debug_struct("Verbatim")
                .field("format", format)
                .field("text", text)
                .finish(),
            Reply::Push(items) => f.debug_tuple("Push").field(items).finish(),
            Reply::Sequence(items) => f.debug_tuple("Sequence").field(items).finish(),
        }
    }
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Status("OK".to_string())
    }

    pub fn error(text: impl Into<Vec<u8>>) -> Reply {
        Reply::Error(text.into())
    }

    pub fn bulk(bytes: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(bytes.as_ref().to_vec())
    }

    /// A verbatim `txt` string (`addReplyVerbatim(c, s, len, "txt")`).
    pub fn text(text: impl Into<Vec<u8>>) -> Reply {
        Reply::Verbatim {
            format: *b"txt",
            text: text.into(),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// The error text, if this is an error (lossy for display).
    pub fn error_text(&self) -> Option<String> {
        match self {
            Reply::Error(e) => Some(String::from_utf8_lossy(e).into_owned()),
            _ => None,
        }
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

    /// Appends the RESP2 bytes of this reply to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        self.encode_with(Protocol::Resp2, out);
    }

    /// Appends the bytes of this reply in `protocol` to `out`.
    pub fn encode_with(&self, protocol: Protocol, out: &mut Vec<u8>) {
        let resp3 = protocol == Protocol::Resp3;
        match self {
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => line(out, b'-', e),
            Reply::Integer(i) => prefixed(out, b':', *i),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => aggregate(out, b'*', items, protocol),
            Reply::Set(items) => aggregate(out, if resp3 { b'~' } else { b'*' }, items, protocol),
            Reply::Push(items) => aggregate(out, if resp3 { b'>' } else { b'*' }, items, protocol),
            Reply::Map(pairs) => {
                if resp3 {
                    prefixed(out, b'%', pairs.len() as i64);
                } else {
                    prefixed(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode_with(protocol, out);
                    v.encode_with(protocol, out);
                }
            }
            Reply::Double(d) => {
                let text = fmt_g17(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Reply::Bool(b) if resp3 => {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" })
            }
            Reply::Bool(b) => prefixed(out, b':', i64::from(*b)),
            Reply::BigNumber(n) if resp3 => line(out, b'(', n),
            Reply::BigNumber(n) => bulk(out, n),
            Reply::Verbatim { format, text } if resp3 => {
                prefixed(out, b'=', text.len() as i64 + 4);
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Verbatim { text, .. } => bulk(out, text),
            Reply::Sequence(replies) => replies.iter().for_each(|r| r.encode_with(protocol, out)),
        }
    }

    /// The RESP2 bytes of this reply.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// The bytes of this reply in `protocol`.
    pub fn encode_for(&self, protocol: Protocol) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_with(protocol, &mut out);
        out
    }

    /// Decodes one RESP2 reply from the front of `buf`: `Ok(None)` when more bytes are needed,
    /// otherwise the reply and how many bytes it took.
    pub fn decode(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
        if let Some(decoded) = decode_simple(buf) {
            return Ok(Some(decoded));
        }
        match redis_protocol::resp2::decode::decode(buf) {
            Ok(Some((frame, used))) => Ok(Some((Reply::from_frame(frame), used))),
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Decodes one RESP3 reply from the front of `buf`; RESP2 replies too (its decoder does not
    /// take RESP2's `$-1` and `*-1` nulls).
    pub fn decode_resp3(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
        match redis_protocol::resp3::decode::complete::decode(buf) {
            Ok(Some((frame, used))) => Ok(Some((Reply::from_frame3(frame), used))),
            Ok(None) => Ok(None),
            Err(e) => Reply::decode(buf).map_err(|_| e.to_string()),
        }
    }

    fn from_frame(frame: OwnedFrame) -> Reply {
        match frame {
            OwnedFrame::SimpleString(s) => Reply::Status(String::from_utf8_lossy(&s).into_owned()),
            OwnedFrame::Error(e) => Reply::Error(e.into_bytes()),
            OwnedFrame::Integer(i) => Reply::Integer(i),
            OwnedFrame::BulkString(b) => Reply::Bulk(b),
            OwnedFrame::Array(items) => {
                Reply::Array(items.into_iter().map(Reply::from_frame).collect())
            }
            OwnedFrame::Null => Reply::Nil,
        }
    }

    fn from_frame3(frame: Frame3) -> Reply {
        match frame {
            Frame3::BlobString { data, .. } => Reply::Bulk(data),
            Frame3::BlobError { data, .. } => Reply::Error(data),
            Frame3::SimpleString { data, .. } => {
                Reply::Status(String::from_utf8_lossy(&data).into_owned())
            }
            Frame3::SimpleError { data, .. } => Reply::Error(data.into_bytes()),
            Frame3::Boolean { data, .. } => Reply::Bool(data),
            Frame3::Null => Reply::Nil,
            Frame3::Number { data, .. } => Reply::Integer(data),
            Frame3::Double { data, .. } => Reply::Double(data),
            Frame3::BigNumber { data, .. } => Reply::BigNumber(data),
            Frame3::VerbatimString { data, .. } => Reply::text(data),
            Frame3::Array { data, .. } => {
                Reply::Array(data.into_iter().map(Reply::from_frame3).collect())
            }
            Frame3::Map { data, .. } => Reply::Map(
                data.into_iter()
                    .map(|(k, v)| (Reply::from_frame3(k), Reply::from_frame3(v)))
                    .collect(),
            ),
            Frame3::Set { data, .. } => {
                Reply::Set(data.into_iter().map(Reply::from_frame3).collect())
            }
            Frame3::Push { data, .. } => {
                Reply::Push(data.into_iter().map(Reply::from_frame3).collect())
            }
            other => Reply::Error(format!("unexpected frame {other:?}").into_bytes()),
        }
    }
}

/// The replies a simulated client gets nearly always (`+OK`, `:1`, `$-1`, a bulk string),
/// decoded as `redis_protocol` decodes them without its parser combinators (its `decode` was a
/// third of a client's reading, issue 32); `None` for anything else, which [`Reply::decode`]
/// leaves to it: arrays, a frame not all here yet, a number `str::parse` might read otherwise
/// than plain digits, an error line that is not UTF-8. As `redis_protocol` 6 `resp2/decode.rs`:
/// a line ends at the first CRLF, and a bulk string's data is followed by two bytes, whatever
/// they are.
fn decode_simple(buf: &[u8]) -> Option<(Reply, usize)> {
    let (&kind, rest) = buf.split_first()?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    let line = &rest[..end];
    let used = 1 + end + 2;
    match kind {
        b'+' => Some((
            Reply::Status(String::from_utf8_lossy(line).into_owned()),
            used,
        )),
        b'-' => std::str::from_utf8(line)
            .is_ok()
            .then(|| (Reply::Error(line.to_vec()), used)),
        b':' => Some((Reply::Integer(plain_i64(line)?), used)),
        b'$' if line == b"-1" => Some((Reply::Nil, used)),
        b'$' => {
            let len = usize::try_from(plain_i64(line)?).ok()?;
            let data = buf.get(used..used.checked_add(len)?)?;
            buf.get(used + len..used + len + 2)?;
            Some((Reply::Bulk(data.to_vec()), used + len + 2))
        }
        _ => None,
    }
}

/// An optional `-` and 1 to 18 ASCII digits, which `str::parse::<i64>` reads the same.
fn plain_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits
        .iter()
        .fold(0i64, |value, digit| value * 10 + i64::from(digit - b'0'));
    Some(if negative { -value } else { value })
}

/// `<prefix><bytes>\r\n`
fn line(out: &mut Vec<u8>, prefix: u8, bytes: &[u8]) {
    out.push(prefix);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// `addReplyLongLongWithPrefix`: `<prefix><n>\r\n`.
pub(super) fn prefixed(out: &mut Vec<u8>, prefix: u8, n: i64) {
    out.push(prefix);
    let mut digits = [0u8; 20];
    let mut v = n.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

/// `$<len>\r\n<bytes>\r\n`
pub(super) fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    prefixed(out, b'$', bytes.len() as i64);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

fn aggregate(out: &mut Vec<u8>, prefix: u8, items: &[Reply], protocol: Protocol) {
    prefixed(out, prefix, items.len() as i64);
    for item in items {
        item.encode_with(protocol, out);
    }
}

#[cfg(test)]
mod tests {
    /// The shortcut decodes what `redis_protocol` decodes, to the byte: every prefix of the
    /// usual replies, and the unusual ones it must leave alone or read the same.
    #[test]
    fn simple_replies_decode_as_redis_protocol_does() {
        use super::Reply;
        let frames: &[&[u8]] = &[
            b"+OK\r\n",
            b"+\r\n",
            b"+a\rb\n\r\n",
            b"+caf\xc3\xa9 \xff\r\n",
            b"-ERR wrong\r\n",
            b"-ERR \xff\r\n",
            b":0\r\n",
            b":-0\r\n",
            b":007\r\n",
            b":1\r\n",
            b":-42\r\n",
            b":+5\r\n",
            b": 5\r\n",
            b":\r\n",
            b":-\r\n",
            b":999999999999999999\r\n",
            b":9223372036854775807\r\n",
            b":9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
            b":1x\r\n",
            b"$-1\r\n",
            b"$-2\r\n",
            b"$0\r\n\r\n",
            b"$3\r\nabc\r\n",
            b"$3\r\nabcXY",
            b"$3\r\na\r\n\r\n",
            b"$+3\r\nabc\r\n",
            b"$03\r\nabc\r\n",
            b"$99999999999999999\r\nabc\r\n",
            b"*2\r\n$1\r\na\r\n:1\r\n",
            b"*-1\r\n",
            b"?\r\n",
            b"",
        ];
        for frame in frames {
            for end in 0..=frame.len() {
                let mut buf = frame[..end].to_vec();
                for tail in [&b""[..], b"+OK\r\n", b"\r\n"] {
                    buf.truncate(end);
                    buf.extend_from_slice(tail);
                    let theirs = match redis_protocol::resp2::decode::decode(&buf) {
                        Ok(Some((frame, used))) => Ok(Some((Reply::from_frame(frame), used))),
                        Ok(None) => Ok(None),
                        Err(e) => Err(e.to_string()),
                    };
                    assert_eq!(Reply::decode(&buf), theirs, "{buf:?}");
                }
            }
        }
    }

    use super::*;

    #[test]
    fn debug_prints_errors_as_text_and_the_rest_as_derived() {
        let reply = Reply::Array(vec![
            Reply::error("NOREPLICAS Not enough good replicas"),
            Reply::bulk("v"),
            Reply::Nil,
        ]);
        assert_eq!(
            format!("{reply:?}"),
            r#"Array([Error("NOREPLICAS Not enough good replicas"), Bulk([118]), Nil])"#
        );
    }

    #[test]
    fn encodes_like_redis() {
        assert_eq!(Reply::ok().encode(), b"+OK\r\n");
        assert_eq!(
            Reply::error("ERR syntax error").encode(),
            b"-ERR syntax error\r\n"
        );
        assert_eq!(Reply::Integer(-3).encode(), b":-3\r\n");
        assert_eq!(
            Reply::Integer(i64::MIN).encode(),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(Reply::bulk("ab").encode(), b"$2\r\nab\r\n");
        assert_eq!(Reply::Nil.encode(), b"$-1\r\n");
        assert_eq!(Reply::NilArray.encode(), b"*-1\r\n");
        assert_eq!(
            Reply::Array(vec![Reply::Integer(1), Reply::Nil]).encode(),
            b"*2\r\n:1\r\n$-1\r\n"
        );
    }

    #[test]
    fn resp3_types_and_their_resp2_forms() {
        let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Double(1.5))]);
        assert_eq!(map.encode(), b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n");
        assert_eq!(
            map.encode_for(Protocol::Resp3),
            b"%1\r\n$1\r\na\r\n,1.5\r\n"
        );
        assert_eq!(Reply::Nil.encode_for(Protocol::Resp3), b"_\r\n");
        assert_eq!(Reply::NilArray.encode_for(Protocol::Resp3), b"_\r\n");
        assert_eq!(Reply::Bool(true).encode(), b":1\r\n");
        assert_eq!(Reply::Bool(false).encode_for(Protocol::Resp3), b"#f\r\n");
        assert_eq!(Reply::Double(f64::INFINITY).encode(), b"$3\r\ninf\r\n");
        assert_eq!(
            Reply::Double(f64::NEG_INFINITY).encode_for(Protocol::Resp3),
            b",-inf\r\n"
        );
        assert_eq!(
            Reply::text("a").encode_for(Protocol::Resp3),
            b"=5\r\ntxt:a\r\n"
        );
        assert_eq!(Reply::text("a").encode(), b"$1\r\na\r\n");
        assert_eq!(
            Reply::Push(vec![Reply::bulk("x")]).encode_for(Protocol::Resp3),
            b">1\r\n$1\r\nx\r\n"
        );
        assert_eq!(Reply::Set(vec![]).encode_for(Protocol::Resp3), b"~0\r\n");
    }

    #[test]
    fn decodes_what_it_encodes() {
        let reply = Reply::Array(vec![Reply::bulk("x"), Reply::Integer(7), Reply::ok()]);
        let bytes = reply.encode();
        assert_eq!(
            Reply::decode(&bytes).unwrap(),
            Some((reply.clone(), bytes.len()))
        );
        assert_eq!(Reply::decode(b"$5\r\nab").unwrap(), None);
        let map = Reply::Map(vec![(Reply::bulk("k"), Reply::Bool(true))]);
        let bytes = map.encode_for(Protocol::Resp3);
        assert_eq!(
            Reply::decode_resp3(&bytes).unwrap(),
            Some((map, bytes.len()))
        );
    }
}
