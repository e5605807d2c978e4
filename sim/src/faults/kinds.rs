//! What each fault kind does to the world: `inject` and `heal` call the hooks of the resources
//! it hits (`world::procs`, `world::time`, `world::net`, `world::storage`).

use std::sync::Arc;
use std::time::Duration;

use model::history::EventKind;

use crate::nodes::SENTINEL_PORT;
use crate::nodes::resp::RespConn;
use crate::scenario::faults::FaultKind;
use crate::world::World;

impl FaultKind {
    pub(super) fn inject(&self, world: &Arc<World>) {
        match self {
            FaultKind::Pause { node } => world.procs.pause(node),
            FaultKind::Crash {
                node,
                restart_after_ms,
            } => {
                // The process dies. What it wrote to its sockets is the kernel's now: it still
                // arrives (after any extra delay of its link), then the peers read EOF, as a
                // killed process's kernel sends FIN after the data (`world::net::socket`). What
                // it wrote to its AOF is the kernel's too: the disk keeps it.
                world.procs.crash(node);
                world.lost_key_owner(node, "crash");
                world.lock_gone(node);
                if restart_after_ms.is_none() {
                    world.procs.gone(node);
                }
            }
            FaultKind::PowerLoss {
                node,
                restart_after_ms,
            } => {
                // The machine goes down with its process: its peers hear nothing more (no data
                // in flight, no FIN), connection attempts go unanswered while it is down, and
                // what was not fsynced is lost.
                world.procs.crash(node);
                world.net.silence_peers(node);
                clog_links(world, &machine_links(node), true);
                world.disks.power_loss(node);
                world.lost_key_owner(node, "power_loss");
                world.lock_gone(node);
                if restart_after_ms.is_none() {
                    world.procs.gone(node);
                }
            }
            FaultKind::Delay { from, to, extra_ms } => {
                world.net.add_delay(from, to, extra_ms * 1000)
            }
            FaultKind::DropConnections { node } => {
                world.net.drop_connections(node);
            }
            FaultKind::Failover { master } => {
                madsim::task::spawn_local(request_failover(world.clone(), master.clone()));
            }
            FaultKind::ClockJump { node, delta_ms } => world.time.jump(node, *delta_ms),
            FaultKind::ClockDrift { node, rate } => world.time.set_rate(node, *rate),
            FaultKind::Partition { .. } | FaultKind::Isolate { .. } => {
                clog_links(world, self, true)
            }
        }
    }

    pub(super) fn heal(&self, world: &World) {
        match self {
            FaultKind::Delay { from, to, extra_ms } => {
                world.net.remove_delay(from, to, extra_ms * 1000)
            }
            FaultKind::DropConnections { .. } | FaultKind::Failover { .. } => {}
            FaultKind::Pause { node } => world.procs.resume(node),
            FaultKind::Crash { node, .. } => world.procs.restart(node),
            FaultKind::PowerLoss { node, .. } => {
                clog_links(world, &machine_links(node), false);
                world.net.reset_silenced(node);
                world.procs.restart(node);
            }
            // A clock step is not undone (NTP would slew it back slowly); healing ends the fault window.
            FaultKind::ClockJump { .. } => {}
            FaultKind::ClockDrift { node, .. } => world.time.set_rate(node, 1.0),
            FaultKind::Partition { .. } | FaultKind::Isolate { .. } => {
                clog_links(world, self, false)
            }
        }
    }
}

/// Cuts (`cut`) or restores the directed links a network fault names.
fn clog_links(world: &World, kind: &FaultKind, cut: bool) {
    for (a, b) in kind.links(&world.scenario.node_names()) {
        if cut {
            world.net.clog(&a, &b);
        } else {
            world.net.unclog(&a, &b);
        }
    }
}

/// Every link of a machine that lost power: the links `isolate` cuts.
fn machine_links(node: &str) -> FaultKind {
    FaultKind::Isolate {
        node: node.to_string(),
    }
}

/// The `failover` fault: `SENTINEL FAILOVER <master>` to the first Sentinel that answers.
async fn request_failover(world: Arc<World>, master: String) {
    for sentinel in world.scenario.sentinel_names() {
        let attempt = async {
            let mut conn = RespConn::connect(&world, "nemesis", &sentinel, SENTINEL_PORT).await?;
            conn.call(&[
                b"SENTINEL".to_vec(),
                b"FAILOVER".to_vec(),
                master.as_bytes().to_vec(),
            ])
            .await
        };
        if let Ok(Ok(reply)) = world.time.timeout(Duration::from_secs(1), attempt).await {
            world.record(
                "nemesis",
                EventKind::Sentinel {
                    what: "failover-requested".into(),
                    master: master.clone(),
                    detail: format!("{sentinel}: {}", model::history::render_reply(&reply)),
                },
            );
            return;
        }
    }
}
