//! Swarm schedules: hunt's fresh inputs. Per draw, each fault kind the scenario's `nemesis`
//! lists is on with p = ½ (Groce et al., "Swarm Testing", ISSTA 2012: omitting a kind finds
//! failures it masks), and each enabled kind's mean gap and mean duration are drawn
//! log-uniformly from its ranges, so that runs with faults as frequent as the nemesis allows
//! and runs with one rare fault both occur (a uniform draw over [100, 10 000] ms is under 1 s in 9 % of draws; log-uniform in
//! 50 %). The faults are then drawn as the random nemesis draws them (`faults::nemesis::pick`)
//! and written as scripted faults at their times, cut where the nemesis would heal everything:
//! the schedule is the whole input, replayable by `locksim run`.

use std::collections::BTreeMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::faults::nemesis::{as_scripted, lasting, pick};
use crate::scenario::faults::{Fault, When};
use crate::scenario::nemesis::{KindSpec, NemesisSpec};
use crate::scenario::range::MsRange;

/// Most faults one schedule holds: a cap on a swarm draw with a tiny mean gap.
pub const MAX_FAULTS: usize = 64;

/// A log-uniform draw from `[min, max]` (a range starting at 0 starts at 1 ms).
pub fn log_uniform(rng: &mut ChaCha8Rng, range: MsRange) -> u64 {
    let lo = range.min.max(1) as f64;
    let hi = range.max.max(1) as f64;
    if hi <= lo {
        return range.max.max(range.min);
    }
    let drawn = (lo.ln() + rng.r#gen::<f64>() * (hi.ln() - lo.ln())).exp();
    (drawn.round() as u64).clamp(range.min, range.max)
}

/// One kind as a swarm draw set it for a schedule: its mean gap and duration.
#[derive(Clone, Debug)]
pub struct KindDraw {
    pub kind: KindSpec,
    pub mean_every_ms: u64,
    pub mean_duration_ms: Option<u64>,
    /// Drawn as the random nemesis draws (each gap and duration uniform over the kind's
    /// ranges) instead of around the means.
    pub uniform: bool,
}

/// Every kind, drawn as the random nemesis draws them: half of hunt's fresh inputs, so that
/// where one fault of the scenario's own shape is enough (a pause longer than the lease is
/// likelier under a uniform draw than a log-uniform one) hunt does as well as the nemesis.
pub fn nemesis_kinds(nemesis: &NemesisSpec) -> Vec<KindDraw> {
    nemesis
        .kinds
        .iter()
        .map(|kind| KindDraw {
            kind: kind.clone(),
            mean_every_ms: kind.every_ms.min,
            mean_duration_ms: kind.duration_ms.map(|r| r.min),
            uniform: true,
        })
        .collect()
}

/// The kinds a swarm draw switches on (never none), with their drawn means.
pub fn draw_kinds(nemesis: &NemesisSpec, rng: &mut ChaCha8Rng) -> Vec<KindDraw> {
    let on: Vec<&KindSpec> = loop {
        let on: Vec<&KindSpec> = nemesis.kinds.iter().filter(|_| rng.gen_bool(0.5)).collect();
        if !on.is_empty() {
            break on;
        }
    };
    on.into_iter()
        .map(|kind| KindDraw {
            kind: kind.clone(),
            mean_every_ms: log_uniform(rng, kind.every_ms),
            mean_duration_ms: kind.duration_ms.map(|r| log_uniform(rng, r)),
            uniform: false,
        })
        .collect()
}

/// ½× to 2× `mean`, within `range` (a swarm draw's gaps and durations: the nemesis's ranges
/// bound them, `bounds`).
pub fn around(mean: u64, range: MsRange) -> MsRange {
    MsRange {
        min: (mean / 2).max(range.min),
        max: mean.saturating_mul(2).min(range.max).max(range.min),
    }
}

/// One fault of `draw`'s kind at `at_ms`: target and parameters as the nemesis draws them,
/// its duration around the kind's drawn mean (½× to 2×, log-uniform, within the kind's range).
pub fn draw_fault(draw: &KindDraw, at_ms: u64, rng: &mut ChaCha8Rng) -> (Fault, String) {
    let (kind, target) = pick(&draw.kind, rng);
    let duration_ms = match (draw.mean_duration_ms, draw.kind.duration_ms) {
        (_, Some(range)) if draw.uniform => Some(rng.gen_range(range.min..=range.max)),
        (Some(mean), Some(range)) => Some(log_uniform(rng, around(mean, range))),
        _ => None,
    };
    (lasting(kind, at_ms, duration_ms), target)
}

/// A schedule of the enabled kinds from `from_ms` to `heal_at_ms`: each kind a process of
/// gaps ½× to 2× its mean (never sooner than the nemesis's `every_ms.min`), one fault per
/// (kind, target) at a time (as the nemesis), sorted by time.
pub fn draw_schedule(
    kinds: &[KindDraw],
    from_ms: u64,
    heal_at_ms: u64,
    rng: &mut ChaCha8Rng,
) -> Vec<Fault> {
    let mut faults = Vec::new();
    for draw in kinds {
        let mut busy_until: BTreeMap<String, u64> = BTreeMap::new();
        let mut at_ms = from_ms;
        loop {
            let every = draw.kind.every_ms;
            let gap = if draw.uniform {
                rng.gen_range(every.min..=every.max)
            } else {
                log_uniform(rng, around(draw.mean_every_ms, every))
            };
            at_ms = at_ms.saturating_add(gap.max(1));
            if at_ms >= heal_at_ms || faults.len() >= MAX_FAULTS {
                break;
            }
            let (fault, target) = draw_fault(draw, at_ms, rng);
            if busy_until.get(&target).is_some_and(|&until| at_ms < until) {
                continue;
            }
            let fault = as_scripted(&fault, heal_at_ms);
            let lasts = fault
                .kind
                .restart_after_ms()
                .unwrap_or(fault.duration_ms)
                .unwrap_or(0);
            busy_until.insert(target, at_ms + lasts);
            faults.push(fault);
        }
    }
    sort_by_time(&mut faults);
    faults
}

/// The time a scripted fault of hunt fires (hunt writes only `at_ms` faults).
pub fn at_ms(fault: &Fault) -> u64 {
    match fault.when {
        When::At { at_ms } => at_ms,
        When::On { .. } => 0,
    }
}

pub fn sort_by_time(faults: &mut [Fault]) {
    faults.sort_by_key(at_ms);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn nemesis() -> NemesisSpec {
        let nodes: std::collections::BTreeSet<String> =
            ["client-1", "redis-1", "redis-2"].map(String::from).into();
        let json = serde_json::json!({
            "pause": { "every_ms": [100, 10000], "duration_ms": [10, 3000], "nodes": ["client-1"] },
            "crash": { "every_ms": [500, 20000], "duration_ms": [0, 2000], "nodes": ["redis-1", "redis-2"] },
            "clock_jump": { "every_ms": [1000, 9000], "delta_ms": [-500, 5000], "nodes": ["redis-1"] }
        });
        NemesisSpec::from_json(&json, &nodes, 60_000).expect("a valid nemesis")
    }

    #[test]
    fn log_uniform_stays_in_range_and_favours_small_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let range = MsRange {
            min: 100,
            max: 10_000,
        };
        let draws: Vec<u64> = (0..2000).map(|_| log_uniform(&mut rng, range)).collect();
        assert!(draws.iter().all(|&d| (100..=10_000).contains(&d)));
        let below_1s = draws.iter().filter(|&&d| d < 1000).count();
        // Log-uniform: half the mass below the geometric mean (1 s); uniform would give ~9 %.
        assert!(
            (800..1200).contains(&below_1s),
            "{below_1s} of 2000 below 1 s"
        );
    }

    #[test]
    fn a_schedule_is_a_function_of_its_stream_sorted_and_before_the_heal() {
        let spec = nemesis();
        let schedule = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let kinds = draw_kinds(&spec, &mut rng);
            draw_schedule(&kinds, 0, 40_000, &mut rng)
        };
        assert_eq!(schedule(7), schedule(7));
        let mut kinds_seen = std::collections::BTreeSet::new();
        for seed in 0..40 {
            let faults = schedule(seed);
            assert!(faults.windows(2).all(|w| at_ms(&w[0]) <= at_ms(&w[1])));
            assert!(faults.iter().all(|f| at_ms(f) < 40_000));
            assert!(faults.len() <= MAX_FAULTS);
            kinds_seen.insert(
                faults
                    .iter()
                    .map(|f| f.kind.name())
                    .collect::<std::collections::BTreeSet<_>>(),
            );
        }
        // Swarm: different seeds switch different subsets of the kinds on.
        assert!(kinds_seen.len() >= 4, "{kinds_seen:?}");
    }
}
