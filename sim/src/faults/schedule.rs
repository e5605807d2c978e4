//! The scripted faults of a scenario: those at `at_ms` (at 0 ms before any node runs), and
//! those triggered by an event (`on`), which the world's history reports as it records
//! (`World::record` → `fire_now` for `after_ms` 0, else the `scripted_nemesis` task).

use std::sync::Arc;
use std::time::Duration;

use crate::faults::{begin, finish, run};
use crate::scenario::faults::{FaultKind, When};
use crate::world::World;

/// Injects a triggered fault with `after_ms` 0 at the instant of its event, from the task that
/// recorded it (before that task's node takes another step); its healing runs on the nemesis.
pub fn fire_now(world: &Arc<World>, index: usize, holder: Option<String>) {
    let fault = world.scenario.faults[index].clone();
    if matches!(fault.kind, FaultKind::Failover { .. }) {
        // A request to the Sentinels: it leaves from the nemesis node, at this same instant.
        world
            .procs
            .spawn_on_nemesis(run(world.clone(), fault, holder, None));
        return;
    }
    let fault = begin(world, &fault, holder.as_deref());
    world
        .procs
        .spawn_on_nemesis(finish(world.clone(), fault, None));
}

/// Injects the faults scheduled at 0 ms right away, before any node runs a step, so a
/// partition that is there from the start is there for the clients' first command; returns
/// the futures that heal them.
pub fn start_initial(
    world: &Arc<World>,
) -> Vec<impl std::future::Future<Output = ()> + Send + use<>> {
    let mut healers = Vec::new();
    for fault in world.scenario.faults.iter().cloned() {
        if fault.when == (When::At { at_ms: 0 }) {
            let fault = begin(world, &fault, None);
            healers.push(finish(world.clone(), fault, None));
        }
    }
    healers
}

/// The nemesis: schedules scripted faults at their times and event-triggered ones when the
/// world reports their trigger. Runs on its own node so no fault can pause or kill it.
pub async fn scripted_nemesis(
    world: Arc<World>,
    mut fired: tokio::sync::mpsc::UnboundedReceiver<(usize, Option<String>)>,
) {
    for fault in world.scenario.faults.iter().cloned() {
        // Faults at 0 ms were injected before any client ran (`start_initial`).
        if let When::At { at_ms } = fault.when
            && at_ms > 0
        {
            let world = world.clone();
            madsim::task::spawn(async move {
                madsim::time::sleep(Duration::from_millis(at_ms)).await;
                run(world, fault, None, None).await;
            });
        }
    }
    while let Some((index, holder)) = fired.recv().await {
        let after_ms = match world.scenario.faults[index].when {
            When::On { after_ms, .. } => after_ms,
            When::At { .. } => 0,
        };
        let world = world.clone();
        madsim::task::spawn(async move {
            madsim::time::sleep(Duration::from_millis(after_ms)).await;
            // Placeholders are resolved when the fault fires, not when its trigger did.
            let fault = world.scenario.faults[index].clone();
            run(world, fault, holder, None).await;
        });
    }
}
