//! The leader election of a failover, with epochs: a Sentinel that sees its master ODOWN starts
//! a failover in a new epoch (`sentinelStartFailoverIfNeeded`), asks every other Sentinel for
//! its view and its vote (`sentinelAskMasterStateToOtherSentinels`); each votes once per epoch,
//! for the first asker (`sentinelVoteLeader`); the winner needs a majority and the quorum
//! (`sentinelGetLeader`).

use std::collections::BTreeMap;

use model::redis::Reply;
use rand::Rng;

use super::{Callback, FailoverState, State};
use crate::nodes::REDIS_PORT;
use crate::world::procs::node_ip;

const ASK_PERIOD: i64 = 1000;
const MAX_DESYNC: i64 = 1000;

impl State {
    /// `sentinelStartFailoverIfNeeded` + `sentinelStartFailover`.
    pub(super) fn start_failover_if_needed(&mut self, m: usize) -> bool {
        let now = self.now();
        let master = &self.masters[m];
        if !master.o_down || master.failover_state != FailoverState::None {
            return false;
        }
        if now - master.failover_start_time < self.failover_timeout * 2 {
            return false;
        }
        self.start_failover(m);
        true
    }

    pub(super) fn start_failover(&mut self, m: usize) {
        let now = self.now();
        self.current_epoch += 1;
        let desync = self.rng.gen_range(0..MAX_DESYNC);
        let epoch = self.current_epoch;
        let master = &mut self.masters[m];
        master.failover_state = FailoverState::WaitStart;
        master.failover_epoch = epoch;
        master.failover_start_time = now + desync;
        master.failover_state_change_time = now;
        let group = master.name.clone();
        self.flush_config();
        self.event("+new-epoch", &group, epoch.to_string());
        self.event("+try-failover", &group, String::new());
    }

    /// `sentinelAskMasterStateToOtherSentinels`.
    pub(super) fn ask_others(&mut self, m: usize, forced: bool) {
        let now = self.now();
        let master = &mut self.masters[m];
        let s_down = master.inst.s_down;
        let mut ask = Vec::new();
        for (name, peer) in master.peers.iter_mut() {
            if now - peer.last_master_down_reply_time > ASK_PERIOD * 5 {
                peer.master_down = false;
                peer.leader = None;
            }
            if !s_down {
                continue;
            }
            if !forced && now - peer.last_master_down_reply_time < ASK_PERIOD {
                continue;
            }
            ask.push(name.clone());
        }
        if ask.is_empty() {
            return;
        }
        // Built only when some peer is asked: this runs on every tick of every master.
        let addr = node_ip(&master.addr).to_string();
        let runid = if master.failover_state > FailoverState::None {
            self.name.clone()
        } else {
            "*".to_string()
        };
        let group = master.name.clone();
        let epoch = self.current_epoch.to_string();
        let port = REDIS_PORT.to_string();
        for peer in ask {
            self.send_words(
                &peer,
                &[
                    "SENTINEL",
                    "is-master-down-by-addr",
                    &addr,
                    &port,
                    &epoch,
                    &runid,
                ],
                Callback::IsMasterDown {
                    master: group.clone(),
                },
            );
        }
    }

    /// `sentinelReceiveIsMasterDownReply`: another Sentinel's view of the master, and its vote.
    pub(super) fn on_is_master_down(&mut self, node: &str, master: &str, reply: Reply) {
        let now = self.now();
        let Reply::Array(items) = reply else { return };
        if items.len() != 3 {
            return;
        }
        let (Some(down), Some(leader), Some(epoch)) = (
            items[0].as_integer(),
            items[1]
                .as_bulk()
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            items[2].as_integer(),
        ) else {
            return;
        };
        let Some(m) = self.master_index(master) else {
            return;
        };
        let peer = self.masters[m].peers.entry(node.to_string()).or_default();
        peer.last_master_down_reply_time = now;
        peer.master_down = down == 1;
        if leader != "*" {
            peer.leader = Some(leader);
            peer.leader_epoch = epoch as u64;
        }
    }

    /// `SENTINEL is-master-down-by-addr ip port epoch runid`: whether this Sentinel sees the
    /// master down (never in TILT), and with a run id its vote for that epoch.
    pub(super) fn is_master_down_by_addr(
        &mut self,
        ip: &str,
        req_epoch: u64,
        runid: &str,
    ) -> Reply {
        let addr = self.ip_name(ip);
        let Some(m) = self.masters.iter().position(|m| m.addr == addr) else {
            return Reply::Array(vec![Reply::Integer(0), Reply::bulk("*"), Reply::Integer(0)]);
        };
        let isdown = !self.tilt && self.masters[m].inst.s_down;
        let (leader, epoch) = if runid != "*" {
            self.vote_leader(m, req_epoch, runid)
        } else {
            (None, 0)
        };
        Reply::Array(vec![
            Reply::Integer(i64::from(isdown)),
            Reply::bulk(leader.unwrap_or_else(|| "*".into())),
            Reply::Integer(epoch as i64),
        ])
    }

    /// `sentinelVoteLeader`.
    pub(super) fn vote_leader(
        &mut self,
        m: usize,
        req_epoch: u64,
        req_runid: &str,
    ) -> (Option<String>, u64) {
        let now = self.now();
        let group = self.masters[m].name.clone();
        if req_epoch > self.current_epoch {
            self.current_epoch = req_epoch;
            self.flush_config();
            self.event("+new-epoch", &group, req_epoch.to_string());
        }
        let current = self.current_epoch;
        let desync = self.rng.gen_range(0..MAX_DESYNC);
        let myid = self.name.clone();
        let master = &mut self.masters[m];
        if master.leader_epoch < req_epoch && current <= req_epoch {
            master.leader = Some(req_runid.to_string());
            master.leader_epoch = current;
            if req_runid != myid {
                master.failover_start_time = now + desync;
            }
            self.flush_config();
            self.event("+vote-for-leader", &group, format!("{req_runid} {current}"));
        }
        let master = &self.masters[m];
        (master.leader.clone(), master.leader_epoch)
    }

    /// `sentinelGetLeader`.
    pub(super) fn get_leader(&mut self, m: usize, epoch: u64) -> Option<String> {
        let current = self.current_epoch;
        let master = &self.masters[m];
        let voters = master.peers.len() + 1;
        let mut counters: BTreeMap<String, usize> = BTreeMap::new();
        for peer in master.peers.values() {
            if let Some(leader) = &peer.leader
                && peer.leader_epoch == current
            {
                *counters.entry(leader.clone()).or_default() += 1;
            }
        }
        let mut winner: Option<String> = None;
        let mut max_votes = 0;
        for (runid, votes) in &counters {
            if *votes > max_votes {
                max_votes = *votes;
                winner = Some(runid.clone());
            }
        }
        let candidate = winner.clone().unwrap_or_else(|| self.name.clone());
        let (myvote, leader_epoch) = self.vote_leader(m, epoch, &candidate);
        if let Some(myvote) = myvote
            && leader_epoch == epoch
        {
            let votes = counters.entry(myvote.clone()).or_default();
            *votes += 1;
            if *votes > max_votes {
                max_votes = *votes;
                winner = Some(myvote);
            }
        }
        let voters_quorum = voters / 2 + 1;
        winner.filter(|_| max_votes >= voters_quorum && max_votes >= self.quorum)
    }
}
