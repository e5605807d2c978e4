//! Server-side request parsing, a transcription of `networking.c` `processInputBuffer`,
//! `processMultibulkBuffer` and `processInlineBuffer` (Redis 7.0), error texts included; and the
//! client side's requests, as every client library writes them.

use bytes::{Buf, BytesMut};

use super::reply::{bulk, prefixed};

/// A command as a client sends it: an array of bulk strings.
pub fn encode_command<A: AsRef<[u8]>>(argv: &[A]) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len_hint(argv));
    encode_command_into(&mut out, argv);
    out
}

/// Several commands, one after the other (a pipeline, a replication stream).
pub fn encode_commands(commands: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(commands.iter().map(|argv| encoded_len_hint(argv)).sum());
    for argv in commands {
        encode_command_into(&mut out, argv);
    }
    out
}

/// About what `encode_command_into` writes for `argv` (arguments and their headers; at least
/// that up to 10-digit lengths): the buffer is allocated once, not grown header by header
/// (growing was 1.7 % of a baseline run's instructions, issue 32).
fn encoded_len_hint<A: AsRef<[u8]>>(argv: &[A]) -> usize {
    16 + argv
        .iter()
        .map(|arg| arg.as_ref().len() + 16)
        .sum::<usize>()
}

/// Appends `*<argc>\r\n`, then `$<len>\r\n<arg>\r\n` per argument: written straight into the
/// buffer (every command of a simulated run goes through here).
fn encode_command_into<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    prefixed(out, b'*', argv.len() as i64);
    for arg in argv {
        bulk(out, arg.as_ref());
    }
}

/// `PROTO_INLINE_MAX_SIZE`: the longest inline request or count line.
pub const PROTO_INLINE_MAX_SIZE: usize = 1024 * 64;
/// `PROTO_MBULK_BIG_ARG`: a bulk at least this long that fills the input buffer exactly is
/// taken as it is.
pub const PROTO_MBULK_BIG_ARG: usize = 32 * 1024;
/// `proto-max-bulk-len` default (512 MB).
pub const PROTO_MAX_BULK_LEN: i64 = 512 * 1024 * 1024;
/// What a client that has yet to AUTH may send (`processMultibulkBuffer` of 7.0.15): at most 10
/// arguments, none over 16 KB, so that it cannot make the server buffer 512 MB per argument.
const UNAUTHENTICATED_MULTIBULK_MAX: i64 = 10;
const UNAUTHENTICATED_BULK_MAX: i64 = 16 * 1024;

/// A protocol error: the connection gets `-ERR <text>\r\n` and is closed. Bytes: the offending
/// byte is echoed raw, as `addReplyErrorFormat("... got '%c'")` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub Vec<u8>);

impl ProtocolError {
    fn new(text: impl Into<Vec<u8>>) -> Self {
        ProtocolError(text.into())
    }

    /// The reply Redis writes before closing: `ERR Protocol error: ...`, CR and LF as spaces.
    pub fn reply(&self) -> super::Reply {
        let mut text = b"ERR ".to_vec();
        text.extend(
            self.0
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        super::Reply::Error(text)
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for ProtocolError {}

/// Incremental RESP request parser of one connection (multibulk and inline).
#[derive(Debug, Default)]
pub struct RequestParser {
    /// Remaining bulk count of the multibulk being read (`c->multibulklen`).
    multibulk_len: usize,
    /// Length of the bulk being read, once its `$n` line was read (`c->bulklen`).
    bulk_len: Option<usize>,
    argv: Vec<Vec<u8>>,
    /// The client must AUTH before anything else (`authRequired`): the unauthenticated limits
    /// apply to the next count lines.
    unauthenticated: bool,
}

/// `strchr` on the query buffer: the search stops at a NUL byte, as it does on an sds string.
fn strchr(buf: &[u8], byte: u8) -> Option<usize> {
    buf.iter().take_while(|&&c| c != 0).position(|&c| c == byte)
}

impl RequestParser {
    pub fn new() -> Self {
        RequestParser::default()
    }

    /// Whether the client still has to AUTH, as of the command about to be parsed: set before
    /// each `parse` (the host runs each command before parsing the next one, as Redis does).
    pub fn set_unauthenticated(&mut self, unauthenticated: bool) {
        self.unauthenticated = unauthenticated;
    }

    /// The length of the bulk being read once its `$n` line is known and more bytes are needed,
    /// so the host can make room for all of it at once.
    pub fn pending_bulk_len(&self) -> Option<usize> {
        self.bulk_len
    }

    /// Parses the next command from the front of `buf`, consuming what it used.
    /// `Ok(None)`: more bytes are needed. Empty commands (blank inline lines, `*0`) are skipped.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        loop {
            if buf.is_empty() && self.multibulk_len == 0 {
                return Ok(None);
            }
            let complete = if self.multibulk_len > 0 || buf[0] == b'*' {
                self.multibulk(buf)?
            } else {
                self.inline(buf)?
            };
            if !complete {
                return Ok(None);
            }
            let argv = std::mem::take(&mut self.argv);
            if !argv.is_empty() {
                return Ok(Some(argv));
            }
        }
    }

    /// `processInlineBuffer`: one line split like `sdssplitargs`.
    fn inline(&mut self, buf: &mut BytesMut) -> Result<bool, ProtocolError> {
        let Some(newline) = strchr(buf, b'\n') else {
            if buf.len() > PROTO_INLINE_MAX_SIZE {
                return Err(ProtocolError::new("Protocol error: too big inline request"));
            }
            return Ok(false);
        };
        let (line_len, linefeed) = if newline > 0 && buf[newline - 1] == b'\r' {
            (newline - 1, 2)
        } else {
            (newline, 1)
        };
        let argv = split_args(&buf[..line_len])
            .ok_or_else(|| ProtocolError::new("Protocol error: unbalanced quotes in request"))?;
        buf.advance(line_len + linefeed);
        self.argv = argv;
        Ok(true)
    }

    /// `processMultibulkBuffer`. What it reads is consumed once, when it returns (a consumption
    /// per line and per bulk, each moving the buffer's start, was 2.6 % of `locksim serve`'s
    /// instructions under pipelined EVALSHA, issue 32).
    fn multibulk(&mut self, buf: &mut BytesMut) -> Result<bool, ProtocolError> {
        let mut used = 0;
        let result = self.multibulk_from(buf, &mut used);
        buf.advance(used);
        result
    }

    /// `multibulk` on `buf[*used..]`, `*used` moved past what it read.
    fn multibulk_from(
        &mut self,
        buf: &mut BytesMut,
        used: &mut usize,
    ) -> Result<bool, ProtocolError> {
        if self.multibulk_len == 0 {
            let rest = &buf[*used..];
            let Some(cr) = strchr(rest, b'\r') else {
                if rest.len() > PROTO_INLINE_MAX_SIZE {
                    return Err(ProtocolError::new(
                        "Protocol error: too big mbulk count string",
                    ));
                }
                return Ok(false);
            };
            if cr + 2 > rest.len() {
                return Ok(false);
            }
            let count = crate::redis::number::string2ll(&rest[1..cr]);
            let count = match count {
                Some(n) if n <= i64::from(i32::MAX) => n,
                _ => {
                    return Err(ProtocolError::new(
                        "Protocol error: invalid multibulk length",
                    ));
                }
            };
            if count > UNAUTHENTICATED_MULTIBULK_MAX && self.unauthenticated {
                return Err(ProtocolError::new(
                    "Protocol error: unauthenticated multibulk length",
                ));
            }
            *used += cr + 2;
            if count <= 0 {
                return Ok(true);
            }
            self.multibulk_len = count as usize;
            self.argv = Vec::with_capacity(self.multibulk_len.min(1024));
        }
        while self.multibulk_len > 0 {
            let len = match self.bulk_len {
                Some(len) => len,
                None => {
                    let rest = &buf[*used..];
                    let Some(cr) = strchr(rest, b'\r') else {
                        if rest.len() > PROTO_INLINE_MAX_SIZE {
                            return Err(ProtocolError::new(
                                "Protocol error: too big bulk count string",
                            ));
                        }
                        return Ok(false);
                    };
                    if cr + 2 > rest.len() {
                        return Ok(false);
                    }
                    if rest[0] != b'$' {
                        let mut text = b"Protocol error: expected '$', got '".to_vec();
                        text.push(rest[0]);
                        text.push(b'\'');
                        return Err(ProtocolError(text));
                    }
                    let len = match crate::redis::number::string2ll(&rest[1..cr]) {
                        Some(n) if (0..=PROTO_MAX_BULK_LEN).contains(&n) => n,
                        _ => return Err(ProtocolError::new("Protocol error: invalid bulk length")),
                    };
                    if len > UNAUTHENTICATED_BULK_MAX && self.unauthenticated {
                        return Err(ProtocolError::new(
                            "Protocol error: unauthenticated bulk length",
                        ));
                    }
                    let len = len as usize;
                    *used += cr + 2;
                    self.bulk_len = Some(len);
                    len
                }
            };
            let available = buf.len() - *used;
            if available < len + 2 {
                return Ok(false);
            }
            if len >= PROTO_MBULK_BIG_ARG && available == len + 2 {
                // The buffer holds this bulk and nothing else: it becomes the argument, without
                // a copy of what may be 512 MB (`processMultibulkBuffer` does the same with its
                // query buffer; the host reads such a bulk into a buffer of its own).
                buf.advance(*used);
                *used = 0;
                let mut whole = std::mem::take(buf);
                whole.truncate(len);
                self.argv.push(whole.into());
            } else {
                self.argv.push(buf[*used..*used + len].to_vec());
                *used += len + 2;
            }
            self.bulk_len = None;
            self.multibulk_len -= 1;
        }
        Ok(true)
    }
}

/// `sds.c` `sdssplitargs`: splits a line into arguments, handling "double quotes" with
/// `\n \r \t \b \a \\ \" \xHH` escapes and 'single quotes' with `\'`. `None` on unbalanced
/// quotes or a closing quote not followed by a space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut p = 0;
    let n = line.len();
    loop {
        while p < n && is_space(line[p]) {
            p += 1;
        }
        if p >= n {
            return Some(args);
        }
        let mut inq = false;
        let mut insq = false;
        let mut done = false;
        let mut current = Vec::new();
        while !done {
            let c = line.get(p).copied();
            if inq {
                match c {
                    None => return None,
                    Some(b'\\')
                        if p + 3 < n
                            && line[p + 1] == b'x'
                            && line[p + 2].is_ascii_hexdigit()
                            && line[p + 3].is_ascii_hexdigit() =>
                    {
                        current.push(hex_val(line[p + 2]) * 16 + hex_val(line[p + 3]));
                        p += 3;
                    }
                    Some(b'\\') if p + 1 < n => {
                        p += 1;
                        current.push(match line[p] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        if p + 1 < n && !is_space(line[p + 1]) {
                            return None;
                        }
                        done = true;
                    }
                    Some(other) => current.push(other),
                }
            } else if insq {
                match c {
                    None => return None,
                    Some(b'\\') if p + 1 < n && line[p + 1] == b'\'' => {
                        p += 1;
                        current.push(b'\'');
                    }
                    Some(b'\'') => {
                        if p + 1 < n && !is_space(line[p + 1]) {
                            return None;
                        }
                        done = true;
                    }
                    Some(other) => current.push(other),
                }
            } else {
                match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t' | 0) => done = true,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(other) => current.push(other),
                }
            }
            if p < n {
                p += 1;
            }
        }
        args.push(current);
    }
}

/// C `isspace`.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn hex_val(c: u8) -> u8 {
    (c as char).to_digit(16).unwrap_or(0) as u8
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
            let reply = crate::redis::Reply::Array(
                argv.iter()
                    .map(|a| crate::redis::Reply::Bulk(a.clone()))
                    .collect(),
            );
            assert_eq!(encode_command(argv), reply.encode());
            expected.extend(reply.encode());
        }
        assert_eq!(encode_commands(&commands), expected);
        assert_eq!(
            encode_command(&["GET", "k"]),
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
        );
    }

    fn parse_all(input: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>, usize) {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match parser.parse(&mut buf) {
                Ok(Some(argv)) => out.push(argv),
                Ok(None) => return (out, None, buf.len()),
                Err(e) => return (out, Some(e), buf.len()),
            }
        }
    }

    fn args(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_inline() {
        let (cmds, err, rest) = parse_all(
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\n  \r\nset a \"b c\"\n*1\r\n$4\r\nPI",
        );
        assert_eq!(
            cmds,
            vec![
                args(&["GET", "k"]),
                args(&["PING"]),
                args(&["set", "a", "b c"])
            ]
        );
        assert!(err.is_none());
        assert_eq!(
            rest, 2,
            "the parsed header of the incomplete command was consumed"
        );
    }

    #[test]
    fn incremental_byte_by_byte() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            if let Some(argv) = parser.parse(&mut buf).unwrap() {
                got = Some(argv);
            }
        }
        assert_eq!(got, Some(args(&["SET", "k", "hello"])));
        assert!(buf.is_empty());
    }

    #[test]
    fn redis_error_texts() {
        let cases: &[(&[u8], &str)] = &[
            (b"*x\r\n", "Protocol error: invalid multibulk length"),
            (
                b"*3000000000\r\n",
                "Protocol error: invalid multibulk length",
            ),
            (b"*1\r\nx\r\n", "Protocol error: expected '$', got 'x'"),
            (b"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"),
            (
                b"*1\r\n$536870913\r\n",
                "Protocol error: invalid bulk length",
            ),
            (
                b"set a \"b\n",
                "Protocol error: unbalanced quotes in request",
            ),
            (
                b"set a 'b'c\n",
                "Protocol error: unbalanced quotes in request",
            ),
        ];
        for (input, text) in cases {
            let (_, err, _) = parse_all(input);
            assert_eq!(
                err.map(|e| e.0),
                Some(text.as_bytes().to_vec()),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        let (_, err, _) = parse_all(&vec![b'a'; PROTO_INLINE_MAX_SIZE + 1]);
        assert_eq!(err.unwrap().0, b"Protocol error: too big inline request");
    }

    #[test]
    fn empty_multibulk_is_skipped() {
        let (cmds, err, _) = parse_all(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(cmds, vec![args(&["PING"])]);
        assert!(err.is_none());
    }

    #[test]
    fn split_args_escapes() {
        assert_eq!(
            split_args(br#"a "\x41\n" 'it\'s'"#).unwrap(),
            args(&["a", "A\n", "it's"])
        );
        assert_eq!(split_args(b"   ").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(split_args(br#""""#).unwrap(), args(&[""]));
        assert!(split_args(br#""abc"#).is_none());
    }
}
