//! The schedules the scenario's nemesis allows, which every input of hunt stays within: hunt
//! searches the faults the random nemesis could draw, in a better order, or the comparison with
//! it (`bench`) says nothing.
//!
//! A schedule is within the nemesis (`crate::faults::nemesis`) when every fault
//! - is of a kind the nemesis lists, fires at a time (`at_ms`, before the heal), on a target of
//!   that kind's `nodes` (a delay on a link between two of them, a partition into two sides of
//!   all of them), with its `extra_ms`, `delta_ms` or `rate` in the kind's range;
//! - lasts (its restart delay, for a crash) a time of the kind's `duration_ms` range, or until
//!   the heal when that comes first (the nemesis cuts open faults short there);
//! - comes a time after the previous fault of its kind (the first: after the start) that k
//!   waits of `every_ms` could add up to, for some k ≥ 1 — at least `every_ms.min`, and within
//!   k × [min, max] (the nemesis waits before each draw; the faults between, k − 1 of them,
//!   removed: `reachable`) —, and never while a fault of its kind is still open on its target
//!   (the nemesis skips a busy target). With a narrow `every_ms` that confines a kind to
//!   windows of the run (`[5000, 6000]` with the heal at 9 s: one fault at 5-6 s), as the
//!   nemesis does.
//!
//! A schedule may hold fewer faults than the nemesis would draw (swarm testing switches whole
//! kinds off; a removed fault is a quiet stretch), never more frequent, shorter, longer, or
//! other targets or parameters. `violations` says why a schedule leaves these bounds (the test
//! of every generator); `confine` brings a generator's schedule back within them.

use std::collections::BTreeMap;

use crate::hunt::swarm;
use crate::scenario::faults::{Fault, FaultKind, When};
use crate::scenario::nemesis::{KindSpec, NemesisSpec};
use crate::scenario::range::MsRange;

/// The nemesis's one-at-a-time key of a fault: a node, a directed link, or the network.
pub fn busy_key(kind: &FaultKind) -> String {
    match kind {
        FaultKind::Delay { from, to, .. } => format!("{from}->{to}"),
        FaultKind::Partition { .. } => "network".into(),
        other => other.node_names()[0].to_string(),
    }
}

/// Whether `gap_ms` is a sum of k ≥ 1 waits drawn from `every`: k × min ≤ gap ≤ k × max for
/// the fewest k whose k × max reaches it.
pub fn reachable(gap_ms: u64, every: MsRange) -> bool {
    let max = every.max.max(1);
    let k = gap_ms.div_ceil(max).max(1);
    k.saturating_mul(every.min) <= gap_ms
}

/// The first time at or after `at_ms` that a fault of a kind whose last fault came at
/// `last_ms` (0: none yet) could come (`reachable`).
pub fn next_reachable(last_ms: u64, at_ms: u64, every: MsRange) -> u64 {
    let gap = at_ms.saturating_sub(last_ms).max(every.min);
    if reachable(gap, every) {
        return last_ms + gap;
    }
    // Past window k (k × max < gap): the next starts at (k + 1) × min.
    let k = gap / every.max.max(1);
    last_ms + (k + 1) * every.min
}

/// The last time at or before `at_ms`, after `last_ms`, that a fault of the kind could come;
/// `None` when none is.
fn previous_reachable(last_ms: u64, at_ms: u64, every: MsRange) -> Option<u64> {
    let gap = at_ms.checked_sub(last_ms)?;
    if gap < every.min {
        return None;
    }
    if reachable(gap, every) {
        return Some(at_ms);
    }
    // Between windows k and k + 1: window k ends at k × max.
    let k = gap / every.max.max(1);
    (k >= 1).then(|| last_ms + k * every.max)
}

/// How long a fault keeps its target busy (ms): its duration or restart delay; a fault
/// without one (a failover, dropped connections) none.
pub(crate) fn lasts_ms(fault: &Fault) -> u64 {
    fault
        .kind
        .restart_after_ms()
        .unwrap_or(fault.duration_ms)
        .unwrap_or(0)
}

/// Every way `faults` leaves what `nemesis` may draw before `heal_at_ms` (empty: within).
pub fn violations(faults: &[Fault], nemesis: &NemesisSpec, heal_at_ms: u64) -> Vec<String> {
    let mut problems = Vec::new();
    let mut last_of_kind: BTreeMap<&str, u64> = BTreeMap::new();
    let mut busy_until: BTreeMap<(&str, String), u64> = BTreeMap::new();
    let mut previous_at = 0;
    for (i, fault) in faults.iter().enumerate() {
        let name = fault.kind.name();
        let problem = |what: String| format!("fault {i} ({name}): {what}");
        let When::At { at_ms } = fault.when else {
            problems.push(problem("fires on an event, not at a time".into()));
            continue;
        };
        if at_ms < previous_at {
            problems.push(problem(format!(
                "at {at_ms} ms, before the fault before it"
            )));
        }
        previous_at = at_ms;
        let Some(spec) = nemesis.kinds.iter().find(|k| k.kind == name) else {
            problems.push(problem("a kind the nemesis does not list".into()));
            continue;
        };
        if at_ms >= heal_at_ms {
            problems.push(problem(format!(
                "at {at_ms} ms, not before the heal at {heal_at_ms} ms"
            )));
        }
        let last = last_of_kind.get(name).copied().unwrap_or(0);
        if at_ms < last + spec.every_ms.min {
            problems.push(problem(format!(
                "at {at_ms} ms, sooner than every_ms.min ({} ms) after the last of its kind",
                spec.every_ms.min
            )));
        } else if !reachable(at_ms - last, spec.every_ms) {
            problems.push(problem(format!(
                "at {at_ms} ms, {} ms after the last of its kind: no number of waits of every_ms [{}, {}] adds up to that",
                at_ms - last,
                spec.every_ms.min,
                spec.every_ms.max
            )));
        }
        last_of_kind.insert(name, at_ms);
        if let Err(what) = parameters_within(&fault.kind, spec) {
            problems.push(problem(what));
        }
        if let Err(what) = lasting_within(fault, spec, at_ms, heal_at_ms) {
            problems.push(problem(what));
        }
        let key = (name, busy_key(&fault.kind));
        if busy_until.get(&key).is_some_and(|&until| at_ms < until) {
            problems.push(problem(format!(
                "on {} while a fault of its kind is open there",
                key.1
            )));
        }
        busy_until.insert(key, at_ms + lasts_ms(fault));
    }
    problems
}

/// Whether the fault's targets and parameters are ones the kind's nemesis draws.
fn parameters_within(kind: &FaultKind, spec: &KindSpec) -> Result<(), String> {
    let listed = |node: &str| spec.nodes.iter().any(|n| n == node);
    let in_range = |v: u64, r: MsRange| (r.min..=r.max).contains(&v);
    match kind {
        FaultKind::Partition { groups, one_way } => {
            let mut sides: Vec<&String> = groups.iter().flatten().collect();
            sides.sort();
            let mut all: Vec<&String> = spec.nodes.iter().collect();
            all.sort();
            if *one_way || groups.len() != 2 || groups.iter().any(Vec::is_empty) || sides != all {
                return Err("not two sides of the kind's nodes".into());
            }
        }
        FaultKind::Delay { from, to, extra_ms } => {
            if from == to || !listed(from) || !listed(to) {
                return Err(format!(
                    "{from} -> {to}: not a link between the kind's nodes"
                ));
            }
            let range = spec.extra_ms.expect("validated");
            if !in_range(
                *extra_ms,
                MsRange {
                    min: range.min.max(1),
                    max: range.max.max(1),
                },
            ) {
                return Err(format!(
                    "extra_ms {extra_ms} outside [{}, {}]",
                    range.min, range.max
                ));
            }
        }
        FaultKind::ClockJump { node, delta_ms } => {
            let (a, b) = spec.delta_ms.expect("validated");
            if !listed(node) || !(a..=b).contains(delta_ms) {
                return Err(format!(
                    "{node} by {delta_ms} ms: outside the kind's nodes or delta_ms"
                ));
            }
        }
        FaultKind::ClockDrift { node, rate } => {
            let (a, b) = spec.rate.expect("validated");
            // The nemesis rounds a drawn rate to 0.001.
            if !listed(node) || *rate < a - 0.0005 || *rate > b + 0.0005 {
                return Err(format!(
                    "{node} at {rate}x: outside the kind's nodes or rate"
                ));
            }
        }
        other => {
            let node = other.node_names()[0];
            if !listed(node) {
                return Err(format!("on {node}, not one of the kind's nodes"));
            }
        }
    }
    Ok(())
}

/// Whether the fault lasts what the nemesis draws: a time of the kind's range, or until the
/// heal when that comes first (as `faults::nemesis::as_scripted` cuts it).
fn lasting_within(
    fault: &Fault,
    spec: &KindSpec,
    at_ms: u64,
    heal_at_ms: u64,
) -> Result<(), String> {
    let lasts = match (&fault.kind, fault.kind.restart_after_ms()) {
        (FaultKind::DropConnections { .. } | FaultKind::Failover { .. }, _) => return Ok(()),
        (_, Some(restart)) => restart,
        (_, None) => fault.duration_ms,
    };
    let left_ms = heal_at_ms.saturating_sub(at_ms).max(1);
    let Some(lasts) = lasts else {
        return Err("lasts past the heal".into());
    };
    let ok = match spec.duration_ms {
        // Without a range the nemesis keeps the fault until the heal.
        None => lasts == left_ms,
        Some(range) => {
            // A 0 ms draw lasts 1 ms (scripted faults last at least that), but a restart may be
            // at once.
            let floor = if fault.kind.restart_after_ms().is_some() {
                0
            } else {
                1
            };
            let min = range.min.max(floor);
            let max = range.max.max(floor);
            (min..=max.min(left_ms)).contains(&lasts) || (lasts == left_ms && left_ms <= max)
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "lasts {lasts} ms: the kind's duration_ms is {:?}, the heal {left_ms} ms after it",
            spec.duration_ms.map(|r| [r.min, r.max])
        ))
    }
}

/// `faults` brought within the nemesis: parameters and durations clamped into their kind's
/// ranges (and cut at the heal), a time no number of waits reaches moved to the nearest one
/// that is (`snap_to_reachable`), then, in time order, a fault dropped when
/// it is of a kind the nemesis does not list, fires on an event, names a target outside its
/// kind, comes too soon after the last of its kind or while its target is busy.
pub fn confine(faults: &[Fault], nemesis: &NemesisSpec, heal_at_ms: u64) -> Vec<Fault> {
    let mut sorted = faults.to_vec();
    swarm::sort_by_time(&mut sorted);
    snap_to_reachable(&mut sorted, nemesis, heal_at_ms);
    swarm::sort_by_time(&mut sorted);
    let mut kept: Vec<Fault> = Vec::new();
    for mut fault in sorted {
        let Some(spec) = nemesis.kinds.iter().find(|k| k.kind == fault.kind.name()) else {
            continue;
        };
        let When::At { at_ms } = fault.when else {
            continue;
        };
        clamp_parameters(&mut fault.kind, spec);
        clamp_lasting(&mut fault, spec, at_ms, heal_at_ms);
        let mut with = kept.clone();
        with.push(fault.clone());
        if violations(&with, nemesis, heal_at_ms).is_empty() {
            kept = with;
        }
    }
    kept
}

/// Moves each fault (in time order) whose time after the last of its kind no number of
/// waits reaches (`reachable`) to the nearest time that is: the end of the window before it
/// or the start of the next, the next when the earlier is past the heal.
fn snap_to_reachable(faults: &mut [Fault], nemesis: &NemesisSpec, heal_at_ms: u64) {
    let mut last_of_kind: BTreeMap<String, u64> = BTreeMap::new();
    for fault in faults.iter_mut() {
        let When::At { at_ms } = fault.when else {
            continue;
        };
        let name = fault.kind.name().to_string();
        let Some(spec) = nemesis.kinds.iter().find(|k| k.kind == name) else {
            continue;
        };
        let last = last_of_kind.get(&name).copied().unwrap_or(0);
        let snapped =
            if at_ms >= last + spec.every_ms.min && !reachable(at_ms - last, spec.every_ms) {
                let later = next_reachable(last, at_ms, spec.every_ms);
                match previous_reachable(last, at_ms, spec.every_ms) {
                    Some(t) if at_ms - t <= later - at_ms || later >= heal_at_ms => t,
                    _ => later,
                }
            } else {
                at_ms
            };
        fault.when = When::At { at_ms: snapped };
        last_of_kind.insert(name, snapped);
    }
}

fn clamp_parameters(kind: &mut FaultKind, spec: &KindSpec) {
    match kind {
        FaultKind::Delay { extra_ms, .. } => {
            let r = spec.extra_ms.expect("validated");
            *extra_ms = (*extra_ms).clamp(r.min.max(1), r.max.max(1));
        }
        FaultKind::ClockJump { delta_ms, .. } => {
            let (a, b) = spec.delta_ms.expect("validated");
            *delta_ms = (*delta_ms).clamp(a, b);
        }
        FaultKind::ClockDrift { rate, .. } => {
            let (a, b) = spec.rate.expect("validated");
            *rate = rate.clamp(a, b);
        }
        _ => {}
    }
}

fn clamp_lasting(fault: &mut Fault, spec: &KindSpec, at_ms: u64, heal_at_ms: u64) {
    let left_ms = heal_at_ms.saturating_sub(at_ms).max(1);
    let restart = fault.kind.restart_after_ms().is_some();
    let lasts = match &mut fault.kind {
        FaultKind::DropConnections { .. } | FaultKind::Failover { .. } => return,
        FaultKind::Crash {
            restart_after_ms, ..
        }
        | FaultKind::PowerLoss {
            restart_after_ms, ..
        } => restart_after_ms,
        _ => &mut fault.duration_ms,
    };
    let clamped = match spec.duration_ms {
        None => left_ms,
        Some(range) => {
            let floor = if restart { 0 } else { 1 };
            lasts
                .unwrap_or(range.max)
                .clamp(range.min.max(floor), range.max.max(floor))
                .min(left_ms)
        }
    };
    *lasts = Some(clamped);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use crate::hunt::anchor::{Anchors, TimeScales};
    use crate::hunt::mutate::mutate;
    use crate::runner::run;
    use crate::scenario::Scenario;

    /// Every kind with every field: the ranges each generator must keep to.
    fn scenario() -> Scenario {
        let text = r#"{
          "name": "hunt-bounds",
          "description": "hunt's bounds tests",
          "source": "sim/src/hunt/bounds.rs",
          "seed": 0,
          "duration_ms": 8000,
          "topology": { "masters": 1, "replicas": 1, "sentinels": 3, "sentinel_down_after_ms": 1000 },
          "network": { "latency_ms": [1, 5] },
          "scheme": { "name": "set-nx-px-lua", "ttl_ms": 2000 },
          "clients": { "count": 2, "acquisitions": 10, "hold_ms": [10, 100], "think_ms": [0, 20],
                       "acquire_timeout_ms": 1000, "command_timeout_ms": 300 },
          "liveness_window_ms": 1000,
          "nemesis": {
            "pause": { "every_ms": [300, 2000], "duration_ms": [50, 400], "nodes": ["client-1", "client-2"] },
            "crash": { "every_ms": [1500, 4000], "duration_ms": [1000, 2500], "nodes": ["redis-1", "redis-1-replica-1"] },
            "delay": { "every_ms": [500, 3000], "duration_ms": [100, 900], "extra_ms": [50, 600], "nodes": ["redis-1", "client-1", "client-2"] },
            "clock_jump": { "every_ms": [1000, 5000], "delta_ms": [-300, 800], "nodes": ["redis-1"] },
            "clock_drift": { "every_ms": [1000, 5000], "duration_ms": [200, 1000], "rate": [0.5, 1.5], "nodes": ["client-1"] },
            "partition": { "every_ms": [2000, 6000], "duration_ms": [100, 800], "nodes": ["redis-1", "client-1", "client-2"] },
            "failover": { "every_ms": [2000, 6000], "nodes": ["redis-1"] }
          }
        }"#;
        Scenario::parse(text, "hunt-bounds.json").expect("a valid scenario")
    }

    /// The checker agrees with the random nemesis: what it drew, as hunt writes it, is within.
    #[test]
    fn the_random_nemesis_draws_within_the_bounds() {
        let scenario = scenario();
        let target = crate::hunt::Target::new(&scenario, 0).expect("a nemesis");
        let mut row = scenario.for_scheme(0);
        row.nemesis.as_mut().expect("a nemesis").swarm = false;
        let row = std::sync::Arc::new(row);
        let mut drawn = 0;
        for seed in 0..4 {
            let output = run(&row, 0, seed).expect("runs");
            let faults: Vec<Fault> = output
                .nemesis_faults
                .iter()
                .map(|f| crate::faults::nemesis::as_scripted(f, target.heal_at_ms))
                .collect();
            drawn += faults.len();
            assert_eq!(
                violations(&faults, &target.nemesis, target.heal_at_ms),
                Vec::<String>::new(),
                "seed {seed}: {faults:?}"
            );
            assert_eq!(confine(&faults, &target.nemesis, target.heal_at_ms), faults);
        }
        assert!(drawn > 10, "the nemesis drew {drawn} faults");
    }

    /// Every generator of hunt, confined: fresh draws (within without confining), mutants of
    /// mutants, prefix children and anchored insertions; and the checker catches what each
    /// would leave the bounds by.
    #[test]
    fn every_generated_schedule_is_confined_within_the_bounds() {
        let target = crate::hunt::Target::new(&scenario(), 0).expect("a nemesis");
        let (nemesis, heal) = (&target.nemesis, target.heal_at_ms);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut confined_away = 0;
        let mut check = |faults: &[Fault], raw_must_be_within: bool| {
            let raw = violations(faults, nemesis, heal);
            if raw_must_be_within {
                assert_eq!(raw, Vec::<String>::new(), "{faults:?}");
            }
            confined_away += usize::from(!raw.is_empty());
            let confined = confine(faults, nemesis, heal);
            assert_eq!(violations(&confined, nemesis, heal), Vec::<String>::new());
            confined
        };
        let mut parent = Vec::new();
        for _ in 0..300 {
            let fresh = if rng.gen_bool(0.5) {
                swarm::nemesis_kinds(nemesis)
            } else {
                swarm::draw_kinds(nemesis, &mut rng)
            };
            let fresh = swarm::draw_schedule(&fresh, 0, heal, &mut rng);
            let fresh = check(&fresh, true);
            let kinds = swarm::draw_kinds(nemesis, &mut rng);
            let child = mutate(&parent, &fresh, &kinds, heal, &mut rng);
            parent = check(&child, false);
            let t_us = rng.gen_range(0..heal * 1000);
            let prefix = target.prefix_child(&fresh, t_us, &mut rng);
            check(&prefix, false);
        }
        let mut anchors = Anchors::default();
        let scales = TimeScales::of(&target.row, target.lease_ms);
        for i in 0..300u64 {
            let fresh = swarm::draw_schedule(&swarm::nemesis_kinds(nemesis), 0, heal, &mut rng);
            let t_us = (i * 37 % heal) * 1000;
            // Blind anchors, and directed ones (`--toward`) on alternate rounds.
            let directed = i % 2 == 1;
            if directed {
                let point = (model::marks::Mark::KeyExpired, t_us);
                anchors.add_on_path(&fresh, i, point, 1, &[], heal);
            } else {
                let points = [(model::marks::Mark::KeyExpired, t_us)];
                anchors.add(&fresh, i, &points, &[], heal);
            }
            let hits = |_| 1 + i % 5;
            if let Some((child, _, _)) =
                anchors.child(nemesis, &scales, heal, directed, &hits, &mut rng)
            {
                check(&child, false);
            }
        }
        assert!(
            confined_away > 0,
            "no generated schedule needed confining: the test shows nothing"
        );
    }

    #[test]
    fn each_way_out_of_the_bounds_is_named() {
        let target = crate::hunt::Target::new(&scenario(), 0).expect("a nemesis");
        let (nemesis, heal) = (&target.nemesis, target.heal_at_ms);
        let at = |at_ms, kind, duration_ms| Fault {
            kind,
            when: When::At { at_ms },
            duration_ms,
        };
        let pause = |node: &str| FaultKind::Pause { node: node.into() };
        let crash = |restart| FaultKind::Crash {
            node: "redis-1".into(),
            restart_after_ms: Some(restart),
        };
        let within = [
            at(400, pause("client-1"), Some(100)),
            at(2000, crash(1000), None),
        ];
        assert!(violations(&within, nemesis, heal).is_empty());
        let out: [(&str, Vec<Fault>); 8] = [
            ("too short", vec![at(400, pause("client-1"), Some(10))]),
            ("restart too soon", vec![at(2000, crash(900), None)]),
            (
                "not a listed node",
                vec![at(400, pause("redis-1"), Some(100))],
            ),
            (
                "before every_ms.min",
                vec![at(200, pause("client-1"), Some(100))],
            ),
            (
                "too frequent",
                vec![
                    at(400, pause("client-1"), Some(100)),
                    at(600, pause("client-2"), Some(100)),
                ],
            ),
            (
                "a kind not listed",
                vec![at(
                    2000,
                    FaultKind::Isolate {
                        node: "redis-1".into(),
                    },
                    Some(100),
                )],
            ),
            (
                "a delay past extra_ms",
                vec![at(
                    600,
                    FaultKind::Delay {
                        from: "redis-1".into(),
                        to: "client-1".into(),
                        extra_ms: 700,
                    },
                    Some(100),
                )],
            ),
            (
                "after the heal",
                vec![at(heal, pause("client-1"), Some(100))],
            ),
        ];
        for (what, faults) in out {
            assert!(
                !violations(&faults, nemesis, heal).is_empty(),
                "{what}: {faults:?}"
            );
            assert!(violations(&confine(&faults, nemesis, heal), nemesis, heal).is_empty());
        }
        // Cut short by the heal, as the nemesis cuts it: within.
        let cut = [at(heal - 30, pause("client-1"), Some(30))];
        assert!(violations(&cut, nemesis, heal).is_empty());
    }

    /// A kind whose `every_ms` is narrow fires in windows (k × [min, max]), as the nemesis
    /// draws it: a time between two windows is out, and `confine` moves it to the nearest
    /// window that is before the heal.
    #[test]
    fn a_narrow_every_ms_confines_a_kind_to_its_windows() {
        let every = MsRange {
            min: 5000,
            max: 6000,
        };
        for gap in [5000, 5500, 6000, 10_000, 12_000, 15_000, 30_000] {
            assert!(reachable(gap, every), "{gap}");
        }
        for gap in [0, 4999, 6001, 9999, 12_001, 14_999] {
            assert!(!reachable(gap, every), "{gap}");
        }
        assert_eq!(next_reachable(0, 100, every), 5000);
        assert_eq!(next_reachable(0, 5500, every), 5500);
        assert_eq!(next_reachable(0, 7000, every), 10_000);
        assert_eq!(next_reachable(5200, 12_000, every), 15_200);
        assert_eq!(previous_reachable(0, 7000, every), Some(6000));
        assert_eq!(previous_reachable(0, 4000, every), None);

        let nodes: std::collections::BTreeSet<String> =
            ["client-1", "redis-1"].map(String::from).into();
        let json = serde_json::json!({
            "crash": { "every_ms": [5000, 6000], "duration_ms": [3000, 6000], "nodes": ["redis-1"] }
        });
        let nemesis = NemesisSpec::from_json(&json, &nodes, 20_000).expect("a valid nemesis");
        let crash = |at_ms| Fault {
            kind: FaultKind::Crash {
                node: "redis-1".into(),
                restart_after_ms: Some(3000),
            },
            when: When::At { at_ms },
            duration_ms: None,
        };
        let heal = 9000;
        // The nemesis crashes once, 5-6 s in, and its next draw (10 s on) is past the heal.
        assert!(violations(&[crash(5500)], &nemesis, heal).is_empty());
        let between = violations(&[crash(8000)], &nemesis, heal);
        assert!(
            between.iter().any(|p| p.contains("no number of waits")),
            "{between:?}"
        );
        let confined = confine(&[crash(8000)], &nemesis, heal);
        assert_eq!(confined.len(), 1);
        assert_eq!(swarm::at_ms(&confined[0]), 6000);
        assert!(violations(&confined, &nemesis, heal).is_empty());
        // Before the heal at 20 s the second window (10-12 s) is open: 9 s goes to the nearer
        // 10 s.
        let confined = confine(&[crash(9000)], &nemesis, 20_000);
        assert_eq!(swarm::at_ms(&confined[0]), 10_000);
    }
}
