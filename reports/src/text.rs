//! The readable summary `locksim run` prints.

use std::fmt::Write;

use model::result::{Quantiles, RunResult};

fn quantiles(q: &Quantiles) -> String {
    format!(
        "p50 {:.1} / p90 {:.1} / p99 {:.1} / max {:.1} ms",
        q.p50, q.p90, q.p99, q.max
    )
}

pub fn summary(r: &RunResult, description: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} — scheme {} — seed {}",
        r.scenario, r.scheme, r.seed
    );
    if !description.is_empty() {
        let _ = writeln!(out, "  {description}");
    }
    let v = &r.verdicts;
    let _ = writeln!(
        out,
        "  mutual exclusion: {}   resource safety: {}   liveness: {}",
        v.mutual_exclusion.as_str().to_uppercase(),
        v.resource_safety.as_str().to_uppercase(),
        v.liveness.as_str().to_uppercase()
    );
    let c = &r.counts;
    let _ = writeln!(
        out,
        "  {} acquisitions, {} failed; {} lock overlaps, {} lost updates, {} stale writes rejected, {} foreign releases, {} faults",
        c.acquisitions,
        c.acquire_failures,
        c.lock_overlaps,
        c.resource_conflicts,
        c.stale_writes_rejected,
        c.foreign_releases,
        c.faults_injected
    );
    let _ = writeln!(
        out,
        "  acquire latency {}",
        quantiles(&r.latency_ms.acquire)
    );
    let _ = writeln!(
        out,
        "  release latency {}",
        quantiles(&r.latency_ms.release)
    );
    if !r.max_wait_ms_by_client.is_empty() {
        let waits: Vec<String> = r
            .max_wait_ms_by_client
            .iter()
            .map(|(client, ms)| format!("{client} {ms:.1}"))
            .collect();
        let _ = writeln!(
            out,
            "  longest wait for the lock {:.1} ms ({} ms)",
            r.max_wait_ms,
            waits.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "  {:.1} acquisitions/s over {:.3} simulated s ({} ms wall); trace {}",
        r.throughput_per_s,
        r.sim_ms as f64 / 1000.0,
        r.wall_ms,
        r.trace_hash
    );
    for v in &r.violations {
        let _ = writeln!(
            out,
            "  ! {} at {:.3} ms [{}]: {}",
            v.kind,
            v.t_ms,
            v.nodes.join(", "),
            v.detail
        );
    }
    // The checkers keep the first `MAX_VIOLATIONS_PER_KIND` of each kind: say what is left out.
    for (kind, total, what) in [
        ("mutual_exclusion", c.lock_overlaps, "lock overlaps"),
        ("lost_update", c.resource_conflicts, "lost updates"),
    ] {
        let shown = r.violations.iter().filter(|v| v.kind == kind).count() as u64;
        if total > shown {
            let _ = writeln!(
                out,
                "  ({shown} of {total} {what} shown; the result keeps the first {} of each kind)",
                model::check::MAX_VIOLATIONS_PER_KIND
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::{BAD, result};

    #[test]
    fn says_how_many_overlaps_it_leaves_out() {
        let mut r = result("s", "x", 1, BAD, (1.0, 2.0));
        r.counts.lock_overlaps = 15;
        r.violations = (0..10)
            .map(|i| model::result::Violation {
                kind: "mutual_exclusion".into(),
                t_ms: i as f64,
                nodes: vec!["client-1".into(), "client-2".into()],
                detail: "both held it".into(),
            })
            .collect();
        let text = summary(&r, "");
        assert!(
            text.contains(
                "  (10 of 15 lock overlaps shown; the result keeps the first 10 of each kind)"
            ),
            "{text}"
        );
        r.counts.lock_overlaps = 10;
        assert!(!summary(&r, "").contains("shown"));
    }
}
