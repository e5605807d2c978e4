//! Persistence: the append-only file (`aof.c`) and what survives a crash.
//!
//! The AOF is the server's propagated effect stream (`take_propagated`, as `feedAppendOnlyFile`
//! receives it), appended as each command executes (`write(2)` in `beforeSleep`, before replies
//! go out). What reaches the disk depends on `appendfsync`:
//! - `always`: fsynced before the reply is sent — nothing acknowledged is ever lost;
//! - `everysec`: a background fsync once a second — a power loss loses what was written since;
//! - `no`: the OS writes dirty pages back every 30 s (`dirty_expire_centisecs`) — a power loss
//!   loses up to 30 s;
//! - `off`: no AOF at all (`appendonly no`, and no RDB snapshots here): a restart starts empty.
//!
//! Two faults end a process. A `crash` is the process dying (`kill -9`, OOM killer): what it
//! wrote is in the kernel's page cache, which outlives it, so the restart reads every command
//! written, fsynced or not (`aof.c` `loadAppendOnlyFiles` reads the file through the same page
//! cache). A `power_loss` is the machine going down (power, kernel panic, VM reset): the page
//! cache that was never fsynced is lost — the case antirez and redis.io discuss for Redlock
//! ("if the instance restarts without the key...").
//!
//! The disk itself (`world::storage`) outlives the process; it also holds the node's
//! `redis.conf` `replicaof` line, which Sentinel persists with `CONFIG REWRITE`.

use std::time::Duration;

use model::redis::RedisServer;
use model::redis::keyspace::Value;

use crate::world::World;

/// `appendfsync`, plus `off` for no AOF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    Off,
    No,
    EverySec,
    Always,
}

impl Fsync {
    pub fn parse(text: &str) -> Option<Fsync> {
        match text {
            "off" => Some(Fsync::Off),
            "no" => Some(Fsync::No),
            "everysec" => Some(Fsync::EverySec),
            "always" => Some(Fsync::Always),
            _ => None,
        }
    }

    /// How often what was written reaches the disk without an explicit fsync.
    fn flush_period(self) -> Option<Duration> {
        match self {
            Fsync::EverySec => Some(Duration::from_secs(1)),
            Fsync::No => Some(Duration::from_secs(30)),
            Fsync::Off | Fsync::Always => None,
        }
    }
}

/// Appends a command's effects to the AOF of `node`.
pub fn append(world: &World, node: &str, policy: Fsync, commands: &[Vec<Vec<u8>>]) {
    if policy == Fsync::Off || commands.is_empty() {
        return;
    }
    world.disks.with(node, |disk| {
        if policy == Fsync::Always {
            disk.durable.extend_from_slice(commands);
        } else {
            disk.page_cache.extend_from_slice(commands);
        }
    });
}

/// The background fsync (`everysec`) or the OS writeback (`no`), for as long as the process
/// lives; the period is measured by the node's own clock.
pub async fn flush_loop(world: std::sync::Arc<World>, node: String, policy: Fsync) {
    let Some(period) = policy.flush_period() else {
        return;
    };
    loop {
        let true_us = world
            .time
            .true_duration_us(&node, period.as_millis() as u64);
        madsim::time::sleep(Duration::from_micros(true_us)).await;
        world.disks.with(&node, |disk| {
            let written = std::mem::take(&mut disk.page_cache);
            disk.durable.extend(written);
        });
    }
}

/// Loads the AOF into a fresh server (`loadAppendOnlyFiles`): every command the file holds —
/// fsynced, then still in the page cache — is replayed with keys' absolute expiry times as
/// written.
pub fn load(world: &World, node: &str, server: &mut RedisServer, now_ms: i64) -> usize {
    let commands = world.disks.with(node, |disk| {
        let mut file = disk.durable.clone();
        file.extend_from_slice(&disk.page_cache);
        file
    });
    for argv in &commands {
        server.apply_replicated(now_ms, argv);
    }
    commands.len()
}

/// The dataset as commands that recreate it (the RDB payload of a full resync, written as the
/// AOF rewrite would): values with their absolute expiry times.
pub fn snapshot(server: &RedisServer) -> Vec<Vec<Vec<u8>>> {
    let db = server.db();
    let mut out = Vec::new();
    for key in db.keys() {
        let Some(entry) = db.get(key) else { continue };
        let k = key.clone();
        let mut set_ttl = true;
        match &entry.value {
            Value::Str(v) => {
                let mut cmd = vec![b"SET".to_vec(), k.clone(), v.clone()];
                if let Some(at) = entry.expire_at {
                    cmd.extend([b"PXAT".to_vec(), at.to_string().into_bytes()]);
                }
                out.push(cmd);
                set_ttl = false;
            }
            Value::Hash(h) => {
                let mut cmd = vec![b"HSET".to_vec(), k.clone()];
                for (field, value) in h.iter() {
                    cmd.extend([field.clone(), value.clone()]);
                }
                out.push(cmd);
            }
            Value::List(items) => {
                let mut cmd = vec![b"RPUSH".to_vec(), k.clone()];
                cmd.extend(items.iter().cloned());
                out.push(cmd);
            }
            Value::Set(set) => {
                let mut cmd = vec![b"SADD".to_vec(), k.clone()];
                cmd.extend(set.iter().map(|m| m.into_owned()));
                out.push(cmd);
            }
            Value::ZSet(z) => {
                let mut cmd = vec![b"ZADD".to_vec(), k.clone()];
                for s in z.iter() {
                    cmd.extend([s.score.to_string().into_bytes(), s.member.clone()]);
                }
                out.push(cmd);
            }
        }
        if set_ttl && let Some(at) = entry.expire_at {
            out.push(vec![b"PEXPIREAT".to_vec(), k, at.to_string().into_bytes()]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::redis::ServerConfig;

    #[test]
    fn a_snapshot_recreates_values_and_absolute_ttls() {
        let mut a = RedisServer::new(ServerConfig::default());
        let c = a.connect();
        let t0 = 1_700_000_000_000;
        for line in [
            "SET lock tok PX 5000",
            "HSET h f v",
            "PEXPIRE h 9000",
            "RPUSH l a b",
            "SADD s 10 2 x",
            "PEXPIRE s 7000",
        ] {
            let argv: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
            a.execute(c, t0, &argv);
        }
        let mut b = RedisServer::new(ServerConfig::default());
        for argv in snapshot(&a) {
            b.apply_replicated(t0 + 100, &argv);
        }
        assert_eq!(b.db().get(b"lock").unwrap().expire_at, Some(t0 + 5000));
        assert_eq!(b.db().get(b"h").unwrap().expire_at, Some(t0 + 9000));
        assert_eq!(b.db().get(b"s"), a.db().get(b"s"));
        assert_eq!(b.dbsize(), 4);
    }
}
