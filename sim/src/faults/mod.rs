//! Faults (Jepsen's nemesis): what each kind does to the world (`kinds`), when the scripted
//! ones fire (`schedule`: at their time or on their event trigger) and on which nodes their
//! placeholders land (`targets`), and the random nemesis (`nemesis`). The kinds themselves and
//! their validation are the scenario's (`scenario::faults`); this layer acts on the world's
//! resources through their hooks.
//!
//! Every fault runs the same life here: injected and recorded (`begin`), waited out, healed and
//! recorded (`finish`); a fault without `duration_ms` lasts to the end of the run.

pub mod kinds;
pub mod nemesis;
pub mod schedule;
pub mod targets;

use std::sync::Arc;
use std::time::Duration;

use model::history::{EventKind, FaultPhase};

use crate::scenario::faults::{Fault, FaultKind};
use crate::signal::Signal;
use crate::world::World;

/// Longer than any run: a fault without an end.
const FOREVER_MS: u64 = 1000 * 3600 * 24 * 365;

/// Injects a fault, records it, and heals it after its duration — or earlier, when `heal_all`
/// turns true (the random nemesis's liveness phase). `holder`: see [`begin`].
pub async fn run(
    world: Arc<World>,
    fault: Fault,
    holder: Option<String>,
    heal_all: Option<Signal>,
) {
    let fault = begin(&world, &fault, holder.as_deref());
    finish(world, fault, heal_all).await;
}

/// Injects a fault and records it, at once; returns it as injected, for [`finish`]. Every way
/// a fault fires (at its time, on its trigger, drawn by the random nemesis) comes through
/// here, so its placeholders are resolved now, in this one place (`targets::resolve`), for
/// `holder`, the client whose event fired its trigger (issue 31: a `{rest}` fired at `at_ms`
/// had reached the world unresolved).
pub fn begin(world: &Arc<World>, fault: &Fault, holder: Option<&str>) -> Fault {
    let fault = Fault {
        kind: targets::resolve(&fault.kind, world, holder),
        ..fault.clone()
    };
    fault.kind.inject(world);
    world.record(
        fault.kind.target(),
        EventKind::Fault {
            fault: fault.kind.name().into(),
            phase: FaultPhase::Injected,
            detail: fault.kind.describe(),
        },
    );
    fault
}

/// Waits out an injected fault, heals it and records that. A crashed Redis (process or machine)
/// counts as healed once it is back: after its restart and the scenario's `restart_delay_ms`.
pub async fn finish(world: Arc<World>, fault: Fault, heal_all: Option<Signal>) {
    let target = fault.kind.target().to_string();
    let detail = fault.kind.describe();
    let lasts_ms = fault.kind.restart_after_ms().unwrap_or(fault.duration_ms);
    let instantaneous = matches!(
        fault.kind,
        FaultKind::DropConnections { .. } | FaultKind::Failover { .. }
    );
    if instantaneous {
        return;
    }
    let healed = match (lasts_ms, heal_all) {
        (Some(duration_ms), None) => {
            madsim::time::sleep(Duration::from_millis(duration_ms)).await;
            true
        }
        (lasts_ms, Some(heal_all)) => {
            let forever = lasts_ms.is_none();
            let duration = Duration::from_millis(lasts_ms.unwrap_or(FOREVER_MS));
            tokio::select! {
                biased;
                _ = heal_all.wait_set() => true,
                _ = madsim::time::sleep(duration), if !forever => true,
            }
        }
        (None, None) => false,
    };
    if healed {
        fault.kind.heal(&world);
        let restart_delay_ms = world.scenario.topology.restart_delay_ms;
        if fault.kind.restart_after_ms().is_some()
            && fault.kind.target().starts_with("redis-")
            && restart_delay_ms > 0
        {
            madsim::time::sleep(Duration::from_millis(restart_delay_ms)).await;
        }
        world.record(
            &target,
            EventKind::Fault {
                fault: fault.kind.name().into(),
                phase: FaultPhase::Healed,
                detail,
            },
        );
    }
}
