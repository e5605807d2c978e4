//! `events.txt`: the trace as a person reads it, one event a line
//! (`  1027.066 ms  client-2  acquired token=...`), cut into windows around each violation.

use std::fmt::Write;

use model::history::{Event, EventKind};
use model::result::Violation;
use serde_json::Value;

/// One event on one line, without the time and node columns.
pub fn describe(event: &Event) -> String {
    match &event.kind {
        EventKind::AcquireStarted { attempt } => format!("acquire_started attempt={attempt}"),
        EventKind::Acquired { token, fence } => match fence {
            Some(fence) => format!("acquired token={token} fence={fence}"),
            None => format!("acquired token={token}"),
        },
        EventKind::AcquireFailed { reason } => format!("acquire_failed: {reason}"),
        EventKind::AcquireUnknown { reason, lease_ms } => {
            format!("acquire_unknown (may hold it for {lease_ms} ms): {reason}")
        }
        EventKind::Released { ok, detail } => format!(
            "released {}{}",
            if *ok { "ok" } else { "FAILED" },
            if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            }
        ),
        EventKind::CommandSent { server, command } => format!("→ {server}  {command}"),
        EventKind::CommandReply { server, reply } => format!("← {server}  {reply}"),
        EventKind::CommandFailed {
            server,
            command,
            error,
        } => format!("✗ {server}  {command}  ({error})"),
        EventKind::Executed {
            client,
            command,
            reply,
        } => format!("executed for {client}: {command} ⇒ {reply}"),
        EventKind::KeyOwner { key, owner, by } => format!(
            "key {key} now owned by {} (by {by})",
            owner.as_deref().unwrap_or("nobody")
        ),
        EventKind::ResourceWrite {
            client,
            value,
            based_on_version,
            version,
            fence,
            lost_update,
        } => format!(
            "resource write by {client}: value={value} version {based_on_version}→{version}{}{}",
            fence.map(|f| format!(" fence={f}")).unwrap_or_default(),
            if *lost_update { "  LOST UPDATE" } else { "" }
        ),
        EventKind::Fault {
            fault,
            phase,
            detail,
        } => format!("fault {fault} {}: {detail}", phase.as_str()),
        // Everything else (and event kinds added later): the name, then its fields.
        _ => generic(event),
    }
}

/// `name key=value ...` from the event's JSON form.
fn generic(event: &Event) -> String {
    let mut out = event.name().to_string();
    if let Ok(Value::Object(map)) = serde_json::to_value(event) {
        for (key, value) in map {
            if matches!(key.as_str(), "t_us" | "node" | "thread" | "event") {
                continue;
            }
            match value {
                Value::String(s) => {
                    let _ = write!(out, " {key}={s}");
                }
                other => {
                    let _ = write!(out, " {key}={other}");
                }
            }
        }
    }
    out
}

/// `  1027.066 ms  client-2  acquired token=...`
pub fn line(event: &Event, node_width: usize) -> String {
    format!(
        "{:>12.3} ms  {:<node_width$}  {}",
        event.t_ms(),
        event.owner(),
        describe(event)
    )
}

/// The event a violation points at: among the events at exactly its time, the last one observed
/// by a node it names (the `acquired` of the second holder, say), else the last one at that
/// time, else the first event after it.
fn index_of(events: &[Event], v: &Violation) -> usize {
    let t_us = (v.t_ms * 1000.0).round() as u64;
    let from = events.partition_point(|e| e.t_us < t_us);
    let to = events.partition_point(|e| e.t_us <= t_us);
    (from..to)
        .rev()
        .find(|&i| v.nodes.contains(&events[i].owner()) || v.nodes.contains(&events[i].node))
        .or_else(|| (from < to).then(|| to - 1))
        .unwrap_or(from)
        .min(events.len().saturating_sub(1))
}

/// The readable log: for each violation, `before` events before its event and `after` after it,
/// the violation's own event marked `>>`. Windows that overlap are merged.
pub fn around_violations(
    title: &str,
    events: &[Event],
    violations: &[Violation],
    before: usize,
    after: usize,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    if violations.is_empty() {
        let _ = writeln!(
            out,
            "\nNo violations in this run ({} events): the full trace is in trace.jsonl.",
            events.len()
        );
        return out;
    }
    let node_width = events.iter().map(|e| e.owner().len()).max().unwrap_or(8);
    // (window start, window end (exclusive), violations it shows)
    let mut windows: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for (i, v) in violations.iter().enumerate() {
        let at = index_of(events, v);
        let from = at.saturating_sub(before);
        let to = (at + 1 + after).min(events.len());
        match windows.last_mut() {
            Some(last) if from <= last.1 => {
                last.1 = last.1.max(to);
                last.2.push(i);
            }
            _ => windows.push((from, to, vec![i])),
        }
    }
    let _ = writeln!(
        out,
        "{} violation(s); {} events before and {} after each (>> marks the violation's event; the full trace is in trace.jsonl)",
        violations.len(),
        before,
        after
    );
    for (from, to, shown) in windows {
        let _ = writeln!(out);
        let marks: Vec<(usize, usize)> = shown
            .iter()
            .map(|&i| (index_of(events, &violations[i]), i + 1))
            .collect();
        for &i in &shown {
            let v = &violations[i];
            let _ = writeln!(
                out,
                "== violation {}: {} at {:.3} ms [{}]: {}",
                i + 1,
                v.kind,
                v.t_ms,
                v.nodes.join(", "),
                v.detail
            );
        }
        if from > 0 {
            let _ = writeln!(out, "   … {from} earlier events");
        }
        for (i, event) in events.iter().enumerate().take(to).skip(from) {
            let numbers: Vec<String> = marks
                .iter()
                .filter(|(at, _)| *at == i)
                .map(|(_, n)| n.to_string())
                .collect();
            if numbers.is_empty() {
                let _ = writeln!(out, "  {}", line(event, node_width));
            } else {
                let _ = writeln!(
                    out,
                    ">>{}   ◀ violation {}",
                    line(event, node_width),
                    numbers.join(", ")
                );
            }
        }
        if to < events.len() {
            let _ = writeln!(out, "   … {} later events", events.len() - to);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_us: u64, node: &str, kind: EventKind) -> Event {
        Event {
            t_us,
            node: node.into(),
            thread: None,
            kind,
        }
    }

    #[test]
    fn lines_read_like_a_log() {
        let e = ev(
            1_027_066,
            "client-2",
            EventKind::Acquired {
                token: "t2".into(),
                fence: None,
            },
        );
        assert_eq!(line(&e, 8), "    1027.066 ms  client-2  acquired token=t2");
        let e = ev(5, "client-1", EventKind::ReleaseStarted);
        assert_eq!(describe(&e), "release_started");
        let e = ev(5, "client-1", EventKind::ClientDone);
        assert_eq!(describe(&e), "client_done");
    }

    #[test]
    fn windows_surround_each_violation_and_merge() {
        let events: Vec<Event> = (0..100)
            .map(|i| {
                ev(
                    i * 1000,
                    "client-1",
                    EventKind::AcquireStarted { attempt: i as u32 },
                )
            })
            .collect();
        let v = |t_ms: f64| Violation {
            kind: "mutual_exclusion".into(),
            t_ms,
            nodes: vec!["client-1".into(), "client-2".into()],
            detail: "both".into(),
        };
        let text = around_violations("t", &events, &[v(50.0), v(52.0), v(95.0)], 5, 2);
        // Two windows: 45..=54 (merged) and 90..=97.
        assert_eq!(text.matches("== violation").count(), 3);
        assert!(
            text.contains(
                ">>      50.000 ms  client-1  acquire_started attempt=50   ◀ violation 1\n"
            )
        );
        assert!(text.contains("   … 45 earlier events"));
        assert!(text.contains("attempt=54\n") && !text.contains("attempt=55\n"));
        assert!(text.contains("attempt=97\n") && !text.contains("attempt=98\n"));
        assert!(text.contains("   … 2 later events"));
        let none = around_violations("t", &events, &[], 5, 2);
        assert!(none.contains("No violations"));
    }
}
