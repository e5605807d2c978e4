//! AFL-style mutations of a fault schedule (Zalewski, AFL's `havoc` stage: a few stacked
//! random edits per child): add a fault, remove one, shift one's `at_ms`, scale its duration,
//! redraw its parameters and target (delta, rate, extra delay, node), splice two schedules at
//! an instant. Every fault stays one fired at a time, as the nemesis fires them (a child is
//! then confined to the nemesis's ranges: `bounds`). Every draw comes from the caller's
//! stream, so a child is a function of its parent and that stream.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::hunt::swarm::{self, KindDraw, MAX_FAULTS, sort_by_time};
use crate::scenario::faults::{Fault, FaultKind, When};

/// Edits stacked on one child: 1, 2, 4 or 8 (AFL's `havoc` stacks powers of two).
fn stacked(rng: &mut ChaCha8Rng) -> usize {
    1 << rng.gen_range(0..4)
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
        let edit = rng.gen_range(0..6);
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
                // Shift by up to ±2^k ms, k in 0..14: small nudges as often as big moves.
                let by = 1i64 << rng.gen_range(0..14);
                let by = if rng.gen_bool(0.5) { by } else { -by };
                let latest = (heal_at_ms as i64 - 1).max(1);
                let at_ms = (swarm::at_ms(&child[i]) as i64 + by).clamp(1, latest) as u64;
                child[i].when = When::At { at_ms };
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
            _ => {}
        }
    }
    sort_by_time(&mut child);
    child
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
}
