//! Monitoring (always, even in TILT; `sentinelSendPeriodicCommands`): every instance (masters,
//! replicas, the other Sentinels) gets a PING once a second (`min(down-after, 1 s)`), INFO every
//! 10 s (every second for the replicas of a master in ODOWN or failover), and every other
//! Sentinel a hello with this Sentinel's view of the master's configuration every 2 s (sent
//! directly, as `PUBLISH __sentinel__:hello` to the Sentinel; the copy Redis also relays through
//! the monitored instances' Pub/Sub is not simulated). INFO refreshes what an instance reports
//! (`sentinelRefreshInstanceInfo`: role, master, offset, new replicas); a hello with a higher
//! config epoch for a master makes this Sentinel adopt its address
//! (`sentinelProcessHelloMessage`).
//!
//! The verdicts, skipped in TILT: SDOWN when an instance has not answered a PING for
//! `down-after-milliseconds`, or a master reports itself a replica for long
//! (`sentinelCheckSubjectivelyDown`); ODOWN when the master is SDOWN for the quorum, as the
//! other Sentinels answer `is-master-down-by-addr` every second (`sentinelCheckObjectivelyDown`).

use model::redis::Reply;

use super::{
    Callback, FailoverState, HELLO_CHANNEL, INFO_PERIOD, Inst, Kind, PING_PERIOD, PUBLISH_PERIOD,
    Role, State,
};
use crate::nodes::{REDIS_PORT, SENTINEL_PORT};
use crate::world::procs::node_ip;

const MIN_LINK_RECONNECT_PERIOD: i64 = 15_000;
const MAX_PENDING_COMMANDS: usize = 100;

impl State {
    /// `sentinelSendPeriodicCommands`.
    pub(super) fn periodic(&mut self, m: usize, node: &str, kind: Kind) {
        let now = self.now();
        let master = &self.masters[m];
        let (info_refresh, replica_needs_fast_info) = match kind {
            Kind::Master => (master.inst.info_refresh, false),
            Kind::Replica => {
                let r = &master.replicas[node];
                (
                    r.info_refresh,
                    master.o_down
                        || master.failover_state != FailoverState::None
                        || r.master_link_down_time != 0,
                )
            }
            Kind::Sentinel => (0, false),
        };
        let last_pub_time = master.peers.get(node).map_or(0, |p| p.last_pub_time);
        let down_after = self.down_after;
        let link = self.link(node);
        if link.disconnected() || link.pending.len() >= MAX_PENDING_COMMANDS {
            return;
        }
        let info_period = if replica_needs_fast_info {
            1000
        } else {
            INFO_PERIOD
        };
        let ping_period = down_after.min(PING_PERIOD);
        let send_ping =
            now - link.last_pong_time > ping_period && now - link.last_ping_time > ping_period / 2;
        if kind != Kind::Sentinel && (info_refresh == 0 || now - info_refresh > info_period) {
            self.send_words(node, &["INFO", "replication"], Callback::Info);
        }
        if send_ping && self.send_words(node, &["PING"], Callback::Ping) {
            let link = self.link(node);
            link.last_ping_time = now;
            if link.act_ping_time == 0 {
                link.act_ping_time = now;
            }
        }
        if kind == Kind::Sentinel
            && now - last_pub_time > PUBLISH_PERIOD
            && self.send_words(
                node,
                &["PUBLISH", HELLO_CHANNEL, &self.hello_message(m)],
                Callback::Discard,
            )
            && let Some(peer) = self.masters[m].peers.get_mut(node)
        {
            peer.last_pub_time = now;
        }
    }

    /// The hello message about master group `m` (`sentinelSendHello`), built only when it is
    /// sent (built for every instance on every tick, its formatting was a fifth of a Sentinel
    /// failover run, issue 32).
    fn hello_message(&self, m: usize) -> String {
        let master = &self.masters[m];
        format!(
            "{},{},{},{},{},{},{},{}",
            node_ip(&self.name),
            SENTINEL_PORT,
            self.name,
            self.current_epoch,
            master.name,
            node_ip(&self.current_master_addr(m)),
            REDIS_PORT,
            master.config_epoch
        )
    }

    /// `sentinelPingReplyCallback`: a valid reply makes the instance available.
    pub(super) fn on_pong(&mut self, node: &str, reply: &Reply) {
        let now = self.now();
        let link = self.link(node);
        let valid = match reply {
            Reply::Status(s) => s.starts_with("PONG"),
            Reply::Error(e) => e.starts_with(b"LOADING") || e.starts_with(b"MASTERDOWN"),
            _ => false,
        };
        if valid {
            link.last_avail_time = now;
            link.act_ping_time = 0;
        }
        link.last_pong_time = now;
    }

    /// `sentinelInfoReplyCallback`: every master group that knows the instance refreshes it.
    pub(super) fn on_info(&mut self, node: &str, reply: Reply) {
        if let Reply::Bulk(text) = reply {
            let text = String::from_utf8_lossy(&text).into_owned();
            for m in 0..self.masters.len() {
                if self.masters[m].addr == node || self.masters[m].replicas.contains_key(node) {
                    self.refresh_info(m, node, &text);
                }
            }
        }
    }

    /// `sentinelRefreshInstanceInfo`.
    pub(super) fn refresh_info(&mut self, m: usize, node: &str, info: &str) {
        let now = self.now();
        let tilt = self.tilt;
        let mut role = Role::Unknown;
        let mut new_replicas = Vec::new();
        let is_master_addr = self.masters[m].addr == node;
        {
            let master = &mut self.masters[m];
            let inst = if is_master_addr {
                &mut master.inst
            } else {
                master
                    .replicas
                    .get_mut(node)
                    .expect("checked by the caller")
            };
            inst.master_link_down_time = 0;
            for line in info.split("\r\n") {
                if is_master_addr
                    && line.starts_with("slave")
                    && line[5..].starts_with(|c: char| c.is_ascii_digit())
                    && let Some(ip) = line
                        .split(['=', ','])
                        .skip_while(|w| !w.ends_with("ip"))
                        .nth(1)
                {
                    new_replicas.push(ip.to_string());
                }
                if let Some(v) = line.strip_prefix("master_link_down_since_seconds:") {
                    inst.master_link_down_time = v.parse::<i64>().unwrap_or(0) * 1000;
                }
                if line == "role:master" {
                    role = Role::Master;
                } else if line == "role:slave" {
                    role = Role::Slave;
                }
                if role == Role::Slave {
                    if let Some(host) = line.strip_prefix("master_host:")
                        && inst.slave_master_host.as_deref() != Some(host)
                    {
                        inst.slave_master_host = Some(host.to_string());
                        inst.slave_conf_change_time = now;
                    }
                    if let Some(status) = line.strip_prefix("master_link_status:") {
                        inst.slave_master_link_up = status == "up";
                    }
                    if let Some(off) = line.strip_prefix("slave_repl_offset:") {
                        inst.slave_repl_offset = off.parse().unwrap_or(0);
                    }
                }
            }
            inst.info_refresh = now;
            if role != inst.role_reported {
                inst.role_reported_time = now;
                inst.role_reported = role;
                if role == Role::Slave {
                    inst.slave_conf_change_time = now;
                }
            }
        }
        for ip in new_replicas {
            let name = self.ip_name(&ip);
            let master = &mut self.masters[m];
            if name != master.addr && !master.replicas.contains_key(&name) {
                master.replicas.insert(name.clone(), Inst::new(now));
                let group = master.name.clone();
                self.event("+slave", &group, name);
                self.flush_config();
            }
        }
        if tilt {
            return;
        }
        if is_master_addr {
            // A master claiming to be a replica: nothing to do, it will go SDOWN eventually.
            return;
        }
        self.act_on_role_report(m, node, role, now);
    }

    /// `sentinelProcessHelloMessage`.
    pub(super) fn process_hello(&mut self, hello: &str) {
        let parts: Vec<&str> = hello.split(',').collect();
        if parts.len() != 8 {
            return;
        }
        let (Ok(epoch), Ok(master_epoch)) = (parts[3].parse::<u64>(), parts[7].parse::<u64>())
        else {
            return;
        };
        let Some(m) = self.master_index(parts[4]) else {
            return;
        };
        let group = parts[4].to_string();
        if epoch > self.current_epoch {
            self.current_epoch = epoch;
            self.flush_config();
            self.event("+new-epoch", &group, epoch.to_string());
        }
        let addr = self.ip_name(parts[5]);
        if self.masters[m].config_epoch < master_epoch {
            self.masters[m].config_epoch = master_epoch;
            if self.masters[m].addr != addr {
                self.event(
                    "+config-update-from",
                    &group,
                    format!("sentinel {}", parts[2]),
                );
                self.switch_master(m, &addr);
            }
            self.flush_config();
        }
    }

    /// `sentinelCheckSubjectivelyDown`.
    pub(super) fn check_sdown(&mut self, m: usize, node: &str, kind: Kind) {
        let now = self.now();
        let down_after = self.down_after;
        let group = self.masters[m].name.clone();
        let link = self.link(node);
        let elapsed = if link.act_ping_time != 0 {
            now - link.act_ping_time
        } else if link.disconnected() {
            now - link.last_avail_time
        } else {
            0
        };
        if !link.disconnected()
            && now - link.cc_conn_time > MIN_LINK_RECONNECT_PERIOD
            && link.act_ping_time != 0
            && now - link.act_ping_time > down_after / 2
            && now - link.last_pong_time > down_after / 2
        {
            self.close_link(node);
        }
        if kind == Kind::Sentinel {
            return;
        }
        let master = &mut self.masters[m];
        let inst = match kind {
            Kind::Master => &mut master.inst,
            _ => master.replicas.get_mut(node).expect("known replica"),
        };
        let misreported = kind == Kind::Master
            && inst.role_reported == Role::Slave
            && now - inst.role_reported_time > down_after + INFO_PERIOD * 2;
        if elapsed > down_after || misreported {
            if !inst.s_down {
                inst.s_down = true;
                inst.s_down_since = now;
                self.event("+sdown", &group, node.to_string());
            }
        } else if inst.s_down {
            inst.s_down = false;
            self.event("-sdown", &group, node.to_string());
        }
    }

    /// `sentinelCheckObjectivelyDown`.
    pub(super) fn check_odown(&mut self, m: usize) {
        let now = self.now();
        let quorum = self.quorum;
        let master = &mut self.masters[m];
        let mut votes = 0;
        if master.inst.s_down {
            votes = 1 + master.peers.values().filter(|p| p.master_down).count();
        }
        let odown = master.inst.s_down && votes >= quorum;
        let (group, addr) = (master.name.clone(), master.addr.clone());
        if odown && !master.o_down {
            master.o_down = true;
            let _ = now;
            self.event("+odown", &group, format!("{addr} #quorum {votes}/{quorum}"));
        } else if !odown && master.o_down {
            master.o_down = false;
            self.event("-odown", &group, addr);
        }
    }
}
