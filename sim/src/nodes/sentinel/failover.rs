//! The failover, once elected (`sentinelFailoverStateMachine`): select the replica with the
//! best offset (`sentinelSelectSlave`), promote it (`REPLICAOF NO ONE`), wait for its INFO to
//! say master, re-point the other replicas one at a time (`sentinelFailoverReconfNextSlave`),
//! then switch the master's address (`sentinelResetMasterAndChangeAddress`). A master that
//! comes back reporting itself a master is converted to a replica of the new one only after it
//! has been seen that way for 8 s (`SENTINEL_PUBLISH_PERIOD*4`) — until then it accepts writes
//! the new master never sees.

use model::marks::{Mark, mark};
use model::redis::Reply;

use super::{Callback, FailoverState, INFO_PERIOD, Inst, PING_PERIOD, PUBLISH_PERIOD, Role, State};
use crate::nodes::REDIS_PORT;
use crate::world::procs::node_ip;

const SLAVE_RECONF_TIMEOUT: i64 = 10_000;
const ELECTION_TIMEOUT: i64 = 10_000;
const PARALLEL_SYNCS: usize = 1;

impl State {
    /// `sentinelFailoverStateMachine`.
    pub(super) fn failover_state_machine(&mut self, m: usize) {
        let now = self.now();
        let group = self.masters[m].name.clone();
        match self.masters[m].failover_state {
            FailoverState::None | FailoverState::UpdateConfig => {}
            FailoverState::WaitStart => {
                let epoch = self.masters[m].failover_epoch;
                let leader = self.get_leader(m, epoch);
                let is_leader = leader.as_deref() == Some(self.name.as_str());
                if !is_leader && !self.masters[m].force_failover {
                    let timeout = ELECTION_TIMEOUT.min(self.failover_timeout);
                    if now - self.masters[m].failover_start_time > timeout {
                        self.abort_failover(m, "-failover-abort-not-elected");
                    }
                    return;
                }
                self.event("+elected-leader", &group, format!("epoch {epoch}"));
                let master = &mut self.masters[m];
                master.failover_state = FailoverState::SelectSlave;
                master.failover_state_change_time = now;
            }
            FailoverState::SelectSlave => match self.select_slave(m) {
                None => self.abort_failover(m, "-failover-abort-no-good-slave"),
                Some(slave) => {
                    self.event("+selected-slave", &group, slave.clone());
                    let master = &mut self.masters[m];
                    if let Some(r) = master.replicas.get_mut(&slave) {
                        r.promoted = true;
                    }
                    master.promoted = Some(slave);
                    master.failover_state = FailoverState::SendSlaveofNoOne;
                    master.failover_state_change_time = now;
                }
            },
            FailoverState::SendSlaveofNoOne => {
                let promoted = self.masters[m].promoted.clone().expect("selected");
                if self.link(&promoted).disconnected() {
                    if now - self.masters[m].failover_state_change_time > self.failover_timeout {
                        self.abort_failover(m, "-failover-abort-slave-timeout");
                    }
                    return;
                }
                if self.send_slaveof(&promoted, None) {
                    self.event("+failover-state-wait-promotion", &group, promoted);
                    let master = &mut self.masters[m];
                    master.failover_state = FailoverState::WaitPromotion;
                    master.failover_state_change_time = now;
                }
            }
            FailoverState::WaitPromotion => {
                if now - self.masters[m].failover_state_change_time > self.failover_timeout {
                    self.abort_failover(m, "-failover-abort-slave-timeout");
                }
            }
            FailoverState::ReconfSlaves => self.reconf_next_slave(m),
        }
    }

    /// `sentinelSelectSlave`.
    pub(super) fn select_slave(&mut self, m: usize) -> Option<String> {
        let now = self.now();
        let master = &self.masters[m];
        let mut max_master_down_time = 0;
        if master.inst.s_down {
            max_master_down_time += now - master.inst.s_down_since;
        }
        max_master_down_time += self.down_after * 10;
        let info_validity = if master.inst.s_down {
            PING_PERIOD * 5
        } else {
            INFO_PERIOD * 3
        };
        let mut candidates: Vec<(i64, String)> = Vec::new();
        for (name, r) in &master.replicas {
            let Some(link) = self.links.get(name) else {
                continue;
            };
            if r.s_down || link.disconnected() || now - link.last_avail_time > PING_PERIOD * 5 {
                continue;
            }
            if now - r.info_refresh > info_validity {
                continue;
            }
            if r.master_link_down_time > max_master_down_time {
                continue;
            }
            candidates.push((r.slave_repl_offset, name.clone()));
        }
        // Same priority for every replica: the best offset, then the smaller run id (name).
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let selected = candidates.into_iter().next().map(|(_, name)| name);
        if selected.is_some() {
            mark(Mark::SentinelReplicaSelected);
        }
        selected
    }

    pub(super) fn abort_failover(&mut self, m: usize, why: &str) {
        mark(Mark::SentinelFailoverAborted);
        let now = self.now();
        let master = &mut self.masters[m];
        master.failover_state = FailoverState::None;
        master.force_failover = false;
        master.failover_state_change_time = now;
        if let Some(p) = master.promoted.take()
            && let Some(r) = master.replicas.get_mut(&p)
        {
            r.promoted = false;
        }
        let group = master.name.clone();
        self.event(why, &group, String::new());
    }

    /// What `sentinelRefreshInstanceInfo` does with a replica's reported role, outside TILT: a
    /// promoted replica that reports itself master moves the failover on; an old master seen
    /// as a master for long, or a replica following the wrong master, is re-pointed; a replica
    /// being reconfigured reports its progress.
    pub(super) fn act_on_role_report(&mut self, m: usize, node: &str, role: Role, now: i64) {
        let master_addr = self.masters[m].addr.clone();
        let group = self.masters[m].name.clone();
        let master_sane = self.master_looks_sane(m);
        let failover_timeout = self.failover_timeout;
        let inst = self.masters[m].replicas[node].clone();
        if role == Role::Master {
            let in_promotion =
                inst.promoted && self.masters[m].failover_state == FailoverState::WaitPromotion;
            if in_promotion {
                let master = &mut self.masters[m];
                master.config_epoch = master.failover_epoch;
                master.failover_state = FailoverState::ReconfSlaves;
                master.failover_state_change_time = now;
                self.flush_config();
                self.event("+promoted-slave", &group, node.to_string());
                self.event("+failover-state-reconf-slaves", &group, String::new());
                // sentinelForceHelloUpdateForMaster: tell the others at once.
                for peer in self.masters[m].peers.values_mut() {
                    peer.last_pub_time = 0;
                }
            } else {
                let wait_time = PUBLISH_PERIOD * 4;
                if !inst.promoted
                    && master_sane
                    && inst.no_down_for(now, wait_time)
                    && now - inst.role_reported_time > wait_time
                    && self.send_slaveof(node, Some(&master_addr))
                {
                    self.event("+convert-to-slave", &group, node.to_string());
                }
            }
        }
        let replicating_elsewhere = role == Role::Slave
            && inst
                .slave_master_host
                .as_deref()
                .map(|h| self.ip_name(h))
                .as_deref()
                != Some(master_addr.as_str());
        if replicating_elsewhere
            && master_sane
            && inst.no_down_for(now, failover_timeout)
            && now - inst.slave_conf_change_time > failover_timeout
            && self.send_slaveof(node, Some(&master_addr))
        {
            self.event("+fix-slave-config", &group, node.to_string());
        }
        if role == Role::Slave && (inst.reconf_sent || inst.reconf_inprog) {
            let promoted = self.masters[m].promoted.clone();
            let host_is_promoted = inst
                .slave_master_host
                .as_deref()
                .map(|h| self.ip_name(h))
                .is_some_and(|h| Some(&h) == promoted.as_ref());
            let r = self.masters[m].replicas.get_mut(node).expect("still there");
            if r.reconf_sent && host_is_promoted {
                r.reconf_sent = false;
                r.reconf_inprog = true;
                self.event("+slave-reconf-inprog", &group, node.to_string());
            }
            let r = self.masters[m].replicas.get_mut(node).expect("still there");
            if r.reconf_inprog && r.slave_master_link_up {
                r.reconf_inprog = false;
                r.reconf_done = true;
                self.event("+slave-reconf-done", &group, node.to_string());
            }
        }
    }

    /// `sentinelMasterLooksSane`.
    pub(super) fn master_looks_sane(&self, m: usize) -> bool {
        let master = &self.masters[m];
        master.inst.role_reported == Role::Master
            && !master.inst.s_down
            && !master.o_down
            && self.now() - master.inst.info_refresh < INFO_PERIOD * 2
    }

    /// `sentinelSendSlaveOf`: REPLICAOF, CONFIG REWRITE, CLIENT KILL (pipelined; MULTI/EXEC
    /// is not simulated — the node runs the pipeline without interleaving anyway).
    pub(super) fn send_slaveof(&mut self, node: &str, master: Option<&str>) -> bool {
        let (host, port) = match master {
            None => ("NO".to_string(), "ONE".to_string()),
            Some(m) => (node_ip(m).to_string(), REDIS_PORT.to_string()),
        };
        if self.link(node).disconnected() {
            return false;
        }
        self.send_words(node, &["REPLICAOF", &host, &port], Callback::Discard)
            && self.send_words(node, &["CONFIG", "REWRITE"], Callback::Discard)
            && self.send_words(
                node,
                &["CLIENT", "KILL", "TYPE", "normal"],
                Callback::Discard,
            )
            && self.send_words(
                node,
                &["CLIENT", "KILL", "TYPE", "pubsub"],
                Callback::Discard,
            )
    }

    /// `sentinelFailoverReconfNextSlave` + `sentinelFailoverDetectEnd`.
    pub(super) fn reconf_next_slave(&mut self, m: usize) {
        let now = self.now();
        let group = self.masters[m].name.clone();
        let promoted = self.masters[m].promoted.clone().expect("promoted");
        let mut in_progress = self.masters[m]
            .replicas
            .values()
            .filter(|r| r.reconf_sent || r.reconf_inprog)
            .count();
        let names: Vec<String> = self.masters[m].replicas.keys().cloned().collect();
        for name in names {
            if in_progress >= PARALLEL_SYNCS {
                break;
            }
            let r = self.masters[m].replicas.get_mut(&name).expect("listed");
            if r.promoted || r.reconf_done {
                continue;
            }
            if r.reconf_sent && now - r.slave_reconf_sent_time > SLAVE_RECONF_TIMEOUT {
                r.reconf_sent = false;
                r.reconf_done = true;
                self.event("-slave-reconf-sent-timeout", &group, name.clone());
            }
            let r = &self.masters[m].replicas[&name];
            if r.reconf_sent || r.reconf_inprog || r.reconf_done {
                continue;
            }
            if self.link(&name).disconnected() {
                continue;
            }
            if self.send_slaveof(&name, Some(&promoted)) {
                let r = self.masters[m].replicas.get_mut(&name).expect("listed");
                r.reconf_sent = true;
                r.slave_reconf_sent_time = now;
                self.event("+slave-reconf-sent", &group, name.clone());
                in_progress += 1;
            }
        }
        // sentinelFailoverDetectEnd
        let master = &self.masters[m];
        if master.replicas.get(&promoted).is_none_or(|p| p.s_down) {
            return;
        }
        let not_reconfigured = master
            .replicas
            .values()
            .filter(|r| !(r.promoted || r.reconf_done || r.s_down))
            .count();
        let timeout = now - master.failover_state_change_time > self.failover_timeout;
        if not_reconfigured == 0 || timeout {
            if timeout {
                self.event("+failover-end-for-timeout", &group, String::new());
            }
            self.event("+failover-end", &group, String::new());
            let master = &mut self.masters[m];
            master.failover_state = FailoverState::UpdateConfig;
            master.failover_state_change_time = now;
        }
    }

    /// `sentinelResetMasterAndChangeAddress`.
    pub(super) fn switch_master(&mut self, m: usize, new_addr: &str) {
        let now = self.now();
        let master = &mut self.masters[m];
        let old = master.addr.clone();
        let mut replicas: Vec<String> = master
            .replicas
            .keys()
            .filter(|r| *r != new_addr)
            .cloned()
            .collect();
        if old != new_addr {
            replicas.push(old.clone());
        }
        master.addr = new_addr.to_string();
        master.replicas = replicas.into_iter().map(|r| (r, Inst::new(now))).collect();
        master.inst = Inst::new(now);
        master.o_down = false;
        master.failover_state = FailoverState::None;
        master.force_failover = false;
        master.failover_start_time = 0;
        master.failover_state_change_time = 0;
        master.promoted = None;
        master.leader = None;
        for peer in master.peers.values_mut() {
            peer.master_down = false;
            peer.leader = None;
        }
        let group = master.name.clone();
        self.flush_config();
        self.event(
            "+switch-master",
            &group,
            format!(
                "{group} {} {} {} {}",
                node_ip(&old),
                REDIS_PORT,
                node_ip(new_addr),
                REDIS_PORT
            ),
        );
    }

    /// `SENTINEL FAILOVER <master>`: a failover now, without the other Sentinels' agreement.
    pub(super) fn failover_command(&mut self, master: &str) -> Reply {
        match self.master_index(master) {
            None => Reply::error("ERR No such master with that name"),
            Some(m) if self.masters[m].failover_state != FailoverState::None => {
                Reply::error("INPROG Failover already in progress")
            }
            Some(m) => {
                if self.select_slave(m).is_none() {
                    return Reply::error("NOGOODSLAVE No suitable replica to promote");
                }
                let group = self.masters[m].name.clone();
                self.event("+failover-requested", &group, "SENTINEL FAILOVER".into());
                self.start_failover(m);
                self.masters[m].force_failover = true;
                Reply::ok()
            }
        }
    }
}
