//! AFL-style mutations of a fault schedule (Zalewski, AFL's `havoc` stage: a few stacked
//! random edits per child): add a fault, remove one, shift one's `at_ms`, scale its duration,
//! redraw its parameters and target (delta, rate, extra delay, node), splice two schedules at
//! an instant, switch a fault between `at_ms` and an event trigger (`on`: the nth `acquired`,
//! `lock_written`, `released` or `acquire_started`, a few ms after it: "crash the master right
//! after a grant" is one edit away), and retarget a triggered fault through a placeholder
//! (`{holder}`, `{peer}`, `{holder_master}`: the node that matters at that moment, whatever
//! client fired it). Every draw comes from the caller's stream, so a child is a function of
//! its parent and that stream.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::hunt::swarm::{self, KindDraw, MAX_FAULTS, sort_by_time};
use crate::scenario::faults::placeholder::{HOLDER, HOLDER_MASTER, PEER, is_placeholder};
use crate::scenario::faults::{Fault, FaultKind, When, is_master_name};

/// Events a mutation may trigger a fault on: moments of a client's lock (each names the
/// client, so `{holder}` resolves).
pub const TRIGGERS: &[&str] = &["acquired", "lock_written", "released", "acquire_started"];

/// Largest `nth` a switched trigger draws (log-uniformly: early occurrences as often as late).
pub const MAX_NTH: u64 = 64;

/// Largest `after_ms` a switched trigger draws.
pub const MAX_AFTER_MS: u64 = 500;

/// Edits stacked on one child: 1, 2, 4 or 8 (AFL's `havoc` stacks powers of two).
fn stacked(rng: &mut ChaCha8Rng) -> usize {
    1 << rng.gen_range(0..4)
}

fn set_at(fault: &mut Fault, at_ms: u64) {
    fault.when = When::At { at_ms };
}

/// The fault's duration, or time to its restart for a crash.
pub(crate) fn lasts_mut(fault: &mut Fault) -> Option<&mut Option<u64>> {
    match &mut fault.kind {
        FaultKind::Crash {
            restart_after_ms, ..
        }
        | FaultKind::PowerLoss {
            restart_after_ms, ..
        } => Some(restart_after_ms),
        FaultKind::DropConnections { .. } | FaultKind::Failover { .. } => None,
        _ => Some(&mut fault.duration_ms),
    }
}

/// A mutated copy of `parent`: `kinds` are the scenario's kinds (each at its drawn means) that
/// new faults come from, `other` a corpus schedule to splice with, `heal_at_ms` the end of the
/// fault phase.
pub fn mutate(
    parent: &[Fault],
    other: &[Fault],
    kinds: &[KindDraw],
    heal_at_ms: u64,
    rng: &mut ChaCha8Rng,
) -> Vec<Fault> {
    let mut child = parent.to_vec();
    for _ in 0..stacked(rng) {
        let edit = rng.gen_range(0..8);
        if child.is_empty() && edit != 0 && edit != 5 {
            continue;
        }
        let i = if child.is_empty() {
            0
        } else {
            rng.gen_range(0..child.len())
        };
        match edit {
            0 if child.len() < MAX_FAULTS && !kinds.is_empty() => {
                let draw = &kinds[rng.gen_range(0..kinds.len())];
                let at_ms = rng.gen_range(1..heal_at_ms.max(2));
                let (fault, _) = swarm::draw_fault(draw, at_ms, rng);
                child.push(crate::faults::nemesis::as_scripted(&fault, heal_at_ms));
            }
            1 => {
                child.remove(i);
            }
            2 => {
                // Shift by up to ±2^k ms, k in 0..14: small nudges as often as big moves; a
                // triggered fault moves its delay after the event (it may name a placeholder,
                // which only a trigger resolves).
                let by = 1i64 << rng.gen_range(0..14);
                let by = if rng.gen_bool(0.5) { by } else { -by };
                let latest = (heal_at_ms as i64 - 1).max(1);
                match &mut child[i].when {
                    When::On { after_ms, .. } => {
                        *after_ms = (*after_ms as i64 + by).clamp(0, latest) as u64;
                    }
                    When::At { at_ms } => *at_ms = (*at_ms as i64 + by).clamp(1, latest) as u64,
                }
            }
            3 => {
                if let Some(lasts) = lasts_mut(&mut child[i]) {
                    let ms = lasts.unwrap_or(1000) as f64;
                    let factor = [0.25, 0.5, 2.0, 4.0][rng.gen_range(0..4)];
                    *lasts = Some(((ms * factor).round() as u64).max(1));
                }
            }
            4 => {
                let name = child[i].kind.name();
                if let Some(draw) = kinds.iter().find(|k| k.kind.kind == name) {
                    let at_ms = swarm::at_ms(&child[i]);
                    let (fault, _) = swarm::draw_fault(draw, at_ms, rng);
                    child[i] = crate::faults::nemesis::as_scripted(&fault, heal_at_ms);
                }
            }
            5 if !other.is_empty() => {
                let cut = rng.gen_range(0..heal_at_ms.max(1));
                child.retain(|f| swarm::at_ms(f) < cut);
                child.extend(other.iter().filter(|f| swarm::at_ms(f) >= cut).cloned());
                child.truncate(MAX_FAULTS);
            }
            6 => switch_trigger(&mut child[i], kinds, heal_at_ms, rng),
            7 => retarget(&mut child[i], rng),
            _ => {}
        }
    }
    sort_by_time(&mut child);
    child
}

/// An `at_ms` fault fires on an event instead, and a triggered one at a time again (its
/// placeholders redrawn as nodes of its kind, since only a trigger names a holder).
fn switch_trigger(fault: &mut Fault, kinds: &[KindDraw], heal_at_ms: u64, rng: &mut ChaCha8Rng) {
    match fault.when {
        When::At { .. } => {
            let nth = swarm::log_uniform(
                rng,
                crate::scenario::range::MsRange {
                    min: 1,
                    max: MAX_NTH,
                },
            );
            fault.when = When::On {
                event: TRIGGERS[rng.gen_range(0..TRIGGERS.len())].to_string(),
                node: None,
                nth,
                command: None,
                after_ms: rng.gen_range(0..=MAX_AFTER_MS),
            };
        }
        When::On { .. } => {
            let at_ms = rng.gen_range(1..heal_at_ms.max(2));
            let holds_placeholder = fault.kind.node_names().iter().any(|n| is_placeholder(n));
            let name = fault.kind.name();
            match kinds.iter().find(|k| k.kind.kind == name) {
                Some(draw) if holds_placeholder => {
                    let (drawn, _) = swarm::draw_fault(draw, at_ms, rng);
                    *fault = crate::faults::nemesis::as_scripted(&drawn, heal_at_ms);
                }
                _ if holds_placeholder => {}
                _ => set_at(fault, at_ms),
            }
        }
    }
}

/// A triggered fault on one node names it by its role at that moment instead: a client as
/// `{holder}` or `{peer}`, a master as `{holder_master}`.
fn retarget(fault: &mut Fault, rng: &mut ChaCha8Rng) {
    if !fault.when.fires_on_a_client() {
        return;
    }
    let Some(node) = fault.kind.single_node_mut() else {
        return;
    };
    if is_master_name(node) {
        *node = HOLDER_MASTER.to_string();
    } else if node.starts_with("client-") {
        *node = [HOLDER, PEER][rng.gen_range(0..2)].to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn pause(at_ms: u64, node: &str) -> Fault {
        Fault {
            kind: FaultKind::Pause { node: node.into() },
            when: When::At { at_ms },
            duration_ms: Some(100),
        }
    }

    #[test]
    fn children_are_deterministic_sorted_and_within_the_fault_phase() {
        let parent = vec![pause(100, "client-1"), pause(900, "client-2")];
        let other = vec![pause(50, "redis-1"), pause(1500, "redis-2")];
        let child = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            mutate(&parent, &other, &[], 2000, &mut rng)
        };
        let mut differ = 0;
        for seed in 0..50 {
            let c = child(seed);
            assert_eq!(c, child(seed));
            assert!(
                c.windows(2)
                    .all(|w| swarm::at_ms(&w[0]) <= swarm::at_ms(&w[1]))
            );
            assert!(c.iter().all(|f| swarm::at_ms(f) < 2000));
            differ += usize::from(c != parent);
        }
        assert!(differ >= 40, "only {differ} of 50 children differ");
    }

    #[test]
    fn a_fault_switches_to_a_trigger_and_back_and_only_a_triggered_one_names_a_role() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut fault = pause(700, "client-1");
        retarget(&mut fault, &mut rng);
        assert_eq!(fault, pause(700, "client-1"), "at_ms: no holder to name");
        switch_trigger(&mut fault, &[], 2000, &mut rng);
        let When::On {
            event,
            nth,
            after_ms,
            ..
        } = &fault.when
        else {
            panic!("not triggered: {fault:?}");
        };
        assert!(TRIGGERS.contains(&event.as_str()));
        assert!((1..=MAX_NTH).contains(nth) && *after_ms <= MAX_AFTER_MS);
        retarget(&mut fault, &mut rng);
        let FaultKind::Pause { node } = &fault.kind else {
            panic!("{fault:?}");
        };
        assert!([HOLDER, PEER].contains(&node.as_str()), "{node}");
        let mut crash = Fault {
            kind: FaultKind::Crash {
                node: "redis-1".into(),
                restart_after_ms: Some(100),
            },
            ..fault.clone()
        };
        retarget(&mut crash, &mut rng);
        assert_eq!(crash.kind.node_names(), vec![HOLDER_MASTER]);
        // Back to a time: a placeholder with no kind to redraw from stays triggered (a
        // placeholder needs a holder); a named node just gets a time.
        switch_trigger(&mut fault, &[], 2000, &mut rng);
        assert!(matches!(fault.when, When::On { .. }));
        let mut named = pause(5, "client-2");
        switch_trigger(&mut named, &[], 2000, &mut rng);
        switch_trigger(&mut named, &[], 2000, &mut rng);
        assert!(matches!(named.when, When::At { at_ms } if (1..2000).contains(&at_ms)));
    }

    #[test]
    fn only_a_fault_fired_by_a_clients_event_names_a_placeholder() {
        let parent = vec![pause(100, "client-1"), pause(900, "client-2")];
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut child = parent.clone();
        let mut placeholders = 0;
        for _ in 0..3000 {
            child = mutate(&child, &parent, &[], 2000, &mut rng);
            if child.is_empty() {
                child = parent.clone();
            }
            for f in &child {
                if f.kind.node_names().iter().any(|n| is_placeholder(n)) {
                    placeholders += 1;
                    assert!(f.when.fires_on_a_client(), "{f:?}");
                }
            }
        }
        assert!(placeholders > 0, "no child named a placeholder");
    }
}
