//! The scripted faults of a scenario: those at `at_ms` (at 0 ms before any node runs), and
//! those triggered by an event (`on`), which the world's history reports as it records
//! (`World::record` → `fire_now` for `after_ms` 0, else the `scripted_nemesis` task).

use std::sync::Arc;
use std::time::Duration;

use crate::faults::{begin, finish, run};
use crate::scenario::faults::{Fault, FaultKind, When};
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
    if world.scenario.faults_in_sequence {
        madsim::task::spawn(faults_in_sequence(world.clone()));
    } else {
        for (at_ms, fault) in later_faults(&world) {
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

/// The `at_ms` faults after 0 ms (those at 0 ms were injected before any client ran:
/// `start_initial`), in the scenario's order.
fn later_faults(world: &World) -> Vec<(u64, Fault)> {
    world
        .scenario
        .faults
        .iter()
        .filter_map(|fault| match fault.when {
            When::At { at_ms } if at_ms > 0 => Some((at_ms, fault.clone())),
            _ => None,
        })
        .collect()
}

/// `faults_in_sequence`: one task starts the `at_ms` faults in time order. madsim runs the
/// ready tasks in a random order drawn from the run's one random stream
/// (madsim 0.2.34 `sim/task/mod.rs` `run_all_ready`: `try_recv_random`, then 50-100 ns more
/// per step), so one waiting task per fault from the start (the default) makes every fault
/// move the whole interleaving; here the faults after t are one pending timer of this task
/// until t, and a timer draws nothing, so the run up to t depends only on the faults up to t.
async fn faults_in_sequence(world: Arc<World>) {
    let mut faults = later_faults(&world);
    faults.sort_by_key(|(at_ms, _)| *at_ms);
    for (at_ms, fault) in faults {
        // madsim sleeps at least 1 ms: faults at the same instant start without one.
        let now_us = world.time.now_us();
        if at_ms * 1000 > now_us {
            madsim::time::sleep(Duration::from_micros(at_ms * 1000 - now_us)).await;
        }
        madsim::task::spawn(run(world.clone(), fault, None, None));
    }
}
