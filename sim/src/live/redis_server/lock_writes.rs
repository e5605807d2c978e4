//! `lock_written` and `lock_granted` from real processes: the forwarder of a Redis node
//! (`backend::server_node`) watches each client connection when a scenario's trigger needs
//! them (`World::tracks_lock_writes`).
//!
//! The simulation fires `lock_written` when a client's command leaves the lock key changed
//! and present on a node (`nodes::redis`, comparing the key's entry before and after). A real
//! server tells neither, so right after each command of the client that names the lock key
//! (any argument equal to it, as `observe::register_tokens` counts it) and is not a read, the
//! forwarder sends the process `PTTL <key>` on the same connection — Redis runs a connection's
//! commands in order, each to its end (`processInputBuffer`), so the probe sees the key as the
//! command left it — and takes the probe's reply out of the stream before it reaches the
//! client. The command left the key written when its own reply is a success (not an error,
//! nil, `0` or an aborted `EXEC`) and the probe finds the key (`PTTL` ≥ -1); a probe that finds
//! none reports the key gone (`World::lock_gone`). Inside `MULTI` the probe goes after `EXEC`;
//! after `SUBSCRIBE`, `PSUBSCRIBE`, `SSUBSCRIBE`, `MONITOR` or `CLIENT REPLY` the connection's
//! replies no longer pair with its commands, and nothing more is sent or taken out.
//!
//! The moment is the one the forwarder reads the probe's reply from the process, on the node's
//! simulated clock: after the command ran, before its reply reaches the client (the
//! forwarder hands it to the simulated network in the same step).

use std::collections::VecDeque;

use bytes::BytesMut;
use model::redis::{Reply, RequestParser};

use crate::live::bridge::{Seen, Tap};

/// Commands naming the key that cannot change it.
const READS: &[&[u8]] = &[
    b"get",
    b"pttl",
    b"ttl",
    b"exists",
    b"type",
    b"strlen",
    b"getrange",
    b"mget",
    b"hget",
    b"hgetall",
    b"hmget",
    b"hexists",
    b"hlen",
    b"hkeys",
    b"hvals",
    b"object",
    b"dump",
    b"pexpiretime",
    b"expiretime",
    b"watch",
    b"debug",
];

/// Commands after which a connection's replies no longer pair with its commands.
const UNPAIRED: &[&[u8]] = &[
    b"subscribe",
    b"psubscribe",
    b"ssubscribe",
    b"monitor",
    b"client",
];

/// What the next reply from the process answers.
#[derive(Debug, PartialEq)]
enum Awaited {
    /// One of the client's commands: passed on.
    Reply,
    /// One of the client's commands that may have written the key: passed on, its success kept
    /// for the probe after it.
    Write,
    /// The probe: taken out.
    Probe,
}

/// The tap of one client connection to a Redis node.
pub struct LockWrites {
    node: String,
    client: String,
    key: Vec<u8>,
    /// `None` once the connection's commands are no longer followed (not RESP, or unpaired).
    parser: Option<RequestParser>,
    commands: BytesMut,
    replies: BytesMut,
    awaited: VecDeque<Awaited>,
    in_multi: bool,
    multi_writes: bool,
    /// The success of the last `Write` reply, for its probe.
    last_write_ok: bool,
    seen: Vec<Seen>,
}

impl LockWrites {
    pub fn new(node: &str, client: &str, key: &str) -> LockWrites {
        LockWrites {
            node: node.to_string(),
            client: client.to_string(),
            key: key.as_bytes().to_vec(),
            parser: Some(RequestParser::new()),
            commands: BytesMut::new(),
            replies: BytesMut::new(),
            awaited: VecDeque::new(),
            in_multi: false,
            multi_writes: false,
            last_write_ok: false,
            seen: Vec::new(),
        }
    }

    fn probe(&self) -> Vec<u8> {
        let mut out = format!("*2\r\n$4\r\nPTTL\r\n${}\r\n", self.key.len()).into_bytes();
        out.extend_from_slice(&self.key);
        out.extend_from_slice(b"\r\n");
        out
    }

    /// What one complete command of the client needs: whether a probe follows it.
    fn command(&mut self, argv: &[Vec<u8>]) -> bool {
        let name = argv[0].to_ascii_lowercase();
        if UNPAIRED.contains(&name.as_slice())
            && (name != b"client"
                || argv
                    .get(1)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"reply")))
        {
            self.parser = None;
            self.awaited.push_back(Awaited::Reply);
            return false;
        }
        let writes = !READS.contains(&name.as_slice())
            && argv
                .iter()
                .skip(1)
                .any(|a| a.as_slice() == self.key.as_slice());
        match name.as_slice() {
            b"multi" => {
                self.in_multi = true;
                self.multi_writes = false;
            }
            b"discard" => self.in_multi = false,
            b"exec" if self.in_multi => {
                self.in_multi = false;
                if self.multi_writes {
                    self.awaited.push_back(Awaited::Write);
                    self.awaited.push_back(Awaited::Probe);
                    return true;
                }
            }
            _ if self.in_multi => self.multi_writes |= writes,
            _ if writes => {
                self.awaited.push_back(Awaited::Write);
                self.awaited.push_back(Awaited::Probe);
                return true;
            }
            _ => {}
        }
        self.awaited.push_back(Awaited::Reply);
        false
    }
}

/// Whether a command's reply says it did something: not an error, nil, 0 or an aborted EXEC.
fn succeeded(reply: &Reply) -> bool {
    !matches!(
        reply,
        Reply::Error(_) | Reply::Nil | Reply::NilArray | Reply::Integer(0) | Reply::Bool(false)
    )
}

impl Tap for LockWrites {
    /// The client's commands to the process, each that may write the key followed by a probe.
    fn toward_real(&mut self, buf: &mut BytesMut) -> Result<Vec<u8>, String> {
        let Some(mut parser) = self.parser.take() else {
            return Ok(buf.split().to_vec());
        };
        self.commands.extend_from_slice(&buf.split());
        let mut out = Vec::with_capacity(self.commands.len());
        loop {
            let before = self.commands.clone();
            match parser.parse(&mut self.commands) {
                Ok(Some(argv)) => {
                    out.extend_from_slice(&before[..before.len() - self.commands.len()]);
                    self.parser = Some(parser);
                    let probe = self.command(&argv);
                    if probe {
                        out.extend(self.probe());
                    }
                    match self.parser.take() {
                        Some(p) => parser = p,
                        None => {
                            out.extend_from_slice(&self.commands.split());
                            return Ok(out);
                        }
                    }
                }
                Ok(None) => {
                    out.extend_from_slice(&before[..before.len() - self.commands.len()]);
                    self.parser = Some(parser);
                    return Ok(out);
                }
                // Not RESP: the process answers it; nothing more is followed here.
                Err(_) => {
                    out.extend_from_slice(&before);
                    self.commands.clear();
                    return Ok(out);
                }
            }
        }
    }

    /// The process's replies to the client, without the probes' replies.
    fn toward_sim(&mut self, bytes: Vec<u8>) -> Vec<u8> {
        if self.awaited.is_empty() && self.replies.is_empty() {
            return bytes;
        }
        self.replies.extend_from_slice(&bytes);
        let mut out = Vec::with_capacity(self.replies.len());
        while !self.awaited.is_empty() {
            let Ok(Some((reply, used))) = Reply::decode_resp3(&self.replies) else {
                break;
            };
            let raw = self.replies.split_to(used);
            if matches!(reply, Reply::Push(_)) {
                out.extend_from_slice(&raw);
                continue;
            }
            match self.awaited.pop_front() {
                Some(Awaited::Probe) => {
                    let present = !matches!(reply, Reply::Integer(-2));
                    let (node, client) = (self.node.clone(), self.client.clone());
                    if !present {
                        self.seen.push(Seen::LockGone { node });
                    } else if self.last_write_ok {
                        self.seen.push(Seen::LockWritten { node, client });
                    }
                }
                Some(Awaited::Write) => {
                    self.last_write_ok = succeeded(&reply);
                    out.extend_from_slice(&raw);
                }
                _ => out.extend_from_slice(&raw),
            }
        }
        if self.awaited.is_empty() {
            out.extend_from_slice(&self.replies.split());
        }
        out
    }

    fn seen(&mut self) -> Vec<Seen> {
        std::mem::take(&mut self.seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(argv: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", argv.len()).into_bytes();
        for a in argv {
            out.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
        }
        out
    }

    /// A SET NX that wins, then a GET, then a release script whose probe finds the key gone:
    /// the probes go after the writes only, their replies never reach the client, and the key
    /// is reported written, then gone.
    #[test]
    fn probes_follow_the_writes_and_their_replies_are_taken_out() {
        let mut tap = LockWrites::new("redis-1", "client-1", "lock");
        let mut sent = command(&["SET", "lock", "tok", "NX", "PX", "2000"]);
        sent.extend(command(&["GET", "lock"]));
        sent.extend(command(&[
            "EVAL",
            "return redis.call('del', KEYS[1])",
            "1",
            "lock",
        ]));
        // Split mid-command: what is not complete waits.
        let mut first = BytesMut::from(&sent[..10]);
        let out = tap.toward_real(&mut first).unwrap();
        let mut rest = BytesMut::from(&sent[10..]);
        let mut to_process = out;
        to_process.extend(tap.toward_real(&mut rest).unwrap());
        let probe = command(&["PTTL", "lock"]);
        let mut expected = command(&["SET", "lock", "tok", "NX", "PX", "2000"]);
        expected.extend(&probe);
        expected.extend(command(&["GET", "lock"]));
        expected.extend(command(&[
            "EVAL",
            "return redis.call('del', KEYS[1])",
            "1",
            "lock",
        ]));
        expected.extend(&probe);
        assert_eq!(to_process, expected);
        let replies = b"+OK\r\n:1999\r\n$3\r\ntok\r\n:1\r\n:-2\r\n".to_vec();
        let to_client = tap.toward_sim(replies[..7].to_vec());
        assert_eq!(to_client, b"+OK\r\n");
        let to_client = tap.toward_sim(replies[7..].to_vec());
        assert_eq!(to_client, b"$3\r\ntok\r\n:1\r\n");
        let seen = tap.seen();
        assert!(
            matches!(&seen[0], Seen::LockWritten { node, client } if node == "redis-1" && client == "client-1")
        );
        assert!(matches!(&seen[1], Seen::LockGone { node } if node == "redis-1"));
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn a_set_nx_that_loses_writes_nothing_and_multi_probes_after_exec() {
        let mut tap = LockWrites::new("redis-1", "client-2", "lock");
        let mut sent = command(&["SET", "lock", "other", "NX", "PX", "2000"]);
        sent.extend(command(&["MULTI"]));
        sent.extend(command(&["PEXPIRE", "lock", "100"]));
        sent.extend(command(&["EXEC"]));
        let out = tap.toward_real(&mut BytesMut::from(&sent[..])).unwrap();
        assert_eq!(out.windows(4).filter(|w| w == b"PTTL").count(), 2);
        let to_client =
            tap.toward_sim(b"$-1\r\n:1500\r\n+OK\r\n+QUEUED\r\n*1\r\n:1\r\n:100\r\n".to_vec());
        assert_eq!(to_client, b"$-1\r\n+OK\r\n+QUEUED\r\n*1\r\n:1\r\n");
        let seen = tap.seen();
        assert_eq!(seen.len(), 1);
        assert!(matches!(&seen[0], Seen::LockWritten { client, .. } if client == "client-2"));
    }
}
