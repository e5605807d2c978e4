//! Latency: how long acquire and release take as the client sees it, in true simulated time,
//! as p50/p90/p99/max (hdrhistogram, microsecond resolution).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::round3;
use crate::history::{Event, EventKind};
use crate::result::{Latencies, Quantiles};

pub fn check(events: &[Event]) -> Latencies {
    let mut acquire = new_histogram();
    let mut release = new_histogram();
    // Keyed by owner: two worker threads of one client are timed separately.
    let mut acquire_started: BTreeMap<String, u64> = BTreeMap::new();
    let mut release_started: BTreeMap<String, u64> = BTreeMap::new();
    for event in events {
        let node = event.owner();
        let node = node.as_str();
        match &event.kind {
            EventKind::AcquireStarted { .. } => {
                acquire_started.insert(node.to_string(), event.t_us);
            }
            EventKind::Acquired { .. } => {
                if let Some(start) = acquire_started.remove(node) {
                    record(&mut acquire, event.t_us - start);
                }
            }
            EventKind::AcquireFailed { .. } => {
                acquire_started.remove(node);
            }
            EventKind::ReleaseStarted => {
                release_started.insert(node.to_string(), event.t_us);
            }
            EventKind::Released { .. } => {
                if let Some(start) = release_started.remove(node) {
                    record(&mut release, event.t_us - start);
                }
            }
            _ => {}
        }
    }
    Latencies {
        acquire: quantiles(&acquire),
        release: quantiles(&release),
    }
}

/// The histogram's nominal bound: one simulated hour.
const HIGHEST_US: u64 = 3_600_000_000;

/// The last value a histogram bounded at `HIGHEST_US` holds (its last bucket, 3 digits from
/// 1 µs, ends at 2^32 µs); `saturating_record` moves only larger values to `HIGHEST_US`.
const LAST_HELD_US: u64 = (1 << 32) - 1;

/// From 1 µs, 3 significant digits, growing to the largest value recorded: a histogram sized for
/// an hour up front is 188 KB zeroed twice per run (issue 15). The buckets depend only on the
/// lowest value and the precision, so the quantiles are those of the full-size histogram.
fn new_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("valid histogram precision")
}

/// Records `us` as `saturating_record` on the full-size histogram did.
fn record(h: &mut Histogram<u64>, us: u64) {
    let us = if us > LAST_HELD_US { HIGHEST_US } else { us };
    h.record(us)
        .expect("an auto-resizing histogram takes every value up to its bound");
}

/// Quantiles in ms; all zero for an empty histogram.
pub fn quantiles(h: &Histogram<u64>) -> Quantiles {
    if h.is_empty() {
        return Quantiles::default();
    }
    let ms = |us: u64| round3(us as f64 / 1000.0);
    // hdrhistogram reports the highest value equivalent to a bucket; the lowest one is the
    // recorded value itself when it is exact at 3 significant digits.
    let q = |quantile: f64| ms(h.lowest_equivalent(h.value_at_quantile(quantile)));
    Quantiles {
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        max: ms(h.lowest_equivalent(h.max())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_growing_histogram_answers_as_the_full_size_one() {
        let mut full = Histogram::<u64>::new_with_bounds(1, HIGHEST_US, 3).unwrap();
        let mut growing = new_histogram();
        // Spread over every magnitude, past the bound (saturated by both).
        for us in [LAST_HELD_US, LAST_HELD_US + 1, HIGHEST_US + 1] {
            let mut full_alone = Histogram::<u64>::new_with_bounds(1, HIGHEST_US, 3).unwrap();
            let mut growing_alone = new_histogram();
            full_alone.saturating_record(us);
            record(&mut growing_alone, us);
            assert_eq!(full_alone.max(), growing_alone.max(), "{us}");
        }
        let mut v: u64 = 7;
        for _ in 0..2_000 {
            v = v
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let us = ((v >> 20) % (HIGHEST_US * 2)) >> (v % 24);
            full.saturating_record(us);
            record(&mut growing, us);
        }
        assert_eq!(quantiles(&full), quantiles(&growing));
        assert_eq!(full.max(), growing.max());
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
        // The histogram keeps 3 significant digits: 4000 µs shares a bucket with 4001 µs, and a
        // quantile reports the bucket's highest value.
        assert!((l.acquire.p50 - 4.0).abs() <= 0.004, "{}", l.acquire.p50);
        assert!((l.release.max - 2.0).abs() <= 0.002, "{}", l.release.max);
    }
}
