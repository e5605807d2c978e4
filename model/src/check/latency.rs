//! Latency: how long acquire and release take as the client sees it, in true simulated time,
//! as p50/p90/p99/max (3 significant digits, as an hdrhistogram holds them).

use std::collections::BTreeMap;

use super::round3;
use crate::history::{Event, EventKind};
use crate::result::{Latencies, Quantiles};

pub fn check(events: &[Event]) -> Latencies {
    let mut acquire_us = Vec::new();
    let mut release_us = Vec::new();
    // Keyed by owner (its node and thread, borrowed: its name was built for every event, 6 %
    // of a baseline run's allocations, issue 32): two worker threads of one client are timed
    // separately.
    let mut acquire_started: BTreeMap<(&str, Option<u32>), u64> = BTreeMap::new();
    let mut release_started: BTreeMap<(&str, Option<u32>), u64> = BTreeMap::new();
    for event in events {
        let node = &(event.node.as_str(), event.thread);
        match &event.kind {
            EventKind::AcquireStarted { .. } => {
                acquire_started.insert(*node, event.t_us);
            }
            EventKind::Acquired { .. } => {
                if let Some(start) = acquire_started.remove(node) {
                    acquire_us.push(event.t_us - start);
                }
            }
            EventKind::AcquireFailed { .. } => {
                acquire_started.remove(node);
            }
            EventKind::ReleaseStarted => {
                release_started.insert(*node, event.t_us);
            }
            EventKind::Released { .. } => {
                if let Some(start) = release_started.remove(node) {
                    release_us.push(event.t_us - start);
                }
            }
            _ => {}
        }
    }
    Latencies {
        acquire: quantiles(acquire_us),
        release: quantiles(release_us),
    }
}

/// The nominal bound of the histogram the quantiles are defined by: one simulated hour.
const HIGHEST_US: u64 = 3_600_000_000;

/// The last value a histogram bounded at `HIGHEST_US` holds (its last bucket, 3 digits from
/// 1 µs, ends at 2^32 µs); `saturating_record` moves only larger values to `HIGHEST_US`.
const LAST_HELD_US: u64 = (1 << 32) - 1;

/// The lowest value of `us`'s bucket in an hdrhistogram of 3 significant digits from 1 µs: 2,048
/// sub-buckets, so values below 2,048 are exact and each doubling above drops one more low bit
/// (`Histogram::lowest_equivalent`).
fn lowest_equivalent(us: u64) -> u64 {
    let magnitude = 63 - (us | 2047).leading_zeros();
    let dropped_bits = magnitude - 10;
    us >> dropped_bits << dropped_bits
}

/// p50/p90/p99/max in ms (all zero without a sample), as an hdrhistogram of 3 significant digits
/// bounded at an hour reports them: the lowest value of the bucket that holds the sample of rank
/// ⌈q·n⌉ (`value_at_quantile`). Computed from the sorted samples: a run has a few hundred, while
/// the histogram's walk over its buckets, zeroed per run, was 4 % of `redlock-clock-jump`
/// (issue 15).
pub fn quantiles(mut samples_us: Vec<u64>) -> Quantiles {
    if samples_us.is_empty() {
        return Quantiles::default();
    }
    for us in &mut samples_us {
        if *us > LAST_HELD_US {
            *us = HIGHEST_US;
        }
    }
    samples_us.sort_unstable();
    let ms = |us: u64| round3(lowest_equivalent(us) as f64 / 1000.0);
    let n = samples_us.len();
    let q = |quantile: f64| {
        let rank = ((quantile * n as f64).ceil() as usize).clamp(1, n);
        ms(samples_us[rank - 1])
    };
    Quantiles {
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        max: ms(samples_us[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use hdrhistogram::Histogram;

    use super::*;

    /// The quantiles of the full-size histogram they replaced (`saturating_record` on 1 µs to an
    /// hour, 3 digits), over every magnitude and past the bound.
    #[test]
    fn the_quantiles_are_those_of_the_full_size_histogram() {
        let histogram_quantiles = |samples_us: &[u64]| {
            let mut h = Histogram::<u64>::new_with_bounds(1, HIGHEST_US, 3).unwrap();
            for &us in samples_us {
                h.saturating_record(us);
            }
            let ms = |us: u64| round3(h.lowest_equivalent(us) as f64 / 1000.0);
            Quantiles {
                p50: ms(h.value_at_quantile(0.50)),
                p90: ms(h.value_at_quantile(0.90)),
                p99: ms(h.value_at_quantile(0.99)),
                max: ms(h.max()),
            }
        };
        for us in [
            0,
            1,
            2047,
            2048,
            2049,
            4097,
            LAST_HELD_US,
            LAST_HELD_US + 1,
            HIGHEST_US + 1,
        ] {
            assert_eq!(quantiles(vec![us]), histogram_quantiles(&[us]), "{us}");
        }
        let mut v: u64 = 7;
        let mut samples_us = Vec::new();
        for n in 1..=400 {
            v = v
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            samples_us.push(((v >> 20) % (HIGHEST_US * 2)) >> (v % 32));
            if n % 7 == 0 || n < 12 {
                assert_eq!(
                    quantiles(samples_us.clone()),
                    histogram_quantiles(&samples_us),
                    "{samples_us:?}"
                );
            }
        }
    }

    #[test]
    fn measures_from_start_to_success() {
        let ev = |t_ms: u64, kind| Event {
            t_us: t_ms * 1000,
            node: "a".into(),
            thread: None,
            kind,
        };
        let events = vec![
            ev(0, EventKind::AcquireStarted { attempt: 1 }),
            ev(
                4,
                EventKind::Acquired {
                    token: "t".into(),
                    fence: None,
                },
            ),
            ev(10, EventKind::ReleaseStarted),
            ev(
                12,
                EventKind::Released {
                    ok: true,
                    detail: String::new(),
                },
            ),
        ];
        let l = check(&events);
        // Quantiles keep 3 significant digits: 4000 µs shares a bucket with 4001 µs, and a
        // quantile reports the bucket's lowest value.
        assert!((l.acquire.p50 - 4.0).abs() <= 0.004, "{}", l.acquire.p50);
        assert!((l.release.max - 2.0).abs() <= 0.002, "{}", l.release.max);
    }
}
