//! The history of one run: every event any node observed, stamped with true simulated time.
//!
//! Jepsen's split: clients and the nemesis *record* events here; checkers (`check`) only *read*
//! them. The canonical trace (`trace.jsonl`) is this list serialised one event a line, so its
//! order and content must be deterministic for a given scenario and seed.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

mod json;

/// One observation. `t_us` is true simulated time since the start of the run (not any node's
/// clock, which may jump or drift); `node` is the node that observed it; `thread` the worker
/// thread of a client process that runs several (`clients.threads` > 1), numbered from 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub t_us: u64,
    pub node: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub thread: Option<u32>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened. Client-side lock events carry the client's view; server-side events
/// (`executed`, `key_owner`, `resource_*`) carry what really happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The client starts wanting the lock (one workload iteration).
    AcquireStarted { attempt: u32 },
    /// The client believes it holds the lock from now on (after any validity check).
    Acquired {
        token: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        fence: Option<u64>,
    },
    /// The client gave up this attempt (timeout or an error it does not retry).
    AcquireFailed { reason: String },
    /// The attempt's outcome is unknown (a live client answered `info`, e.g. a timeout after
    /// the command was sent): the lock may be held from the attempt's start until `lease_ms`
    /// after it, or until the client's next release (jepsen.history's indefinite `info`).
    AcquireUnknown { reason: String, lease_ms: u64 },
    /// The client stops using the protected resource and sends its first release command.
    ReleaseStarted,
    /// The release finished; `ok` is the scheme's own view of success.
    Released { ok: bool, detail: String },
    /// The client asks its library to extend the lease it holds (`clients.extend`).
    ExtendStarted,
    /// The extension finished; `ok` is the library's own answer (a client that gets `false`
    /// stops using the resource).
    Extended { ok: bool, detail: String },
    /// A client sent a command to a server.
    CommandSent { server: String, command: String },
    /// The reply reached the client.
    CommandReply { server: String, reply: String },
    /// The client stopped waiting for a reply (its own command timeout, or the connection broke).
    /// The server may still execute the command later: look for its `executed` event.
    CommandFailed {
        server: String,
        command: String,
        error: String,
    },
    /// A server executed a command (server-side view, in the order it executed them).
    Executed {
        client: String,
        command: String,
        reply: String,
    },
    /// The value of the lock key changed on a server: its owner is the client whose token it holds.
    KeyOwner {
        key: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        owner: Option<String>,
        /// Who changed it: the client whose command did (its worker thread, `client-1/t2`, when
        /// it runs several), or `expiry`, `replication`, `crash`, `restart`.
        by: String,
    },
    /// The resource served a read of its counter.
    ResourceRead {
        client: String,
        value: i64,
        version: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        fence: Option<u64>,
    },
    /// The resource applied a write. `lost_update` is true when it was computed from a read of
    /// an older version: someone else's write in between is lost (the seeds' oversell).
    ResourceWrite {
        client: String,
        value: i64,
        based_on_version: u64,
        version: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        fence: Option<u64>,
        lost_update: bool,
    },
    /// With fencing, the resource refused an access whose token is lower than one it has seen
    /// (Kleppmann 2016, "Making the lock safe with fencing").
    ResourceRejected {
        client: String,
        op: String,
        fence: u64,
        max_fence: u64,
    },
    /// A replica applied a write from its master's replication stream (`offset` = the replica's
    /// processed offset after it).
    Replicated {
        master: String,
        command: String,
        offset: i64,
    },
    /// A change in a Redis node's replication: role changes, link up/down, full or partial resync.
    Replication { what: String, detail: String },
    /// A Sentinel's own event, named as sentinel.c logs it (`+sdown`, `+odown`, `+tilt`,
    /// `+elected-leader`, `+switch-master`, ...).
    Sentinel {
        what: String,
        master: String,
        detail: String,
    },
    /// The client finished its workload.
    ClientDone,
    /// A fault was injected (`phase` = injected) or healed (`phase` = healed).
    Fault {
        fault: String,
        phase: FaultPhase,
        detail: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultPhase {
    Injected,
    Healed,
}

impl FaultPhase {
    /// The phase as the trace spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultPhase::Injected => "injected",
            FaultPhase::Healed => "healed",
        }
    }
}

/// The lock owner a workload thread is: its node (`client-1`), or `client-1/t2` for worker
/// thread 2 of a client running several threads. The checkers key holds by owner, so two
/// threads of one process are two owners.
pub fn owner_name(node: &str, thread: Option<u32>) -> String {
    match thread {
        Some(t) => format!("{node}/t{t}"),
        None => node.to_string(),
    }
}

/// The node part of an owner name (`client-1/t2` → `client-1`).
pub fn owner_node(owner: &str) -> &str {
    owner.split_once('/').map_or(owner, |(node, _)| node)
}

impl Event {
    /// An event of a node (no worker thread).
    pub fn new(t_us: u64, node: impl Into<String>, kind: EventKind) -> Event {
        Event {
            t_us,
            node: node.into(),
            thread: None,
            kind,
        }
    }

    /// The lock owner that observed this event (see [`owner_name`]).
    pub fn owner(&self) -> String {
        owner_name(&self.node, self.thread)
    }

    pub fn t_ms(&self) -> f64 {
        self.t_us as f64 / 1000.0
    }

    /// The event's name as it appears in the trace (`acquired`, `released`, ...).
    pub fn name(&self) -> &'static str {
        match &self.kind {
            EventKind::AcquireStarted { .. } => "acquire_started",
            EventKind::Acquired { .. } => "acquired",
            EventKind::AcquireFailed { .. } => "acquire_failed",
            EventKind::AcquireUnknown { .. } => "acquire_unknown",
            EventKind::ReleaseStarted => "release_started",
            EventKind::Released { .. } => "released",
            EventKind::ExtendStarted => "extend_started",
            EventKind::Extended { .. } => "extended",
            EventKind::CommandSent { .. } => "command_sent",
            EventKind::CommandReply { .. } => "command_reply",
            EventKind::CommandFailed { .. } => "command_failed",
            EventKind::Executed { .. } => "executed",
            EventKind::KeyOwner { .. } => "key_owner",
            EventKind::ResourceRead { .. } => "resource_read",
            EventKind::ResourceWrite { .. } => "resource_write",
            EventKind::ResourceRejected { .. } => "resource_rejected",
            EventKind::Replicated { .. } => "replicated",
            EventKind::Replication { .. } => "replication",
            EventKind::Sentinel { .. } => "sentinel",
            EventKind::ClientDone => "client_done",
            EventKind::Fault { .. } => "fault",
        }
    }

    /// About how much memory the event holds: its own size and the text of its strings (for
    /// the recorder's budget; the allocator's rounding is not counted).
    pub fn size_bytes(&self) -> usize {
        let text: usize = match &self.kind {
            EventKind::AcquireStarted { .. }
            | EventKind::ReleaseStarted
            | EventKind::ExtendStarted
            | EventKind::ClientDone => 0,
            EventKind::Acquired { token, .. } => token.len(),
            EventKind::AcquireFailed { reason } | EventKind::AcquireUnknown { reason, .. } => {
                reason.len()
            }
            EventKind::Released { detail, .. } | EventKind::Extended { detail, .. } => detail.len(),
            EventKind::CommandSent { server, command } => server.len() + command.len(),
            EventKind::CommandReply { server, reply } => server.len() + reply.len(),
            EventKind::CommandFailed {
                server,
                command,
                error,
            } => server.len() + command.len() + error.len(),
            EventKind::Executed {
                client,
                command,
                reply,
            } => client.len() + command.len() + reply.len(),
            EventKind::KeyOwner { key, owner, by } => {
                key.len() + owner.as_ref().map_or(0, String::len) + by.len()
            }
            EventKind::ResourceRead { client, .. } | EventKind::ResourceWrite { client, .. } => {
                client.len()
            }
            EventKind::ResourceRejected { client, op, .. } => client.len() + op.len(),
            EventKind::Replicated {
                master, command, ..
            } => master.len() + command.len(),
            EventKind::Replication { what, detail } => what.len() + detail.len(),
            EventKind::Sentinel {
                what,
                master,
                detail,
            } => what.len() + master.len() + detail.len(),
            EventKind::Fault { fault, detail, .. } => fault.len() + detail.len(),
        };
        std::mem::size_of::<Event>() + self.node.len() + text
    }

    /// One canonical JSON line (no trailing newline): the unit of the trace and its hash.
    pub fn to_json_line(&self) -> String {
        let mut line = Vec::new();
        json::write_event(&mut line, self);
        String::from_utf8(line).expect("the event's strings are UTF-8")
    }
}

/// The most of one command or reply the trace keeps, in bytes: a longer argument or string
/// keeps its head and its size (`"xxxx…" (52428800 bytes)`), and once a rendering has reached
/// this size the remaining arguments or elements are counted, not shown (`… (999000 more)`),
/// as Redis's slow log shortens what it keeps (`slowlog.c`: `SLOWLOG_ENTRY_MAX_STRING`,
/// `SLOWLOG_ENTRY_MAX_ARGC`). Above everything the catalog sends or gets (its longest command,
/// an `EVAL` of Redisson 3.12's fair-lock script, is 1,817 bytes; its longest reply, the `INFO
/// ALL` Redisson asks for, 5,097), so its traces are complete; a 50 MB value or a script
/// returning a million elements costs 16 KiB per event.
pub const TRACE_TEXT_MAX_BYTES: usize = 16 << 10;

/// Renders argv the way `redis-cli` echoes a command: space-separated, quoting arguments that
/// need it, so the trace stays readable and stable; shortened past [`TRACE_TEXT_MAX_BYTES`].
pub fn render_command(argv: &[Vec<u8>]) -> String {
    // Allocated once for the plain case (grown argument by argument, 1.7 % of a baseline run's
    // instructions were its reallocations, issue 32); `quote` reserves its own escapes.
    let mut out = String::with_capacity(
        argv.iter()
            .map(|arg| arg.len().min(TRACE_TEXT_MAX_BYTES) + 3)
            .sum::<usize>()
            .min(2 * TRACE_TEXT_MAX_BYTES),
    );
    for (i, arg) in argv.iter().enumerate() {
        if out.len() >= TRACE_TEXT_MAX_BYTES {
            out.push_str(&format!(" … ({} more arguments)", argv.len() - i));
            break;
        }
        if i > 0 {
            out.push(' ');
        }
        // A plain argument is printable ASCII, so UTF-8 without a check; any other is checked
        // once, by `push_quoted` (it was checked twice: a script's bytes were walked four
        // times).
        if arg.len() <= TRACE_TEXT_MAX_BYTES && is_plain(arg) {
            let start = out.len();
            // SAFETY: `is_plain` admits printable ASCII only, which is UTF-8.
            out.push_str(unsafe { std::str::from_utf8_unchecked(arg) });
            if i == 0 {
                out[start..].make_ascii_uppercase();
            }
        } else {
            push_quoted(&mut out, arg);
        }
    }
    out
}

/// Whether `redis-cli` would echo `arg` as it is: not empty, printable ASCII (`!` to `~`) but
/// `"` and `'`. Eight bytes at a time, as [`next_to_quote`]: a byte-by-byte check, then a UTF-8
/// check of what it admitted, were half of `render_command`'s instructions (issue 32).
fn is_plain(arg: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    let below = |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGHS;
    let plain = |b: &u8| b.is_ascii_graphic() && *b != b'"' && *b != b'\'';
    let mut chunks = arg.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // A lane is flagged when it is below `!`, DEL, `"` or `'`, or not ASCII; whether any
        // is flagged is exact (a borrow only ever flags a lane above a flagged one).
        let flags = below(word, b'!')
            | below(word ^ (ONES * 0x7f), 1)
            | below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\'')), 1)
            | (word & HIGHS);
        if flags != 0 {
            return false;
        }
    }
    !arg.is_empty() && chunks.remainder().iter().all(plain)
}

/// Appends `text` as Rust's `{:?}` writes a string. Every EVAL's script goes through here, so
/// printable ASCII (with tabs and newlines) is escaped by hand in one pass, runs of plain bytes
/// found eight at a time and copied at once; anything else goes to `Debug`.
fn quote(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    let mark = out.len();
    out.reserve(bytes.len() + 16);
    out.push('"');
    let mut start = 0;
    let mut i = next_to_quote(bytes, 0);
    while i < bytes.len() {
        let escaped = match bytes[i] {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\t' => "\\t",
            b'\n' => "\\n",
            b'\r' => "\\r",
            _ => {
                out.truncate(mark);
                let _ = write!(out, "{text:?}");
                return;
            }
        };
        // `i` is an ASCII byte's index: a character boundary.
        out.push_str(&text[start..i]);
        out.push_str(escaped);
        start = i + 1;
        i = next_to_quote(bytes, start);
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// The index of the first byte at or after `from` that [`quote`] does not copy as it is (a
/// control character, `"`, `\`, DEL or non-ASCII), or `bytes.len()`; eight bytes at a time, as
/// `json::next_escape` (the lowest flagged lane is exact).
fn next_to_quote(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    let below = |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGHS;
    let plain = |b: u8| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\';
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let flags = below(word, 0x20)
            | below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1)
            | below(word ^ (ONES * 0x7f), 1)
            | (word & HIGHS);
        if flags != 0 {
            return i + (flags.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && plain(bytes[i]) {
        i += 1;
    }
    i
}

/// A string as Rust's `{:?}` quotes it; one longer than [`TRACE_TEXT_MAX_BYTES`] as its head
/// (cut before a character, never inside one) and its size.
fn push_quoted(out: &mut String, bytes: &[u8]) {
    if bytes.len() <= TRACE_TEXT_MAX_BYTES {
        match std::str::from_utf8(bytes) {
            Ok(text) => quote(out, text),
            Err(_) => quote(out, &String::from_utf8_lossy(bytes)),
        }
        return;
    }
    let mut end = TRACE_TEXT_MAX_BYTES;
    while end > 0 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    let quoted = format!("{:?}", String::from_utf8_lossy(&bytes[..end]));
    out.push_str(&quoted[..quoted.len() - 1]);
    out.push_str(&format!("…\" ({} bytes)", bytes.len()));
}

/// A status or error line as `redis-cli` prints it, shortened as [`push_quoted`] does.
fn push_line(out: &mut String, text: &str) {
    if text.len() <= TRACE_TEXT_MAX_BYTES {
        out.push_str(text);
        return;
    }
    let mut end = TRACE_TEXT_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&format!("{}… ({} bytes)", &text[..end], text.len()));
}

/// Renders a reply the way `redis-cli` prints it, on one line, shortened past
/// [`TRACE_TEXT_MAX_BYTES`].
pub fn render_reply(reply: &crate::redis::Reply) -> String {
    let mut out = String::new();
    push_reply(&mut out, reply);
    out
}

fn push_reply(out: &mut String, reply: &crate::redis::Reply) {
    use crate::redis::Reply;
    match reply {
        Reply::Status(s) => push_line(out, s),
        Reply::Error(e) => {
            out.push_str("(error) ");
            push_line(out, &String::from_utf8_lossy(e));
        }
        Reply::Integer(i) => {
            out.push_str("(integer) ");
            out.push_str(itoa::Buffer::new().format(*i));
        }
        Reply::Bool(b) => out.push_str(if *b { "(integer) 1" } else { "(integer) 0" }),
        Reply::Bulk(b) | Reply::BigNumber(b) | Reply::Verbatim { text: b, .. } => {
            push_quoted(out, b)
        }
        Reply::Double(d) => out.push_str(&format!("{:?}", crate::redis::number::fmt_g17(*d))),
        Reply::Nil | Reply::NilArray => out.push_str("(nil)"),
        Reply::Array(items) | Reply::Sequence(items) | Reply::Set(items) | Reply::Push(items) => {
            push_items(out, items.len(), items.iter())
        }
        Reply::Map(pairs) => {
            push_items(out, 2 * pairs.len(), pairs.iter().flat_map(|(k, v)| [k, v]))
        }
    }
}

/// `[a, b, …]`; once the rendering has reached [`TRACE_TEXT_MAX_BYTES`], the remaining items
/// are counted, not shown.
fn push_items<'a>(
    out: &mut String,
    len: usize,
    items: impl Iterator<Item = &'a crate::redis::Reply>,
) {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if out.len() >= TRACE_TEXT_MAX_BYTES {
            out.push_str(&format!("… ({} more)", len - i));
            break;
        }
        push_reply(out, item);
    }
    out.push(']');
}

/// The full canonical trace: one JSON event per line, each line ending in `\n`.
pub fn trace_jsonl(events: &[Event]) -> String {
    let mut out = String::new();
    for event in events {
        out.push_str(&event.to_json_line());
        out.push('\n');
    }
    out
}

/// A stable digest of the canonical trace (SHA-1, hex). Not std's `DefaultHasher`, whose output
/// may change between Rust releases.
pub fn trace_hash(events: &[Event]) -> String {
    use sha1::{Digest, Sha1};
    let mut hasher = Sha1::new();
    // One buffer for many lines (the bytes of `to_json_line`, without a String per event),
    // hashed in chunks: SHA-1 is a stream, so the digest is the same as line by line, and each
    // `update` copies less into the hasher's block buffer.
    const CHUNK_BYTES: usize = 64 << 10;
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 1024);
    for event in events {
        json::write_event(&mut chunk, event);
        chunk.push(b'\n');
        if chunk.len() >= CHUNK_BYTES {
            hasher.update(&chunk);
            chunk.clear();
        }
    }
    hasher.update(&chunk);
    hex(&hasher.finalize())
}

/// Lower-case hex, two digits a byte (script SHAs, trace hashes, tokens): on every `EVAL`, so
/// without a `format!` per byte.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Lower-case hex digits, as `hex` and serde_json's `\u00xx` escapes write them.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_debug_formatting() {
        let ascii: String = (0u8..128).map(char::from).collect();
        let printable: String = (b' '..=b'~')
            .map(char::from)
            .chain(['\t', '\n', '\r'])
            .collect();
        for text in [
            ascii.as_str(),
            printable.as_str(),
            "local v = redis.call('GET', KEYS[1])\n\tif v == ARGV[1] then return 1 end",
            "say \"hi\" \\ there\r\n",
            "caf\u{e9} \u{301}\u{200b}",
            "",
        ] {
            let mut quoted = String::new();
            quote(&mut quoted, text);
            assert_eq!(quoted, format!("{text:?}"));
        }
    }

    /// The eight-at-a-time scan stops at every offset of a word, for every byte `quote`
    /// escapes by hand and every one it leaves to `Debug`, after plain bytes of every kind.
    #[test]
    fn quoting_finds_every_byte_at_every_offset() {
        let specials = [
            "\"", "\\", "\t", "\n", "\r", "\u{1}", "\u{7f}", "\u{e9}", "\u{200b}",
        ];
        let fillers = [" ", "!", "#", "[", "]", "a", "~"];
        for text in texts_with_special_at_every_offset(&specials, &fillers) {
            let mut quoted = "before ".to_string();
            quote(&mut quoted, &text);
            assert_eq!(quoted, format!("before {text:?}"));
        }
    }

    #[test]
    fn events_serialise_with_their_name_and_round_trip() {
        let event = Event::new(
            1500,
            "client-1",
            EventKind::Acquired {
                token: "abc".into(),
                fence: Some(3),
            },
        );
        let line = event.to_json_line();
        assert_eq!(
            line,
            r#"{"t_us":1500,"node":"client-1","event":"acquired","token":"abc","fence":3}"#
        );
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back, event);
        assert_eq!(back.name(), "acquired");
        let threaded = Event {
            thread: Some(2),
            ..event
        };
        let line = threaded.to_json_line();
        assert_eq!(
            line,
            r#"{"t_us":1500,"node":"client-1","thread":2,"event":"acquired","token":"abc","fence":3}"#
        );
        assert_eq!(threaded.owner(), "client-1/t2");
        assert_eq!(owner_node("client-1/t2"), "client-1");
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back, threaded);
    }

    #[test]
    fn hash_depends_on_every_byte_of_the_trace() {
        let a = vec![Event::new(1, "n", EventKind::ReleaseStarted)];
        let mut b = a.clone();
        b[0].t_us = 2;
        assert_ne!(trace_hash(&a), trace_hash(&b));
        assert_eq!(trace_hash(&a), trace_hash(&a.clone()));
        assert_eq!(trace_hash(&a).len(), 40);
    }

    /// The hash is the SHA-1 of `trace_jsonl`'s bytes, however many chunks they are hashed in.
    #[test]
    fn hash_is_the_sha1_of_the_whole_trace() {
        use sha1::{Digest, Sha1};
        for n in [0, 1, 1000, 5000] {
            let events: Vec<Event> = (0..n)
                .map(|i| {
                    Event::new(
                        i,
                        "client-1",
                        EventKind::CommandSent {
                            server: "redis-1".into(),
                            command: format!("SET lock {i} NX PX 30000"),
                        },
                    )
                })
                .collect();
            let whole = hex(&Sha1::digest(trace_jsonl(&events).as_bytes()));
            assert_eq!(trace_hash(&events), whole, "{n} events");
        }
    }

    /// The eight-at-a-time check agrees with the byte-by-byte one for every byte at every
    /// offset of a word, and after plain bytes of every kind.
    #[test]
    fn plain_arguments_are_found_at_every_offset() {
        let by_byte = |arg: &[u8]| {
            !arg.is_empty()
                && arg
                    .iter()
                    .all(|b| b.is_ascii_graphic() && *b != b'"' && *b != b'\'')
        };
        let specials: Vec<String> = (0u8..128)
            .map(|b| char::from(b).to_string())
            .chain(["\u{e9}".to_string(), "\u{200b}".to_string()])
            .collect();
        let specials: Vec<&str> = specials.iter().map(String::as_str).collect();
        let fillers = ["!", "#", "[", "]", "a", "~", "\\"];
        for text in texts_with_special_at_every_offset(&specials, &fillers) {
            assert_eq!(
                is_plain(text.as_bytes()),
                by_byte(text.as_bytes()),
                "{text:?}"
            );
        }
        assert!(!is_plain(b""));
    }

    #[test]
    fn commands_render_like_redis_cli() {
        let argv: Vec<Vec<u8>> = vec![b"set".to_vec(), b"lock".to_vec(), b"a b".to_vec()];
        assert_eq!(render_command(&argv), r#"SET lock "a b""#);
    }

    /// A 50 MB argument or a million-element reply costs the trace a few KB, not its size.
    #[test]
    fn long_commands_and_replies_keep_their_head_and_size() {
        use crate::redis::Reply;
        let value = vec![b'x'; 50 << 20];
        let command = render_command(&[b"set".to_vec(), b"k".to_vec(), value.clone()]);
        assert!(command.starts_with("SET k \"xxxx"), "{}", &command[..20]);
        assert!(command.ends_with("x…\" (52428800 bytes)"), "{command:.20}");
        assert!(command.len() < TRACE_TEXT_MAX_BYTES + 100);

        let many: Vec<Vec<u8>> = (0..100_000).map(|i| i.to_string().into_bytes()).collect();
        let command = render_command(&many);
        assert!(command.starts_with("0 1 2 3"));
        assert!(command.len() < TRACE_TEXT_MAX_BYTES + 100);
        let shown = command.split(' ').count() - 4;
        assert!(
            command.ends_with(&format!(" … ({} more arguments)", 100_000 - shown)),
            "{}",
            &command[command.len() - 60..]
        );

        let reply = Reply::Array((0..1_000_000).map(Reply::Integer).collect());
        let text = render_reply(&reply);
        assert!(text.starts_with("[(integer) 0, (integer) 1, "));
        assert!(text.ends_with(" more)]"), "{}", &text[text.len() - 40..]);
        assert!(text.len() < TRACE_TEXT_MAX_BYTES + 100);

        let nested = Reply::Array(vec![Reply::Array(vec![Reply::bulk(&value); 3]); 3]);
        let text = render_reply(&nested);
        assert!(
            text.len() < 2 * TRACE_TEXT_MAX_BYTES + 100,
            "{}",
            text.len()
        );
        assert!(
            text.ends_with("x…\" (52428800 bytes), … (2 more)], … (2 more)]"),
            "{}",
            &text[text.len() - 60..]
        );

        let error = Reply::error(format!("ERR {}", "é".repeat(TRACE_TEXT_MAX_BYTES)));
        let text = render_reply(&error);
        let size = 2 * TRACE_TEXT_MAX_BYTES + 4;
        assert!(
            text.starts_with("(error) ERR éé") && text.ends_with(&format!("é… ({size} bytes)")),
            "{}",
            &text[text.len() - 40..]
        );
    }

    /// Every text a scan eight bytes at a time must get right: each filler repeated 0..20
    /// times with each special at every offset, two specials side by side, and no special.
    pub(crate) fn texts_with_special_at_every_offset(
        specials: &[&str],
        fillers: &[&str],
    ) -> Vec<String> {
        let mut texts = Vec::new();
        for filler in fillers {
            for len in 0..20 {
                for at in 0..=len {
                    for special in specials {
                        texts.push(format!(
                            "{}{special}{}",
                            filler.repeat(at),
                            filler.repeat(len - at)
                        ));
                        texts.push(format!("{}{special}{special}", filler.repeat(at)));
                        texts.push(filler.repeat(len));
                    }
                }
            }
        }
        texts
    }
}
