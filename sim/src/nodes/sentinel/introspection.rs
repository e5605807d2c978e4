//! What a Sentinel tells its clients about the instances it monitors: `SENTINEL MASTERS`,
//! `SENTINEL MASTER <name>`, `SENTINEL REPLICAS|SLAVES <name>`, `SENTINEL SENTINELS <name>` and
//! `ROLE`, in redis-sentinel 7.0.15's shape (`addReplySentinelRedisInstance`,
//! src/sentinel.c 3290-3480; `sentinelCommand` 3806-3835; `sentinelRoleCommand` 4213-4228):
//! a field/value map per instance (`addReplyMapLen`: a flat array in RESP2, a map in RESP3),
//! numbers as bulk strings, `flags` a comma list; and `HELLO`, which switches a connection to
//! RESP3 (`helloCommand`, src/networking.c; redis-py 8.1 sends `HELLO 3` first by default:
//! `DEFAULT_RESP_VERSION = 3`, redis/utils.py).
//!
//! Clients discover masters with these: redis-py's `Sentinel.discover_master` asks `SENTINEL
//! MASTERS` and takes the group's `ip`/`port` only when its flags say `master` and neither
//! `s_down` nor `o_down` (redis-py 8.1 `redis/sentinel.py` `check_master_state`, `discover_master`).
//!
//! Fields the model does not keep are left out rather than invented: `runid` is empty (no run
//! ids), `o-down-time` (no ODOWN start time) and a Sentinel's `last-hello-message`.

use model::redis::{HelloFields, Protocol, Reply, hello_reply};

use super::{FailoverState, Inst, Role, State};
use crate::nodes::{REDIS_PORT, SENTINEL_PORT};
use crate::world::procs::node_ip;

/// Redis's default `replica-priority` (src/config.c), which the model does not vary.
const REPLICA_PRIORITY: i64 = 100;
/// `sentinel parallel-syncs` default (src/sentinel.c `SENTINEL_DEFAULT_PARALLEL_SYNCS`).
const PARALLEL_SYNCS: i64 = 1;

/// A field/value map being built.
struct Fields(Vec<(Reply, Reply)>);

impl Fields {
    fn text(&mut self, field: &str, value: impl AsRef<[u8]>) {
        self.0.push((Reply::bulk(field), Reply::bulk(value)));
    }

    fn number(&mut self, field: &str, value: i64) {
        self.text(field, value.to_string());
    }
}

impl State {
    /// `SENTINEL MASTERS|MASTER|REPLICAS|SLAVES|SENTINELS`; `None` for any other subcommand.
    pub(super) fn introspect(&self, subcommand: &str, argv: &[Vec<u8>]) -> Option<Reply> {
        let group = |i: usize| -> Result<usize, Reply> {
            let name = argv
                .get(i)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .unwrap_or_default();
            self.master_index(&name)
                .ok_or_else(|| Reply::error("ERR No such master with that name"))
        };
        let arity = |n: usize| -> Result<(), Reply> {
            if argv.len() == n {
                Ok(())
            } else {
                Err(Reply::error(format!(
                    "ERR Wrong number of arguments for 'sentinel|{subcommand}'"
                )))
            }
        };
        let reply = match subcommand {
            "masters" => arity(2)
                .map(|()| Reply::Array((0..self.masters.len()).map(|m| self.master(m)).collect())),
            "master" => arity(3).and_then(|()| group(2)).map(|m| self.master(m)),
            "replicas" | "slaves" => arity(3).and_then(|()| group(2)).map(|m| {
                let replicas = &self.masters[m].replicas;
                Reply::Array(
                    replicas
                        .iter()
                        .map(|(node, inst)| self.replica(node, inst))
                        .collect(),
                )
            }),
            "sentinels" => arity(3).and_then(|()| group(2)).map(|m| {
                let peers = &self.masters[m].peers;
                Reply::Array(peers.keys().map(|node| self.peer(m, node)).collect())
            }),
            _ => return None,
        };
        Some(reply.unwrap_or_else(|error| error))
    }

    /// `HELLO [protover]` on a Sentinel: the server's fields as a map, and the protocol the
    /// connection speaks from now on (`current` when none or a bad one is asked for). AUTH and
    /// SETNAME are not modelled.
    pub(super) fn hello(argv: &[Vec<u8>], current: Protocol) -> (Reply, Protocol) {
        let protocol = match argv.get(1).map(Vec::as_slice) {
            None => current,
            Some(b"2") => Protocol::Resp2,
            Some(b"3") => Protocol::Resp3,
            Some(_) => {
                return (
                    Reply::error("NOPROTO unsupported protocol version"),
                    current,
                );
            }
        };
        let proto = if protocol == Protocol::Resp3 { 3 } else { 2 };
        let reply = hello_reply(&HelloFields {
            server: "redis",
            proto,
            id: 1,
            mode: "sentinel",
            role: "master",
        });
        (reply, protocol)
    }

    /// `ROLE` on a Sentinel: `["sentinel", [group, ...]]`.
    pub(super) fn role(&self) -> Reply {
        Reply::Array(vec![
            Reply::bulk("sentinel"),
            Reply::Array(self.masters.iter().map(|m| Reply::bulk(&m.name)).collect()),
        ])
    }

    /// The fields every instance has, up to `down-after-milliseconds`. `flags` are
    /// `s_down`/`o_down` and the kind, `more` those after `disconnected` (in Redis's order).
    fn generic(
        &self,
        name: &str,
        node: &str,
        (mut flags, more): (Vec<&str>, Vec<&str>),
        inst: Option<&Inst>,
    ) -> Fields {
        let now = self.now();
        let mut fields = Fields(Vec::new());
        fields.text("name", name);
        fields.text("ip", node_ip(node).to_string());
        let port = if node.starts_with("sentinel-") {
            SENTINEL_PORT
        } else {
            REDIS_PORT
        };
        fields.number("port", i64::from(port));
        fields.text("runid", "");
        if inst.is_some_and(|i| i.s_down) {
            flags.insert(0, "s_down");
        }
        let link = self.links.get(node);
        if link.is_none_or(|l| l.disconnected()) {
            flags.push("disconnected");
        }
        flags.extend(more);
        fields.text("flags", flags.join(","));
        fields.number(
            "link-pending-commands",
            link.map_or(0, |l| l.pending.len() as i64),
        );
        fields.number("link-refcount", 1);
        if let Some(link) = link {
            let since = |t: i64| if t != 0 { now - t } else { 0 };
            fields.number("last-ping-sent", since(link.act_ping_time));
            fields.number("last-ok-ping-reply", now - link.last_avail_time);
            fields.number("last-ping-reply", now - link.last_pong_time);
        }
        if let Some(inst) = inst.filter(|i| i.s_down) {
            fields.number("s-down-time", now - inst.s_down_since);
        }
        fields.number("down-after-milliseconds", self.down_after);
        fields
    }

    /// `info-refresh`, `role-reported`, `role-reported-time` of a master or replica.
    fn reported(&self, fields: &mut Fields, inst: &Inst) {
        let now = self.now();
        let refresh = if inst.info_refresh != 0 {
            now - inst.info_refresh
        } else {
            0
        };
        fields.number("info-refresh", refresh);
        let role = if inst.role_reported == Role::Master {
            "master"
        } else {
            "slave"
        };
        fields.text("role-reported", role);
        fields.number("role-reported-time", now - inst.role_reported_time);
    }

    fn master(&self, m: usize) -> Reply {
        let master = &self.masters[m];
        let mut flags = Vec::new();
        if master.o_down {
            flags.push("o_down");
        }
        flags.push("master");
        let mut more = Vec::new();
        if master.failover_state != FailoverState::None {
            more.push("failover_in_progress");
        }
        if master.force_failover {
            more.push("force_failover");
        }
        // `ri->addr`: the old master until the switch (get-master-addr-by-name already
        // answers the promoted replica from the reconfiguration on).
        let mut fields = self.generic(
            &master.name,
            &master.addr,
            (flags, more),
            Some(&master.inst),
        );
        self.reported(&mut fields, &master.inst);
        fields.number("config-epoch", master.config_epoch as i64);
        fields.number("num-slaves", master.replicas.len() as i64);
        fields.number("num-other-sentinels", master.peers.len() as i64);
        fields.number("quorum", self.quorum as i64);
        fields.number("failover-timeout", self.failover_timeout);
        fields.number("parallel-syncs", PARALLEL_SYNCS);
        Reply::Map(fields.0)
    }

    fn replica(&self, node: &str, inst: &Inst) -> Reply {
        let mut more = Vec::new();
        for (set, flag) in [
            (inst.promoted, "promoted"),
            (inst.reconf_sent, "reconf_sent"),
            (inst.reconf_inprog, "reconf_inprog"),
            (inst.reconf_done, "reconf_done"),
        ] {
            if set {
                more.push(flag);
            }
        }
        let name = format!("{}:{REDIS_PORT}", node_ip(node));
        let mut fields = self.generic(&name, node, (vec!["slave"], more), Some(inst));
        self.reported(&mut fields, inst);
        fields.number("master-link-down-time", inst.master_link_down_time);
        let status = if inst.slave_master_link_up {
            "ok"
        } else {
            "err"
        };
        fields.text("master-link-status", status);
        let (host, port) = match &inst.slave_master_host {
            Some(host) => (node_ip(host).to_string(), i64::from(REDIS_PORT)),
            None => ("?".to_string(), 0),
        };
        fields.text("master-host", host);
        fields.number("master-port", port);
        fields.number("slave-priority", REPLICA_PRIORITY);
        fields.number("slave-repl-offset", inst.slave_repl_offset);
        fields.number("replica-announced", 1);
        Reply::Map(fields.0)
    }

    fn peer(&self, m: usize, node: &str) -> Reply {
        let peer = &self.masters[m].peers[node];
        let more = if peer.master_down {
            vec!["master_down"]
        } else {
            Vec::new()
        };
        let name = format!("{}:{SENTINEL_PORT}", node_ip(node));
        let mut fields = self.generic(&name, node, (vec!["sentinel"], more), None);
        fields.text("voted-leader", peer.leader.clone().unwrap_or("?".into()));
        fields.number("voted-leader-epoch", peer.leader_epoch as i64);
        Reply::Map(fields.0)
    }
}
