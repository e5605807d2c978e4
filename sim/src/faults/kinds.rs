//! What each fault kind does to the world: `inject` and `heal` call the hooks of the resources
//! it hits (`world::procs`, `world::time`, `world::net`, `world::storage`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use model::history::EventKind;

use crate::nodes::SENTINEL_PORT;
use crate::nodes::resp::RespConn;
use crate::scenario::faults::FaultKind;
use crate::world::World;
use crate::world::procs::node_ip;

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
                // killed process's kernel sends FIN after the data (`world::net::socket`).
                world.procs.crash(node);
                // The machine went down: what was not on disk is lost, and so is the key.
                world.disks.crash(node);
                world.lost_key_owner(node, "crash");
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
                for (a, b) in self.links(&world.scenario.node_names()) {
                    let ids = (world.procs.id(&a), world.procs.id(&b));
                    world.net.clog(&a, &b, ids);
                }
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
            // A clock step is not undone (NTP would slew it back slowly); healing ends the fault window.
            FaultKind::ClockJump { .. } => {}
            FaultKind::ClockDrift { node, .. } => world.time.set_rate(node, 1.0),
            FaultKind::Partition { .. } | FaultKind::Isolate { .. } => {
                for (a, b) in self.links(&world.scenario.node_names()) {
                    let ids = (world.procs.id(&a), world.procs.id(&b));
                    world.net.unclog(&a, &b, ids);
                }
            }
        }
    }
}

/// The `failover` fault: `SENTINEL FAILOVER <master>` to the first Sentinel that answers.
async fn request_failover(world: Arc<World>, master: String) {
    for sentinel in world.scenario.sentinel_names() {
        let addr = SocketAddr::new(node_ip(&sentinel), SENTINEL_PORT);
        let attempt = async {
            let mut conn = RespConn::connect(&world, "nemesis", &sentinel, addr).await?;
            conn.call(&[
                b"SENTINEL".to_vec(),
                b"FAILOVER".to_vec(),
                master.as_bytes().to_vec(),
            ])
            .await
        };
        if let Ok(Ok(reply)) = madsim::time::timeout(Duration::from_secs(1), attempt).await {
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
