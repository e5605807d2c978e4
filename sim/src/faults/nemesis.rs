//! The random nemesis: faults drawn from the seed, in the spirit of swarm testing, as the
//! scenario's `nemesis` says (`scenario::nemesis`).
//!
//! - Each listed kind is a process of its own: wait `every_ms` (drawn uniformly from the range),
//!   inject one fault of that kind on a target drawn from `nodes`, keep it `duration_ms` (drawn;
//!   for a crash it is the time until the restart), and so on. Kinds: every fault kind of
//!   `faults`; `partition` splits `nodes` into two random non-empty sides, `delay` picks a
//!   random directed link among `nodes` and `extra_ms`, `clock_jump` draws `delta_ms`,
//!   `clock_drift` draws `rate`, `failover` picks a master group. A node already under a fault
//!   of the same kind is not drawn again until it heals.
//! - Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): with `swarm` (the default), each
//!   seed enables a random non-empty subset of the listed kinds, so that a fault that masks
//!   another (a crash hides a pause) is absent from some runs; across seeds every combination is
//!   explored.
//! - Every draw comes from the run's own `rand_chacha` streams (`stream_seed(seed,
//!   "nemesis/<kind>")`): the same seed injects the same faults at the same times, and adding a
//!   kind does not move the others.
//! - Liveness phase: at `heal_at_ms` (default `duration_ms` − 2 × the liveness window, so a
//!   lock-out after healing has a whole window to show before the run ends) the nemesis stops,
//!   heals every fault it still has open (crashed nodes restart, partitions heal, clocks run at
//!   the right rate again — a clock step is not undone) and records a `nemesis` fault event; the
//!   liveness checker then requires that, while live clients want the lock, some client gets
//!   it within every window.
//! - Every fault it injects is also written to a [`NemesisLog`] (not to the trace): `locksim
//!   shrink` turns them into scripted faults at their `at_ms`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use model::history::{EventKind, FaultPhase};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::faults::run;
use crate::scenario::faults::{Fault, FaultKind, When};
use crate::scenario::nemesis::{KindSpec, NemesisSpec};
use crate::scenario::range::MsRange;
use crate::signal::Signal;
use crate::world::{World, stream_seed};

/// (kind, target) pairs with a fault open: not drawn again until it heals.
type Busy = Arc<Mutex<BTreeSet<(String, String)>>>;

/// The faults the random nemesis injected, in injection order, each as drawn (`When::At` its
/// true time in ms, its drawn `duration_ms` or restart delay); healing at `heal_at_ms` cuts
/// the open ones short.
pub type NemesisLog = Arc<Mutex<Vec<Fault>>>;

fn draw(rng: &mut ChaCha8Rng, range: MsRange) -> u64 {
    rng.gen_range(range.min..=range.max)
}

/// The random nemesis of one run, on the nemesis node.
pub async fn random_nemesis(
    world: Arc<World>,
    spec: NemesisSpec,
    heal_at_ms: u64,
    log: NemesisLog,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(world.seed, "nemesis"));
    let mut enabled: Vec<KindSpec> = spec.kinds.clone();
    if spec.swarm && enabled.len() > 1 {
        loop {
            let subset: Vec<KindSpec> = enabled
                .iter()
                .filter(|_| rng.gen_bool(0.5))
                .cloned()
                .collect();
            if !subset.is_empty() {
                enabled = subset;
                break;
            }
        }
    }
    let heal = Signal::new();
    let busy: Busy = Arc::default();
    for kind in enabled {
        madsim::task::spawn(kind_process(
            world.clone(),
            kind,
            heal_at_ms,
            heal.clone(),
            busy.clone(),
            log.clone(),
        ));
    }
    madsim::time::sleep(Duration::from_millis(heal_at_ms)).await;
    heal.set();
    world.record(
        "nemesis",
        EventKind::Fault {
            fault: "nemesis".into(),
            phase: FaultPhase::Healed,
            detail: "liveness phase: every random fault healed, no more injected".into(),
        },
    );
}

/// One fault kind's process: wait, inject, repeat, until the heal time.
async fn kind_process(
    world: Arc<World>,
    kind: KindSpec,
    heal_at_ms: u64,
    heal_all: Signal,
    busy: Busy,
    log: NemesisLog,
) {
    let mut rng =
        ChaCha8Rng::seed_from_u64(stream_seed(world.seed, &format!("nemesis/{}", kind.kind)));
    loop {
        let wait = draw(&mut rng, kind.every_ms);
        if world.time.now_us() / 1000 + wait >= heal_at_ms {
            return;
        }
        madsim::time::sleep(Duration::from_millis(wait)).await;
        let (fault_kind, target) = pick(&kind, &mut rng);
        let duration_ms = kind.duration_ms.map(|r| draw(&mut rng, r));
        let key = (kind.kind.clone(), target);
        if !busy.lock().expect("never poisoned").insert(key.clone()) {
            continue;
        }
        let fault = lasting(fault_kind, world.time.now_us() / 1000, duration_ms);
        log.lock().expect("never poisoned").push(fault.clone());
        let (world, heal_all, busy) = (world.clone(), heal_all.clone(), busy.clone());
        madsim::task::spawn(async move {
            run(world, fault, None, Some(heal_all)).await;
            busy.lock().expect("never poisoned").remove(&key);
        });
    }
}

/// A drawn fault at `at_ms` lasting `duration_ms`: for a crash (process or machine) that is the
/// time until its restart.
pub fn lasting(kind: FaultKind, at_ms: u64, duration_ms: Option<u64>) -> Fault {
    let (kind, duration_ms) = match kind {
        FaultKind::Crash { node, .. } => (
            FaultKind::Crash {
                node,
                restart_after_ms: duration_ms,
            },
            None,
        ),
        FaultKind::PowerLoss { node, .. } => (
            FaultKind::PowerLoss {
                node,
                restart_after_ms: duration_ms,
            },
            None,
        ),
        other => (other, duration_ms),
    };
    Fault {
        kind,
        when: When::At { at_ms },
        duration_ms,
    }
}

/// A fault of the random nemesis as a scripted fault: it fired at `at_ms` and lasted what was
/// drawn, but no longer than until the nemesis healed everything at `heal_at_ms` (a clock
/// jump, never undone, counts as healed then too, as the nemesis records it). A fault drawn
/// with 0 ms lasts 1 ms: scripted faults last at least that.
pub fn as_scripted(fault: &Fault, heal_at_ms: u64) -> Fault {
    let When::At { at_ms } = fault.when else {
        unreachable!("the nemesis records its faults at their time")
    };
    let left_ms = heal_at_ms.saturating_sub(at_ms).max(1);
    let cut = |ms: Option<u64>| Some(ms.map_or(left_ms, |ms| ms.min(left_ms)));
    let mut fault = fault.clone();
    match &mut fault.kind {
        FaultKind::Crash {
            restart_after_ms, ..
        }
        | FaultKind::PowerLoss {
            restart_after_ms, ..
        } => *restart_after_ms = cut(*restart_after_ms),
        FaultKind::DropConnections { .. } | FaultKind::Failover { .. } => {}
        _ => fault.duration_ms = cut(fault.duration_ms).map(|ms| ms.max(1)),
    }
    fault
}

/// Draws one fault of the kind and names its target (for the one-at-a-time rule).
pub fn pick(kind: &KindSpec, rng: &mut ChaCha8Rng) -> (FaultKind, String) {
    let node = kind.nodes[rng.gen_range(0..kind.nodes.len())].clone();
    let fault = match kind.kind.as_str() {
        "pause" => FaultKind::Pause { node: node.clone() },
        "crash" => FaultKind::Crash {
            node: node.clone(),
            restart_after_ms: None,
        },
        "power_loss" => FaultKind::PowerLoss {
            node: node.clone(),
            restart_after_ms: None,
        },
        "clock_jump" => {
            let (a, b) = kind.delta_ms.expect("validated");
            FaultKind::ClockJump {
                node: node.clone(),
                delta_ms: rng.gen_range(a..=b),
            }
        }
        "clock_drift" => {
            let (a, b) = kind.rate.expect("validated");
            let rate = if a < b { rng.gen_range(a..=b) } else { a };
            FaultKind::ClockDrift {
                node: node.clone(),
                rate: (rate * 1000.0).round() / 1000.0,
            }
        }
        "partition" => {
            let mut shuffled = kind.nodes.clone();
            shuffled.shuffle(rng);
            let cut = rng.gen_range(1..shuffled.len());
            let (a, b) = shuffled.split_at(cut);
            let mut groups = vec![a.to_vec(), b.to_vec()];
            for g in &mut groups {
                g.sort();
            }
            return (
                FaultKind::Partition {
                    groups,
                    one_way: false,
                },
                "network".into(),
            );
        }
        "isolate" => FaultKind::Isolate { node: node.clone() },
        "delay" => {
            let mut to = node.clone();
            while to == node {
                to = kind.nodes[rng.gen_range(0..kind.nodes.len())].clone();
            }
            let extra_ms = draw(rng, kind.extra_ms.expect("validated")).max(1);
            let target = format!("{node}->{to}");
            return (
                FaultKind::Delay {
                    from: node,
                    to,
                    extra_ms,
                },
                target,
            );
        }
        "drop_connections" => FaultKind::DropConnections { node: node.clone() },
        "failover" => FaultKind::Failover {
            master: node.clone(),
        },
        other => unreachable!("validated nemesis kind {other}"),
    };
    (fault, node)
}
