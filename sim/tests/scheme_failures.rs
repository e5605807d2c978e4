//! The catalog's per-scheme failures happen the way their descriptions say, on every seed:
//! beyond the verdicts `expect` checks, the counts and violations that tell the story.

use std::path::PathBuf;
use std::sync::Arc;

use locksim::runner::{default_jobs, run_parallel};
use locksim::scenario::Scenario;
use model::result::RunResult;

fn results(name: &str) -> Vec<RunResult> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios")).join(name);
    let scenario = Arc::new(Scenario::load(&path).unwrap_or_else(|e| panic!("{e}")));
    let mut out = Vec::new();
    let work = scenario.seeds.iter().map(|seed| (0, seed)).collect();
    run_parallel(&scenario, work, default_jobs(), |r| {
        out.push(r.unwrap_or_else(|e| panic!("{e}")).result)
    });
    assert_eq!(out.len() as u64, scenario.seeds.len());
    out
}

#[test]
fn late_plain_dels_delete_the_next_holders_lock() {
    for name in [
        "scheme-set-nx-px-del-long-hold.json",
        "scheme-lua-setnx-expire-long-hold.json",
        "scheme-set-nx-px-get-del-pause-between-get-and-del.json",
    ] {
        for r in results(name) {
            assert!(
                r.counts.foreign_releases >= 1,
                "{name} seed {}: {:?}",
                r.seed,
                r.counts
            );
        }
    }
}

#[test]
fn two_threads_of_one_process_overlap_each_other() {
    for r in results("scheme-reentrant-two-threads-gc-pause.json") {
        let threads = r
            .violations
            .iter()
            .filter(|v| v.kind == "mutual_exclusion")
            .any(|v| v.nodes.iter().all(|n| n.starts_with("client-1/t")));
        assert!(threads, "seed {}: {:?}", r.seed, r.violations);
    }
}

#[test]
fn the_fast_clock_is_the_one_that_jumps_the_queue() {
    for r in results("scheme-fair-client-clock-jump.json") {
        let fifo: Vec<_> = r
            .violations
            .iter()
            .filter(|v| v.kind == "fifo_order")
            .collect();
        assert!(
            fifo.iter().any(|v| v.nodes[0] == "client-3"),
            "seed {}: {fifo:?}",
            r.seed
        );
    }
}

/// Redisson 3.12's fair lock under sustained contention: on every seed live waiters give up
/// after their whole 10 s `tryLock` wait (the lead's `max_wait_ms` can bound this directly);
/// Redisson 4.7's never keeps a waiter longer than about the 3 s lease it is told.
#[test]
fn redisson_3_12_fair_waiters_starve_and_4_7_ones_do_not() {
    for r in results("scheme-fair-redisson-3.12-starvation.json") {
        assert!(
            r.counts.acquire_failures >= 1,
            "seed {}: {:?}",
            r.seed,
            r.counts
        );
    }
    for r in results("scheme-fair-sustained-contention.json") {
        assert_eq!(r.counts.acquire_failures, 0, "seed {}", r.seed);
        assert!(
            r.latency_ms.acquire.max < 5000.0,
            "seed {}: {:?}",
            r.seed,
            r.latency_ms.acquire
        );
    }
}

/// Redisson 4.7 rides out a 2 s partition that delays a renewal (3 s timeout, the watchdog
/// goes on); 3.12 with 500 ms timeouts and no retries loses its watchdog to it.
#[test]
fn a_short_partition_ends_only_the_3_12_watchdog() {
    for r in results("scheme-redisson-short-partition.json") {
        assert_eq!(r.counts.lock_overlaps, 0, "seed {}", r.seed);
    }
    for r in results("scheme-redisson-3.12-short-partition.json") {
        assert!(r.counts.lock_overlaps >= 1, "seed {}", r.seed);
    }
}

/// A fencing token INCRed on the lock's own master goes back after a failover to a lagging
/// replica: the second holder gets the first one's token, the storage rejects nothing and the
/// first holder's update is lost.
#[test]
fn a_failover_hands_out_the_same_fencing_token_twice() {
    for r in results("fencing-failover-lagging-replica.json") {
        assert_eq!(r.counts.stale_writes_rejected, 0, "seed {}", r.seed);
        assert!(
            r.counts.resource_conflicts >= 1,
            "seed {}: {:?}",
            r.seed,
            r.counts
        );
    }
}
