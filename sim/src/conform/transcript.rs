//! From MONITOR lines to what the comparison looks at: per master, the lock's commands with
//! random values and absolute times abstracted, plus the attempts and the delays between them.
//!
//! A MONITOR line is `seconds.micros [db who] "arg" ...` (`replicationFeedMonitors`,
//! replication.c:562-601), `who` an `ip:port`, `unix:path` or `lua`. Both sides produce such
//! lines (the real library's against `locksim serve`, the model's against the model server
//! itself), so one parser serves both.

use std::collections::BTreeMap;

use super::situation::Library;

/// One command as MONITOR showed it.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub at_us: i64,
    /// `None`: a script's `redis.call`; otherwise the connection's address.
    pub who: Option<String>,
    pub argv: Vec<Vec<u8>>,
}

/// Parses one MONITOR line (with or without its leading `+`).
pub fn parse_line(text: &str) -> Option<Line> {
    let text = text.strip_prefix('+').unwrap_or(text);
    let (stamp, rest) = text.split_once(' ')?;
    let (secs, micros) = stamp.split_once('.')?;
    let at_us = secs.parse::<i64>().ok()? * 1_000_000 + micros.parse::<i64>().ok()?;
    let rest = rest.strip_prefix('[')?;
    let (inside, args) = rest.split_once("] ")?;
    let (_db, who) = inside.split_once(' ')?;
    let who = (who != "lua").then(|| who.to_string());
    Some(Line {
        at_us,
        who,
        argv: unquote_all(args)?,
    })
}

/// The arguments `sdscatrepr` wrote, each in double quotes.
fn unquote_all(text: &str) -> Option<Vec<Vec<u8>>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b' ' {
            i += 1;
            continue;
        }
        if b[i] != b'"' {
            return None;
        }
        i += 1;
        let mut arg = Vec::new();
        loop {
            match *b.get(i)? {
                b'"' => {
                    i += 1;
                    break;
                }
                b'\\' => {
                    let escaped = *b.get(i + 1)?;
                    i += 2;
                    arg.push(match escaped {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'a' => 0x07,
                        b'b' => 0x08,
                        b'x' => {
                            let hex = std::str::from_utf8(b.get(i..i + 2)?).ok()?;
                            i += 2;
                            u8::from_str_radix(hex, 16).ok()?
                        }
                        other => other,
                    });
                }
                other => {
                    arg.push(other);
                    i += 1;
                }
            }
        }
        out.push(arg);
    }
    Some(out)
}

/// The lock's commands among a master's lines, with their index: those naming one of `keys`
/// (or a SCRIPT command) from any connection but the harness's own (`skip`), and the script
/// calls that follow a kept EVAL/EVALSHA.
pub fn lock_lines<'a>(
    lines: &'a [Line],
    keys: &[String],
    skip: &[String],
) -> Vec<(usize, &'a Line)> {
    let mut out = Vec::new();
    let mut keep_script = false;
    for (index, line) in lines.iter().enumerate() {
        match &line.who {
            None => {
                if keep_script {
                    out.push((index, line));
                }
            }
            Some(who) => {
                let name = line.argv.first().map(|a| a.to_ascii_uppercase());
                let ours = !skip.contains(who)
                    && (name.as_deref() == Some(b"SCRIPT")
                        || line
                            .argv
                            .iter()
                            .skip(1)
                            .any(|a| keys.iter().any(|k| names(a, k))));
                keep_script = ours;
                if ours {
                    out.push((index, line));
                }
            }
        }
    }
    out
}

/// Whether `arg` is `key` or a name made from it (`key-<suffix>`: portalocker's private
/// response channels and connection names, `portalocker/redis.py:1110-1133, :2418`). A key
/// ending in `:` names every name that starts with it (RedissonFairLock's channel per waiter,
/// `redisson_lock__channel:{name}:<uuid>:<thread>`).
fn names(arg: &[u8], key: &str) -> bool {
    if key.ends_with(':') {
        return arg.len() > key.len() && arg.starts_with(key.as_bytes());
    }
    arg.strip_prefix(key.as_bytes())
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"-"))
}

/// Gives random values and absolute times placeholders, in order of first appearance.
#[derive(Default)]
pub struct Abstractor {
    values: BTreeMap<Vec<u8>, usize>,
    /// The arguments of the last client command (a script's calls follow their EVAL).
    caller_args: Vec<Vec<u8>>,
    /// The lock's names: `key-<random>` keeps `key-` and abstracts the rest.
    keys: Vec<String>,
}

/// Redis command containers whose second word is a subcommand.
const CONTAINERS: &[&str] = &["SCRIPT", "CLIENT", "CONFIG", "OBJECT"];

impl Abstractor {
    /// One line as compared: `SET lock <V1> NX PX 10000`, `lua: get lock`, script texts as
    /// `<script 1a2b3c4d>` (the first 8 hex of their sha1: equal texts, equal names).
    ///
    /// A number a script computed (in one of its calls but in none of its EVAL's arguments,
    /// such as `PTTL + ARGV[2]`) depends on when the server ran it: it shows as `<computed>`.
    pub fn render(&mut self, line: &Line) -> String {
        if line.who.is_some() {
            self.caller_args = line.argv.clone();
        }
        let mut words = Vec::with_capacity(line.argv.len());
        for (i, arg) in line.argv.iter().enumerate() {
            let word = if i == 0
                || (i == 1
                    && CONTAINERS
                        .iter()
                        .any(|c| c.as_bytes().eq_ignore_ascii_case(&line.argv[0])))
            {
                String::from_utf8_lossy(arg).to_ascii_uppercase()
            } else if line.who.is_none()
                && is_number(arg)
                && !self.caller_args.iter().any(|a| a == arg)
            {
                "<computed>".to_string()
            } else {
                self.word(arg)
            };
            words.push(word);
        }
        let text = words.join(" ");
        match line.who {
            None => format!("lua: {text}"),
            Some(_) => text,
        }
    }

    /// An abstractor that knows the lock's names (see `keys`).
    pub fn with_keys(keys: &[String]) -> Abstractor {
        Abstractor {
            keys: keys.to_vec(),
            ..Abstractor::default()
        }
    }

    fn word(&mut self, arg: &[u8]) -> String {
        if let Some(key) = self
            .keys
            .iter()
            .find(|k| names(arg, k) && is_random_value(&arg[(k.len() + 1).min(arg.len())..]))
        {
            let key = key.clone();
            let rest = arg[key.len() + 1..].to_vec();
            return format!("{key}-{}", self.word(&rest));
        }
        if arg.first() == Some(&b'{')
            && let Ok(serde_json::Value::Object(_)) = serde_json::from_slice(arg)
        {
            return self.json(arg);
        }
        if is_random_value(arg) {
            let next = self.values.len() + 1;
            let n = *self.values.entry(arg.to_vec()).or_insert(next);
            return format!("<V{n}>");
        }
        if is_absolute_time(arg) {
            return "<T>".to_string();
        }
        // A name made of parts, one of them random (Redisson's `uuid:threadId`, its unlock
        // latch `redisson_unlock_latch:{lock}:<request id>`): the random parts abstracted, the
        // others (a prefix such as `redisson_lock__channel`, without digits) kept.
        let random_part =
            |part: &[u8]| is_random_value(part) && part.iter().any(u8::is_ascii_digit);
        if arg.contains(&b':')
            && !arg.iter().any(|b| b.is_ascii_whitespace() || *b == b'"')
            && arg.split(|b| *b == b':').any(random_part)
        {
            return arg
                .split(|b| *b == b':')
                .map(|part| {
                    if random_part(part) {
                        self.word(part)
                    } else {
                        String::from_utf8_lossy(part).into_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join(":");
        }
        let text = String::from_utf8_lossy(arg);
        if arg.len() > 40 || arg.iter().any(|b| b.is_ascii_whitespace() || *b == b'"') {
            let sha = model::redis::lua::sha1_hex(arg);
            return format!("<script {}>", &sha[..8]);
        }
        if arg.is_empty() {
            return "\"\"".to_string();
        }
        text.into_owned()
    }
}

impl Abstractor {
    /// A JSON object as sent, each string in it abstracted as a word would be (portalocker's
    /// pings and holder records carry random channel names and holder ids).
    fn json(&mut self, arg: &[u8]) -> String {
        let text = String::from_utf8_lossy(arg);
        let mut out = String::new();
        let mut rest = text.as_ref();
        while let Some(start) = rest.find('"') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let Some(end) = after.find('"') else {
                out.push_str(&rest[start..]);
                return out;
            };
            let inner = &after[..end];
            rest = &after[end + 1..];
            // A member's name is the library's vocabulary, not a value.
            if rest.trim_start().starts_with(':') {
                out.push_str(&format!("\"{inner}\""));
                continue;
            }
            let word = self.word(inner.as_bytes());
            if word == inner {
                out.push_str(&format!("\"{inner}\""));
            } else {
                out.push_str(&word);
            }
        }
        out.push_str(rest);
        out
    }
}

/// Puts each run of consecutive lines starting with one of `any_order` in order: lines whose
/// relative order is a race (several processes answering one ping).
fn sort_races(lines: &mut [String], any_order: &[String]) {
    let racy = |l: &String| any_order.iter().any(|p| l.starts_with(p.as_str()));
    let mut i = 0;
    while i < lines.len() {
        let start = i;
        while i < lines.len() && racy(&lines[i]) {
            i += 1;
        }
        lines[start..i].sort();
        i = i.max(start + 1);
    }
}

/// Collapses each run of three or more identical lines starting with one of `polls` into one
/// marked ` (polled)`: a wait whose number of polls follows the machine's timing.
fn collapse_polls(lines: Vec<String>, polls: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let mut j = i + 1;
        while j < lines.len() && lines[j] == lines[i] {
            j += 1;
        }
        if j - i >= 3 && polls.iter().any(|p| lines[i].starts_with(p.as_str())) {
            out.push(format!("{} (polled)", lines[i]));
        } else {
            out.extend(lines[i..j].iter().cloned());
        }
        i = j;
    }
    out
}

/// A lock value a library draws: 16 to 64 characters of hex, base64, base32 or a UUID, not a
/// script's sha1 (40 lower-case hex digits, compared as they are) and not a number.
fn is_random_value(arg: &[u8]) -> bool {
    let sha1 = arg.len() == 40 && arg.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (16..=64).contains(&arg.len())
        && !sha1
        && !arg.iter().all(u8::is_ascii_digit)
        && arg
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-'))
}

/// An integer of at least three digits (small ones are flags and counts).
fn is_number(arg: &[u8]) -> bool {
    let digits = arg.strip_prefix(b"-").unwrap_or(arg);
    digits.len() >= 3 && digits.iter().all(u8::is_ascii_digit)
}

/// A Unix time in ms (13 digits) or seconds (10 digits).
fn is_absolute_time(arg: &[u8]) -> bool {
    arg.iter().all(u8::is_ascii_digit)
        && (arg.len() == 13 || arg.len() == 10)
        && arg.first() == Some(&b'1')
}

/// What one side did, ready to compare.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transcript {
    /// Per master, the abstracted lock commands.
    pub masters: Vec<Vec<String>>,
    /// Acquire attempts seen on the first master.
    pub attempts: usize,
    /// The time between one attempt and the next of the same operation, ms.
    pub delays_ms: Vec<f64>,
    /// The time between one background refresh (a watchdog's renewal) and the next, ms.
    pub refresh_delays_ms: Vec<f64>,
    /// The caller's outcome of each operation (`acquire: granted`).
    pub outcomes: Vec<String>,
    /// The outcomes' details (exception texts, the model's reasons), for the report only.
    pub details: Vec<String>,
}

/// The lines of the first master each operation spans, `[start, end)` by index, from the
/// operations' `(start, end)` in µs on the lines' clock.
pub fn op_ranges(lines: &[Line], windows: &[(i64, i64)]) -> Vec<(usize, usize)> {
    windows
        .iter()
        .map(|&(start, end)| {
            let first = lines
                .iter()
                .position(|l| l.at_us >= start)
                .unwrap_or(lines.len());
            let last = lines
                .iter()
                .rposition(|l| l.at_us <= end)
                .map_or(0, |i| i + 1);
            (first, last.max(first))
        })
        .collect()
}

/// Builds the transcript of one side from each master's raw lines; `ops` are the lines of the
/// first master each operation spans (`op_ranges`): delays are measured between the attempts
/// of one operation, and between the successive refreshes (lines starting as one of `refresh`)
/// that run in the background, outside every operation. `skip[m]`: the harness's own
/// connections on master `m`.
pub fn transcript(
    per_master: &[Vec<Line>],
    library: &Library,
    skip: &[Vec<String>],
    ops: &[(usize, usize)],
) -> Transcript {
    let (keys, attempt, refresh) = (&library.keys, &library.attempt, &library.refresh);
    let mut abstractor = Abstractor::with_keys(keys);
    let mut out = Transcript::default();
    // (time, operation) of each attempt on the first master.
    let mut attempts = Vec::new();
    // Times of the background refreshes on the first master.
    let mut refreshes = Vec::new();
    for (m, lines) in per_master.iter().enumerate() {
        let mut rendered: Vec<String> = Vec::new();
        let own = skip.get(m).map_or(&[][..], Vec::as_slice);
        for (index, line) in lock_lines(lines, keys, own) {
            let text = abstractor.render(line);
            let op = ops.iter().rposition(|(a, b)| *a <= index && index < *b);
            if m == 0 && attempt.iter().any(|p| text.starts_with(p.as_str())) {
                attempts.push((line.at_us, op));
            }
            // A refresh sent again after the `SCRIPT LOAD` its NOSCRIPT asked for is the same
            // refresh.
            let retried = rendered
                .last()
                .is_some_and(|l| l.starts_with("SCRIPT LOAD"));
            if m == 0
                && op.is_none()
                && !retried
                && refresh.iter().any(|p| text.starts_with(p.as_str()))
            {
                refreshes.push(line.at_us);
            }
            rendered.push(text);
        }
        sort_races(&mut rendered, &library.any_order);
        out.masters.push(collapse_polls(rendered, &library.polls));
    }
    out.refresh_delays_ms = refreshes
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1000.0)
        .collect();
    out.attempts = attempts.len();
    out.delays_ms = attempts
        .windows(2)
        .filter(|w| w[0].1.is_some() && w[0].1 == w[1].1)
        .map(|w| (w[1].0 - w[0].0) as f64 / 1000.0)
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_lines_parse_and_abstract() {
        let line = parse_line(
            "+1700000000.000042 [0 127.0.0.1:5000] \"SET\" \"lock\" \"8f14e45fceea167a5a36dedd4bea2543\" \"NX\" \"PX\" \"10000\"",
        )
        .unwrap();
        assert_eq!(line.at_us, 1_700_000_000_000_042);
        assert_eq!(line.who.as_deref(), Some("127.0.0.1:5000"));
        let lua = parse_line("1.000000 [0 lua] \"get\" \"a b\\n\\x01\"").unwrap();
        assert_eq!(lua.argv[1], b"a b\n\x01");
        let mut a = Abstractor::default();
        assert_eq!(a.render(&line), "SET lock <V1> NX PX 10000");
        assert_eq!(a.render(&line), "SET lock <V1> NX PX 10000");
        assert_eq!(
            a.render(&lua),
            "lua: GET <script 8a1b0c3e>"
                .replace("8a1b0c3e", &model::redis::lua::sha1_hex(b"a b\n\x01")[..8])
        );
        let sha = parse_line(
            "1.000000 [0 1:1] \"evalsha\" \"e0e1f9fabfc9d4800c877a703b823ac0578ff8db\" \"1\" \"lock\" \"1700000000123\"",
        )
        .unwrap();
        assert_eq!(
            a.render(&sha),
            "EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 1 lock <T>"
        );
        let parts = parse_line(
            "1.000000 [0 1:1] \"evalsha\" \"x\" \"1\" \"lock\" \"8f14e45fceea167a5a36dedd4bea2543:1\" \"redisson_unlock_latch:{lock}:0123456789abcdef0123456789abcdef\" \"redisson_lock__channel:{lock}\"",
        )
        .unwrap();
        assert_eq!(
            a.render(&parts),
            "EVALSHA x 1 lock <V1>:1 redisson_unlock_latch:{lock}:<V2> redisson_lock__channel:{lock}"
        );
    }

    fn library(attempt: &[&str], any_order: &[&str], polls: &[&str]) -> Library {
        let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Library {
            id: "test".into(),
            runtime: super::super::situation::Runtime::Source,
            driver: String::new(),
            scheme: serde_json::Map::new(),
            key: "lock".into(),
            keys: vec!["lock".into()],
            attempt: strings(attempt),
            any_order: strings(any_order),
            polls: strings(polls),
            delay_ms: None,
            refresh: Vec::new(),
            refresh_ms: None,
            command_timeout_ms: None,
            source: String::new(),
            scripts: Vec::new(),
        }
    }

    /// portalocker's lines: names made from the channel, JSON payloads with random channel
    /// names and holder ids, replies racing each other, a poll of variable length.
    #[test]
    fn channel_names_json_payloads_races_and_polls_are_abstracted() {
        let id = "0123456789abcdef0123456789abcdef";
        let other = "fedcba9876543210fedcba9876543210";
        let rc = "lock-00112233445566778899aabbccddeeff";
        let record = |holder: &str, mode: &str| {
            format!(
                "{{\\\"holder_id\\\": \\\"{holder}\\\", \\\"mode\\\": \\\"{mode}\\\", \\\"protocol\\\": 1}}"
            )
        };
        let text = [
            format!("1.000000 [0 a:1] \"CLIENT\" \"SETNAME\" \"lock-lock-{id}\""),
            "1.000001 [0 a:1] \"SUBSCRIBE\" \"lock\"".to_string(),
            format!("1.000002 [0 b:1] \"CLIENT\" \"SETNAME\" \"lock-lock-{other}\""),
            format!("1.000003 [0 b:2] \"SUBSCRIBE\" \"{rc}\""),
            format!(
                "1.000004 [0 b:3] \"PUBLISH\" \"lock\" \"{{\\\"message\\\": \\\"ping\\\", \\\"response_channel\\\": \\\"{rc}\\\"}}\""
            ),
            format!(
                "1.000005 [0 b:3] \"PUBLISH\" \"{rc}\" \"{}\"",
                record(other, "pending")
            ),
            format!(
                "1.000006 [0 a:2] \"PUBLISH\" \"{rc}\" \"{}\"",
                record(id, "exclusive")
            ),
            "1.000007 [0 b:3] \"PUBSUB\" \"NUMSUB\" \"lock\"".to_string(),
            "1.000008 [0 b:3] \"PUBSUB\" \"NUMSUB\" \"lock\"".to_string(),
            "1.000009 [0 b:3] \"PUBSUB\" \"NUMSUB\" \"lock\"".to_string(),
            "1.000010 [0 b:3] \"PUBSUB\" \"NUMSUB\" \"other\"".to_string(),
        ];
        let lines: Vec<Line> = text.iter().map(|l| parse_line(l).unwrap()).collect();
        let t = transcript(
            &[lines],
            &library(
                &["CLIENT SETNAME lock-lock-"],
                &["PUBLISH lock-"],
                &["PUBSUB NUMSUB"],
            ),
            &[],
            &[(0, usize::MAX)],
        );
        assert_eq!(
            t.masters[0],
            [
                "CLIENT SETNAME lock-lock-<V1>",
                "SUBSCRIBE lock",
                "CLIENT SETNAME lock-lock-<V2>",
                "SUBSCRIBE lock-<V3>",
                "PUBLISH lock {\"message\": \"ping\", \"response_channel\": lock-<V3>}",
                "PUBLISH lock-<V3> {\"holder_id\": <V1>, \"mode\": \"exclusive\", \"protocol\": 1}",
                "PUBLISH lock-<V3> {\"holder_id\": <V2>, \"mode\": \"pending\", \"protocol\": 1}",
                "PUBSUB NUMSUB lock (polled)",
            ]
        );
        assert_eq!(t.attempts, 2);
    }

    #[test]
    fn a_harness_address_is_skipped_only_on_its_own_master() {
        let set =
            |who: &str| parse_line(&format!("1.000000 [0 {who}] \"SET\" \"lock\" \"x\"")).unwrap();
        // The harness's admin connection to master 0 and the driver's to master 1 share a
        // local port: the driver's line on master 1 is the lock's.
        let per_master = [vec![set("127.0.0.1:40000")], vec![set("127.0.0.1:40000")]];
        let t = transcript(
            &per_master,
            &library(&["SET"], &[], &[]),
            &[vec!["127.0.0.1:40000".to_string()], vec![]],
            &[(0, usize::MAX)],
        );
        assert!(t.masters[0].is_empty(), "{:?}", t.masters[0]);
        assert_eq!(t.masters[1].len(), 1, "{:?}", t.masters[1]);
    }

    #[test]
    fn only_the_lock_commands_are_kept_with_their_script_calls() {
        let lines: Vec<Line> = [
            "1.000000 [0 a:1] \"HELLO\" \"3\"",
            "1.000001 [0 a:1] \"EVAL\" \"return redis.call('get', KEYS[1])\" \"1\" \"lock\"",
            "1.000002 [0 lua] \"get\" \"lock\"",
            "1.000003 [0 admin:1] \"SET\" \"lock\" \"x\"",
            "1.000004 [0 a:1] \"GET\" \"other\"",
            "1.000005 [0 a:1] \"SCRIPT\" \"LOAD\" \"return 1\"",
        ]
        .iter()
        .map(|l| parse_line(l).unwrap())
        .collect();
        let kept = lock_lines(&lines, &["lock".to_string()], &["admin:1".to_string()]);
        assert_eq!(kept.len(), 3);
        assert_eq!(kept[1].0, 2);
        let t = transcript(
            &[lines],
            &library(&["EVAL"], &[], &[]),
            &[vec!["admin:1".to_string()]],
            &[(0, usize::MAX)],
        );
        assert_eq!(t.attempts, 1);
        assert_eq!(t.masters[0][1], "lua: GET lock");
        assert_eq!(
            t.masters[0][2],
            "SCRIPT LOAD <script e0e1f9fa>"
                .replace("e0e1f9fa", &model::redis::lua::sha1_hex(b"return 1")[..8])
        );
    }

    /// Refreshes are timed from one background refresh to the next: a refresh sent again after
    /// the `SCRIPT LOAD` its NOSCRIPT asked for is the same one, and a matching line inside an
    /// operation is that operation's, not a refresh.
    #[test]
    fn refreshes_are_timed_in_the_background_only() {
        let lines: Vec<Line> = [
            "1.000000 [0 a:1] \"SET\" \"lock\" \"v\"",
            "1.800000 [0 a:1] \"EVALSHA\" \"r\" \"1\" \"lock\"",
            "1.800100 [0 a:1] \"SCRIPT\" \"LOAD\" \"return 1\"",
            "1.800200 [0 a:1] \"EVALSHA\" \"r\" \"1\" \"lock\"",
            "2.600000 [0 a:1] \"EVALSHA\" \"r\" \"1\" \"lock\"",
            "3.000000 [0 a:1] \"EVALSHA\" \"r\" \"1\" \"lock\"",
            "3.500000 [0 a:1] \"EVALSHA\" \"r\" \"1\" \"lock\"",
        ]
        .iter()
        .map(|l| parse_line(l).unwrap())
        .collect();
        let mut refreshing = library(&["SET lock"], &[], &[]);
        refreshing.refresh = vec!["EVALSHA r".to_string()];
        let t = transcript(&[lines], &refreshing, &[], &[(0, 1), (5, 6)]);
        assert_eq!(t.attempts, 1);
        assert_eq!(t.refresh_delays_ms, vec![800.0, 900.0]);
    }
}
