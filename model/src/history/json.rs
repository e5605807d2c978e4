//! The canonical JSON line of an event, written by hand: the trace hash serialises every event of
//! every run, and serde's `flatten` (a map serializer per event) was half of its cost (issue 15).
//! The bytes are exactly serde_json's for the derived `Serialize` of [`Event`] (field order,
//! skipped `None`s, string escapes); `writes_what_serde_json_writes` holds the two together.

use super::{Event, EventKind, HEX_DIGITS};

/// Appends `event` as one JSON object (no newline) to `out`.
pub fn write_event(out: &mut Vec<u8>, event: &Event) {
    let mut w = Object::open(out, event.t_us);
    w.str("node", &event.node);
    if let Some(thread) = event.thread {
        w.number("thread", thread);
    }
    // An event's name is a snake_case identifier of ours: nothing to escape.
    w.plain_str("event", event.name());
    match &event.kind {
        EventKind::AcquireStarted { attempt } => w.number("attempt", *attempt),
        EventKind::Acquired { token, fence } => {
            w.str("token", token);
            w.opt_number("fence", *fence);
        }
        EventKind::AcquireFailed { reason } => w.str("reason", reason),
        EventKind::AcquireUnknown { reason, lease_ms } => {
            w.str("reason", reason);
            w.number("lease_ms", *lease_ms);
        }
        EventKind::ReleaseStarted | EventKind::ExtendStarted | EventKind::ClientDone => {}
        EventKind::Released { ok, detail } | EventKind::Extended { ok, detail } => {
            w.bool("ok", *ok);
            w.str("detail", detail);
        }
        EventKind::CommandSent { server, command } => {
            w.str("server", server);
            w.str("command", command);
        }
        EventKind::CommandReply { server, reply } => {
            w.str("server", server);
            w.str("reply", reply);
        }
        EventKind::CommandFailed {
            server,
            command,
            error,
        } => {
            w.str("server", server);
            w.str("command", command);
            w.str("error", error);
        }
        EventKind::Executed {
            client,
            command,
            reply,
        } => {
            w.str("client", client);
            w.str("command", command);
            w.str("reply", reply);
        }
        EventKind::KeyOwner { key, owner, by } => {
            w.str("key", key);
            if let Some(owner) = owner {
                w.str("owner", owner);
            }
            w.str("by", by);
        }
        EventKind::ResourceRead {
            client,
            value,
            version,
            fence,
        } => {
            w.str("client", client);
            w.number("value", *value);
            w.number("version", *version);
            w.opt_number("fence", *fence);
        }
        EventKind::ResourceWrite {
            client,
            value,
            based_on_version,
            version,
            fence,
            lost_update,
        } => {
            w.str("client", client);
            w.number("value", *value);
            w.number("based_on_version", *based_on_version);
            w.number("version", *version);
            w.opt_number("fence", *fence);
            w.bool("lost_update", *lost_update);
        }
        EventKind::ResourceRejected {
            client,
            op,
            fence,
            max_fence,
        } => {
            w.str("client", client);
            w.str("op", op);
            w.number("fence", *fence);
            w.number("max_fence", *max_fence);
        }
        EventKind::Replicated {
            master,
            command,
            offset,
        } => {
            w.str("master", master);
            w.str("command", command);
            w.number("offset", *offset);
        }
        EventKind::Replication { what, detail } => {
            w.str("what", what);
            w.str("detail", detail);
        }
        EventKind::Sentinel {
            what,
            master,
            detail,
        } => {
            w.str("what", what);
            w.str("master", master);
            w.str("detail", detail);
        }
        EventKind::Fault {
            fault,
            phase,
            detail,
        } => {
            w.str("fault", fault);
            w.str("phase", phase.as_str());
            w.str("detail", detail);
        }
    }
    w.close();
}

/// A JSON object being written: `{"t_us":1,"b":"x"}`, compact, as `serde_json::to_writer`.
/// Every event's first field is `t_us`, so each later one starts with a comma; the writers are
/// inlined where their key is a literal, so a key is copied as a constant (a field was four
/// pushes and a `memcpy` call before its value, issue 32).
struct Object<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut Vec<u8>, t_us: u64) -> Object<'a> {
        out.extend_from_slice(b"{\"t_us\":");
        out.extend_from_slice(itoa::Buffer::new().format(t_us).as_bytes());
        Object { out }
    }

    #[inline(always)]
    fn key(&mut self, key: &str) {
        self.out.extend_from_slice(b",\"");
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    #[inline(always)]
    fn str(&mut self, key: &str, value: &str) {
        self.key(key);
        escape_into(self.out, value);
    }

    /// A string known to need no escape.
    #[inline(always)]
    fn plain_str(&mut self, key: &str, value: &str) {
        debug_assert!(!value.bytes().any(needs_escape), "{value:?}");
        self.key(key);
        self.out.push(b'"');
        self.out.extend_from_slice(value.as_bytes());
        self.out.push(b'"');
    }

    #[inline(always)]
    fn number(&mut self, key: &str, value: impl itoa::Integer) {
        self.key(key);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    #[inline(always)]
    fn opt_number(&mut self, key: &str, value: Option<u64>) {
        if let Some(value) = value {
            self.number(key, value);
        }
    }

    #[inline(always)]
    fn bool(&mut self, key: &str, value: bool) {
        self.key(key);
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// A JSON string as serde_json writes it: `"` and `\` escaped, control characters as `\b \t \n
/// \f \r` or `\u00xx` (lower-case hex), everything else (DEL and non-ASCII included) as is.
fn escape_into(out: &mut Vec<u8>, value: &str) {
    let bytes = value.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Runs of plain bytes are found eight at a time and copied at once: a rendered EVAL's
    // script is full of escapes, and its byte-by-byte walk was 6 % of a baseline run's
    // instructions (issue 32).
    let mut start = 0;
    let mut i = next_escape(bytes, 0);
    while i < bytes.len() {
        out.extend_from_slice(&bytes[start..i]);
        let b = bytes[i];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX_DIGITS[usize::from(b >> 4)],
                HEX_DIGITS[usize::from(b & 0xf)],
            ]),
        }
        start = i + 1;
        i = next_escape(bytes, start);
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether JSON must escape `b`: a control character, `"` or `\`.
#[cfg_attr(
    all(target_arch = "x86_64", not(test), not(debug_assertions)),
    allow(dead_code)
)]
fn needs_escape(b: u8) -> bool {
    (b < 0x20) | (b == b'"') | (b == b'\\')
}

/// The index of the first byte at or after `from` that JSON must escape, or `bytes.len()`.
#[cfg(target_arch = "x86_64")]
fn next_escape(bytes: &[u8], from: usize) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // The lanes of `block` that JSON must escape, one bit each: a control character is its own
    // unsigned minimum with 0x1f.
    // SAFETY: SSE2 is part of the x86-64 baseline.
    let flags = |block: __m128i| unsafe {
        let control = _mm_cmpeq_epi8(_mm_min_epu8(block, _mm_set1_epi8(0x1f)), block);
        let quote = _mm_cmpeq_epi8(block, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(block, _mm_set1_epi8(b'\\' as i8));
        _mm_movemask_epi8(_mm_or_si128(control, _mm_or_si128(quote, backslash))) as u32
    };
    // Sixteen bytes at a time with SSE2, which every x86-64 CPU has; the last few are checked
    // in a padded copy instead of one by one. Trace strings are short (a node's name, a
    // command), and their scan byte by byte past the last full word was a third of their
    // escaping (issue 32).
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 16) {
        // SAFETY: an unaligned load of the sixteen bytes of `chunk`.
        let mask = flags(unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) });
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
    }
    let rest = &bytes[i..];
    if rest.is_empty() {
        return i;
    }
    let mut padded = [b' '; 16];
    padded[..rest.len()].copy_from_slice(rest);
    // SAFETY: an unaligned load of the sixteen bytes of `padded`.
    let mask = flags(unsafe { _mm_loadu_si128(padded.as_ptr().cast()) });
    if mask != 0 {
        i + mask.trailing_zeros() as usize
    } else {
        bytes.len()
    }
}

/// The index of the first byte at or after `from` that JSON must escape, or `bytes.len()`.
#[cfg(not(target_arch = "x86_64"))]
fn next_escape(bytes: &[u8], from: usize) -> usize {
    next_escape_by_words(bytes, from)
}

/// [`next_escape`] eight bytes at a time, portably: a lane
/// is flagged when it is below 0x20 or, XORed with `"` or `\`, zero (`(x - 0x01…) & !x &
/// 0x80…`). A borrow can flag a lane above a flagged one, never below it, so the lowest flag
/// is exact (Anderson, "Bit Twiddling Hacks", "Determine if a word has a byte less than n").
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
fn next_escape_by_words(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    let below = |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGHS;
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let flags = below(word, 0x20)
            | below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1);
        if flags != 0 {
            return i + (flags.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && !needs_escape(bytes[i]) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::FaultPhase;

    /// Every variant, every optional field present and absent, and strings with every ASCII
    /// byte, non-ASCII text and escapes.
    fn every_kind() -> Vec<EventKind> {
        let all_ascii: String = (0u8..128).map(char::from).collect();
        let texts = [
            String::new(),
            all_ascii,
            "EVAL \"if redis.call('get',KEYS[1]) == ARGV[1]\\n\" 1 lock tok".to_string(),
            "caf\u{e9} \u{301}\u{200b}\u{1f512} \u{7f}".to_string(),
        ];
        let mut kinds = Vec::new();
        for t in &texts {
            let s = || t.clone();
            kinds.extend([
                EventKind::AcquireStarted { attempt: 7 },
                EventKind::Acquired {
                    token: s(),
                    fence: Some(u64::MAX),
                },
                EventKind::Acquired {
                    token: s(),
                    fence: None,
                },
                EventKind::AcquireFailed { reason: s() },
                EventKind::AcquireUnknown {
                    reason: s(),
                    lease_ms: 1000,
                },
                EventKind::ReleaseStarted,
                EventKind::Released {
                    ok: true,
                    detail: s(),
                },
                EventKind::ExtendStarted,
                EventKind::Extended {
                    ok: false,
                    detail: s(),
                },
                EventKind::CommandSent {
                    server: s(),
                    command: s(),
                },
                EventKind::CommandReply {
                    server: s(),
                    reply: s(),
                },
                EventKind::CommandFailed {
                    server: s(),
                    command: s(),
                    error: s(),
                },
                EventKind::Executed {
                    client: s(),
                    command: s(),
                    reply: s(),
                },
                EventKind::KeyOwner {
                    key: s(),
                    owner: Some(s()),
                    by: s(),
                },
                EventKind::KeyOwner {
                    key: s(),
                    owner: None,
                    by: s(),
                },
                EventKind::ResourceRead {
                    client: s(),
                    value: i64::MIN,
                    version: 0,
                    fence: Some(3),
                },
                EventKind::ResourceRead {
                    client: s(),
                    value: -1,
                    version: 9,
                    fence: None,
                },
                EventKind::ResourceWrite {
                    client: s(),
                    value: i64::MAX,
                    based_on_version: 4,
                    version: 5,
                    fence: Some(0),
                    lost_update: true,
                },
                EventKind::ResourceWrite {
                    client: s(),
                    value: 0,
                    based_on_version: 0,
                    version: 1,
                    fence: None,
                    lost_update: false,
                },
                EventKind::ResourceRejected {
                    client: s(),
                    op: s(),
                    fence: 1,
                    max_fence: 2,
                },
                EventKind::Replicated {
                    master: s(),
                    command: s(),
                    offset: -5,
                },
                EventKind::Replication {
                    what: s(),
                    detail: s(),
                },
                EventKind::Sentinel {
                    what: s(),
                    master: s(),
                    detail: s(),
                },
                EventKind::ClientDone,
                EventKind::Fault {
                    fault: s(),
                    phase: FaultPhase::Injected,
                    detail: s(),
                },
                EventKind::Fault {
                    fault: s(),
                    phase: FaultPhase::Healed,
                    detail: s(),
                },
            ]);
        }
        kinds
    }

    #[test]
    fn writes_what_serde_json_writes() {
        let kinds = every_kind();
        assert!(kinds.len() > 20 * 4);
        for (i, kind) in kinds.into_iter().enumerate() {
            for thread in [None, Some(2)] {
                let event = Event {
                    t_us: i as u64 * 1_000_003,
                    node: format!("client-{i}\t\"x\""),
                    thread,
                    kind: kind.clone(),
                };
                let mut ours = Vec::new();
                write_event(&mut ours, &event);
                let theirs = serde_json::to_vec(&event).unwrap();
                assert_eq!(
                    String::from_utf8(ours).unwrap(),
                    String::from_utf8(theirs).unwrap()
                );
            }
        }
    }

    /// The scans find an escape at every offset of a word or block, after plain bytes
    /// of every kind (those just above and below each escaped byte, DEL, non-ASCII), and two
    /// escapes side by side.
    #[test]
    fn escapes_anywhere_in_a_string_as_serde_json_does() {
        let specials = ["\"", "\\", "\n", "\u{1}", "\u{1f}", "\u{8}"];
        let fillers = [
            " ",
            "!",
            "#",
            "[",
            "]",
            "a",
            "\u{7f}",
            "\u{e9}",
            "\u{1f512}",
        ];
        // And at every offset of the sixteen-byte blocks x86-64 scans, up to the third block.
        let long = specials.iter().flat_map(|special| {
            (0..48).map(move |at| format!("{}{special}{}", "a".repeat(at), "~".repeat(47 - at)))
        });
        let texts = crate::history::tests::texts_with_special_at_every_offset(&specials, &fillers);
        for text in texts.into_iter().chain(long) {
            // The portable scan, which x86-64 does not use, finds what the one in use finds.
            for from in 0..=text.len() {
                let (bytes, by_words) = (text.as_bytes(), next_escape_by_words);
                assert_eq!(next_escape(bytes, from), by_words(bytes, from), "{text:?}");
            }
            let mut ours = Vec::new();
            escape_into(&mut ours, &text);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&text).unwrap()
            );
        }
    }
}
