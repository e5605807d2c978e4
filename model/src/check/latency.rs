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
                    acquire.saturating_record(event.t_us - start);
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
                    release.saturating_record(event.t_us - start);
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

/// 1 µs to 1 simulated hour, 3 significant digits; longer waits saturate at an hour.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
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
