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
            FaultKind::ClockJump { node, delta_ms } => {
                if *delta_ms > 0
                    && model::marks::on()
                    && world.history.has_key_owner(node)
                    && world.history.some_client_holds()
                {
                    model::marks::mark(model::marks::Mark::ClockJumpWhileHeld);
                }
                world.time.jump(node, *delta_ms)
            }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use model::marks::Mark;

    use crate::hunt::run_marked;
    use crate::scenario::Scenario;

    /// The marks a run with one clock jump on the master fires: the jump `"on"` a trigger
    /// (`null`: at 0 ms, before anyone holds), by `delta_ms`.
    fn jump_marks(on: &str, delta_ms: i64) -> Vec<Mark> {
        let when = if on == "null" {
            r#""at_ms": 0"#.to_string()
        } else {
            format!(r#""on": {on}"#)
        };
        let text = format!(
            r#"{{
              "name": "clock-jump-mark",
              "description": "one jump of the master's clock",
              "source": "sim/src/faults/kinds.rs",
              "duration_ms": 3000,
              "topology": {{ "masters": 1 }},
              "scheme": {{ "name": "set-nx-px-lua", "ttl_ms": 5000 }},
              "clients": {{ "count": 2, "acquisitions": 3, "hold_ms": [100, 100], "think_ms": [0, 10] }},
              "faults": [ {{ "kind": "clock_jump", "node": "redis-1", "delta_ms": {delta_ms}, {when} }} ]
            }}"#
        );
        let scenario = Scenario::parse(&text, "clock-jump-mark.json").expect("a valid scenario");
        let (_, hits) = run_marked(&Arc::new(scenario), 0).expect("runs");
        hits.into_iter().map(|h| h.mark).collect()
    }

    #[test]
    fn a_forward_jump_of_a_server_whose_key_is_held_is_marked() {
        let acquired = r#"{ "event": "acquired" }"#;
        assert!(jump_marks(acquired, 2000).contains(&Mark::ClockJumpWhileHeld));
        // Backwards: the lease ends later, not sooner.
        assert!(!jump_marks(acquired, -2000).contains(&Mark::ClockJumpWhileHeld));
        // Before any lock: nothing held to end early.
        assert!(!jump_marks("null", 2000).contains(&Mark::ClockJumpWhileHeld));
    }
}
