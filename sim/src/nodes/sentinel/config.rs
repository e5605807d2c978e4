//! sentinel.conf: what a Sentinel keeps across crashes (`sentinelFlushConfig`, and the config
//! it loads at start) — the current epoch, and for each master group its address, config epoch,
//! the vote it cast (leader and epoch) and the replicas it knows.

use std::collections::BTreeMap;

use super::{FailoverState, Inst, Master, Peer, State};
use crate::world::World;

/// The file a Sentinel keeps its state in.
const SENTINEL_CONF: &str = "sentinel.conf";

/// What a Sentinel keeps in sentinel.conf.
#[derive(Clone, Debug, Default)]
pub struct SentinelConf {
    pub current_epoch: u64,
    pub masters: BTreeMap<String, MasterConf>,
}

#[derive(Clone, Debug, Default)]
pub struct MasterConf {
    pub addr: String,
    pub config_epoch: u64,
    pub leader: Option<String>,
    pub leader_epoch: u64,
    pub replicas: Vec<String>,
}

/// The current epoch and the master groups as sentinel.conf last said (as the scenario's
/// topology says on the first start).
pub(super) fn load(world: &World, name: &str, now: i64) -> (u64, Vec<Master>) {
    let scenario = &world.scenario;
    let conf = world
        .disks
        .with(name, |d| d.read::<SentinelConf>(SENTINEL_CONF));
    let sentinels = scenario.sentinel_names();
    let mut masters = Vec::new();
    for group in scenario.master_names() {
        let saved = conf.as_ref().and_then(|c| c.masters.get(&group)).cloned();
        let saved = saved.unwrap_or_else(|| MasterConf {
            addr: group.clone(),
            replicas: scenario.replica_names(&group),
            ..MasterConf::default()
        });
        masters.push(Master {
            name: group.clone(),
            addr: saved.addr.clone(),
            config_epoch: saved.config_epoch,
            inst: Inst::new(now),
            o_down: false,
            replicas: saved
                .replicas
                .iter()
                .filter(|r| **r != saved.addr)
                .map(|r| (r.clone(), Inst::new(now)))
                .collect(),
            peers: sentinels
                .iter()
                .filter(|s| *s != name)
                .map(|s| (s.clone(), Peer::default()))
                .collect(),
            leader: saved.leader,
            leader_epoch: saved.leader_epoch,
            failover_state: FailoverState::None,
            force_failover: false,
            failover_epoch: 0,
            failover_start_time: 0,
            failover_state_change_time: 0,
            promoted: None,
        });
    }
    (conf.as_ref().map_or(0, |c| c.current_epoch), masters)
}

impl State {
    /// `sentinelFlushConfig`: sentinel.conf is rewritten (and fsynced) on every change.
    pub(super) fn flush_config(&self) {
        let conf = SentinelConf {
            current_epoch: self.current_epoch,
            masters: self
                .masters
                .iter()
                .enumerate()
                .map(|(m, master)| {
                    // rewriteConfigSentinelOption: the current address (the promoted replica
                    // once it acknowledged), and the old master among the replicas instead.
                    let addr = self.current_master_addr(m);
                    let replicas = master
                        .replicas
                        .keys()
                        .map(|r| {
                            if *r == addr {
                                master.addr.clone()
                            } else {
                                r.clone()
                            }
                        })
                        .collect();
                    (
                        master.name.clone(),
                        MasterConf {
                            addr,
                            config_epoch: master.config_epoch,
                            leader: master.leader.clone(),
                            leader_epoch: master.leader_epoch,
                            replicas,
                        },
                    )
                })
                .collect(),
        };
        self.world
            .disks
            .with(&self.name, |d| d.write(SENTINEL_CONF, conf));
    }
}
