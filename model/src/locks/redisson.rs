//! `redisson`: Redisson's `RLock` (`RedissonLock` over `RedissonBaseLock`, the 3.2x line) — a hash
//! `{uuid:threadId → hold count}` with a 30 s lease that a watchdog renews every 10 s, waiters
//! woken through pub/sub.
//!
//! Source: Redisson, `redisson/src/main/java/org/redisson/RedissonLock.java`,
//! `RedissonBaseLock.java`, `pubsub/LockPubSub.java`, `command/CommandAsyncService.java`
//! (`syncedEval`); seed 000 方案五 and seed 001 use it, seed 003 §1.3 describes it. The Lua
//! scripts below perform the same Redis calls in the same order as Redisson's (reformatted):
//! - lock (`tryLockInnerAsync`): if the key does not exist or the hash has our field, `HINCRBY`
//!   our field and `PEXPIRE` the lease, return nil; otherwise return the key's `PTTL`.
//! - unlock (`unlockInnerAsync`, with the unlock latch `redisson_unlock_latch:{name}:<requestId>`
//!   that makes a retried unlock idempotent): a latch value is returned as is; no field → nil;
//!   `HINCRBY -1`; still > 0 → `PEXPIRE`, latch 0, return 0; else `DEL`, `PUBLISH
//!   redisson_lock__channel:{name} 0`, latch 1, return 1. The client then `DEL`s the latch.
//!   A nil makes `unlock` throw `IllegalMonitorStateException`.
//! - renew (`renewExpirationAsync`): if our field exists, `PEXPIRE` the lease and return 1, else 0.
//!
//! The client (`tryLock(waitTime, unit)`, lease −1): try once; else subscribe to the channel and
//! loop — try, and wait for an unlock message up to the returned TTL (or the time left), all
//! time accounting with `System.currentTimeMillis()` (the client's wall clock). On success with
//! no explicit lease, `scheduleExpirationRenewal`: one renewal timer per lock entry per process
//! (`EXPIRATION_RENEWAL_MAP`, threads counted in it), firing every `internalLockLeaseTime / 3`;
//! a renewal that fails with an exception removes the entry — the watchdog is gone for good —
//! and one that returns 0 cancels it. `unlock` cancels the thread's renewal whatever the result.
//!
//! `syncedEval`: with a single-server configuration Redisson sends the script alone. With
//! replicas it pipelines `WAIT <replicas> <slavesSyncTimeout=1000>` after it, and when no
//! replica acknowledged (`checkLockSyncedSlaves`, default true) a lock attempt is undone with the
//! unlock script and fails ("None of slaves were synced"). Here that path is taken whenever
//! `LockEnv::replicas()` > 0. Not modelled: Redisson's one-off `WAIT 0 0`/`WAITAOF` probe and
//! `INFO` replica count, `WAITAOF` with AOF, the command retries (`retryAttempts` 3 ×
//! `retryInterval` 1500 ms), and the latch semaphore shared by the threads of one process (each
//! thread here has its own subscription).
//!
//! Threads (`clients.threads`) share one Redisson client (`LockScheme::share`): one UUID, one
//! renewal entry; thread ids are 1, 2, ...
//!
//! Parameters: `key` (`lock`), `ttl_ms` (`lockWatchdogTimeout`, 30 000), `lease_ms` (an explicit
//! `leaseTime`: the lock then expires after it and no watchdog runs; default none).
//! What breaks it: a stop-the-world pause longer than the lease (the watchdog stops too); a
//! partition between the holder and Redis that outlasts the lease (the first failed renewal
//! stops the watchdog).

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;

use super::fair;
use super::{
    Grant, LockEnv, LockScheme, Params, Release, SchemeInfo, Subscription, TaskGuard, command,
    eval, uuid4,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "redisson",
    summary: "Redisson RLock: hash {uuid:thread -> count}, 30 s lease renewed every 10 s, pub/sub wake-up, WAIT with replicas",
    source: "Redisson RedissonLock.java / RedissonBaseLock.java (3.2x)",
    default_ttl_ms: 30_000,
    build,
};

const LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0)
        or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

const UNLOCK: &str = "local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return 1;
end;
";

pub(crate) const RENEW: &str = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
";

/// `LockPubSub.UNLOCK_MESSAGE`, as `LongCodec` writes it.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// `slavesSyncTimeout` default.
const SLAVES_SYNC_TIMEOUT_MS: &str = "1000";
/// The unlock latch's TTL: `(timeout 3000 + retryInterval 1500) * retryAttempts 3`.
const UNLOCK_LATCH_TTL_MS: &str = "13500";
const NO_SYNC: &str = "None of slaves were synced. Try to increase slavesSyncTimeout setting or set checkLockSyncedSlaves = false.";

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(RedissonLock::new(params, None)?))
}

/// The state one Redisson client (process) keeps for one lock name.
pub(crate) struct Client {
    pub(crate) key: String,
    /// `internalLockLeaseTime`: the watchdog timeout, or the last explicit lease.
    pub(crate) internal_lock_lease_time: u64,
    /// An explicit `leaseTime` for every `tryLock`.
    lease_ms: Option<u64>,
    /// `ServiceManager.getId()`: a UUID per Redisson client, made at first use.
    id: Option<String>,
    /// This lock's entry of `EXPIRATION_RENEWAL_MAP`.
    renewal: Option<ExpirationEntry>,
    /// Thread ids handed out.
    threads: u64,
    /// `Some` for `RedissonFairLock`.
    pub(crate) fair: Option<fair::Config>,
}

struct ExpirationEntry {
    /// Thread id → how many times it scheduled renewal, in insertion order (a LinkedHashMap).
    thread_ids: Vec<(u64, u32)>,
    timeout: Option<Box<dyn TaskGuard>>,
}

/// One thread's handle on a Redisson lock object.
pub struct RedissonLock {
    pub(crate) client: Rc<RefCell<Client>>,
    pub(crate) thread_id: u64,
}

impl RedissonLock {
    pub(crate) fn new(params: &mut Params, fair: Option<fair::Config>) -> Result<Self, String> {
        let key = params.key()?;
        let watchdog = params.positive("ttl_ms", INFO.default_ttl_ms)?;
        let lease_ms = if params.given("lease_ms") {
            Some(params.positive("lease_ms", 0)?)
        } else {
            None
        };
        Ok(RedissonLock {
            client: Rc::new(RefCell::new(Client {
                key,
                internal_lock_lease_time: watchdog,
                lease_ms,
                id: None,
                renewal: None,
                threads: 1,
                fair,
            })),
            thread_id: 1,
        })
    }

    pub(crate) fn key(&self) -> String {
        self.client.borrow().key.clone()
    }

    pub(crate) fn lease(&self) -> u64 {
        self.client.borrow().internal_lock_lease_time
    }

    fn is_fair(&self) -> bool {
        self.client.borrow().fair.is_some()
    }

    /// `getLockName(threadId)`: `uuid:threadId`.
    pub(crate) fn lock_name(&self, env: &Rc<dyn LockEnv>) -> String {
        let mut client = self.client.borrow_mut();
        let id = client.id.get_or_insert_with(|| uuid4(env.as_ref())).clone();
        format!("{id}:{}", self.thread_id)
    }

    /// `prefixName("redisson_lock__channel", name)`.
    pub(crate) fn channel_name(&self) -> String {
        prefix_name("redisson_lock__channel", &self.key())
    }

    /// `tryAcquire`: `Ok(None)` acquired, `Ok(Some(ttl))` held by someone else.
    async fn try_acquire(&mut self, env: &Rc<dyn LockEnv>) -> Result<Option<i64>, String> {
        let (explicit, lease) = {
            let c = self.client.borrow();
            (c.lease_ms, c.lease_ms.unwrap_or(c.internal_lock_lease_time))
        };
        let ttl = if self.is_fair() {
            fair::try_lock_inner(self, env, lease).await
        } else {
            let name = self.lock_name(env);
            let result = synced_eval(env, LOCK, &[&self.key()], &[&lease.to_string(), &name]).await;
            match result {
                // handleNoSync: undo the lock, then fail.
                Err(e) if e == NO_SYNC => {
                    let _ = self.unlock_inner(env).await;
                    Err(e)
                }
                Err(e) => Err(e),
                Ok(Reply::Nil) => Ok(None),
                Ok(Reply::Integer(ttl)) => Ok(Some(ttl)),
                Ok(other) => Err(format!("unexpected reply {other:?}")),
            }
        }?;
        if ttl.is_none() {
            match explicit {
                Some(lease) => self.client.borrow_mut().internal_lock_lease_time = lease,
                None => self.schedule_expiration_renewal(env),
            }
        }
        Ok(ttl)
    }

    async fn unlock_inner(&self, env: &Rc<dyn LockEnv>) -> Result<Reply, String> {
        if self.is_fair() {
            return fair::unlock_inner(self, env).await;
        }
        let request_id = format!("{:016x}{:016x}", env.random_u64(), env.random_u64());
        let latch = format!(
            "{}:{request_id}",
            prefix_name("redisson_unlock_latch", &self.key())
        );
        let lease = self.lease().to_string();
        let name = self.lock_name(env);
        let reply = synced_eval(
            env,
            UNLOCK,
            &[&self.key(), &self.channel_name(), &latch],
            &[
                UNLOCK_MESSAGE,
                &lease,
                &name,
                "PUBLISH",
                UNLOCK_LATCH_TTL_MS,
            ],
        )
        .await?;
        // The latch is deleted asynchronously; unlock does not wait for it.
        let del_env = env.clone();
        let _ = env.spawn(Box::pin(async move {
            let _ = command(&del_env, 0, &["DEL", &latch]).await;
        }));
        Ok(reply)
    }

    /// `scheduleExpirationRenewal(threadId)`.
    fn schedule_expiration_renewal(&self, env: &Rc<dyn LockEnv>) {
        let mut client = self.client.borrow_mut();
        if let Some(entry) = client.renewal.as_mut() {
            add_thread(entry, self.thread_id);
            return;
        }
        client.renewal = Some(ExpirationEntry {
            thread_ids: vec![(self.thread_id, 1)],
            timeout: None,
        });
        drop(client);
        self.renew_expiration(env);
    }

    /// `renewExpiration()`: a timer every `internalLockLeaseTime / 3`, rescheduled after each
    /// successful renewal (here: a loop).
    fn renew_expiration(&self, env: &Rc<dyn LockEnv>) {
        let client = self.client.clone();
        let task_env = env.clone();
        let handle = RedissonLock {
            client: client.clone(),
            thread_id: self.thread_id,
        };
        let task = env.spawn(Box::pin(async move {
            loop {
                let period = client.borrow().internal_lock_lease_time / 3;
                task_env.sleep_ms(period).await;
                let first = client
                    .borrow()
                    .renewal
                    .as_ref()
                    .and_then(|e| e.thread_ids.first().map(|(t, _)| *t));
                let Some(thread_id) = first else { return };
                let renewer = RedissonLock {
                    client: client.clone(),
                    thread_id,
                };
                let name = renewer.lock_name(&task_env);
                let lease = renewer.lease().to_string();
                let key = renewer.key();
                match synced_eval(&task_env, RENEW, &[&key], &[&lease, &name]).await {
                    // "Can't update lock ... expiration": the entry goes, renewal is over.
                    Err(_) => {
                        client.borrow_mut().renewal = None;
                        return;
                    }
                    Ok(Reply::Integer(1)) => continue,
                    Ok(_) => {
                        handle.cancel_expiration_renewal(None);
                        return;
                    }
                }
            }
        }));
        if let Some(entry) = self.client.borrow_mut().renewal.as_mut() {
            entry.timeout = Some(task);
        }
    }

    /// `cancelExpirationRenewal(threadId)`.
    fn cancel_expiration_renewal(&self, thread_id: Option<u64>) {
        let mut client = self.client.borrow_mut();
        let Some(entry) = client.renewal.as_mut() else {
            return;
        };
        if let Some(t) = thread_id {
            remove_thread(entry, t);
        }
        if thread_id.is_none() || entry.thread_ids.is_empty() {
            if let Some(timeout) = entry.timeout.take() {
                timeout.cancel();
            }
            client.renewal = None;
        }
    }

    async fn acquire_failed(&self, env: &Rc<dyn LockEnv>) {
        if self.is_fair() {
            fair::acquire_failed(self, env).await;
        }
    }

    async fn subscribe(&self, env: &Rc<dyn LockEnv>) -> Result<Box<dyn Subscription>, String> {
        let channel = if self.is_fair() {
            format!("{}:{}", self.channel_name(), self.lock_name(env))
        } else {
            self.channel_name()
        };
        env.subscribe(0, &channel).await.map_err(|e| e.to_string())
    }

    /// `tryLock(waitTime, MILLISECONDS)` with the lease of the parameters.
    async fn try_lock(&mut self, env: &Rc<dyn LockEnv>, wait_ms: u64) -> Result<bool, String> {
        let mut time = wait_ms as i64;
        let mut current = env.wall_ms();
        if self.try_acquire(env).await?.is_none() {
            return Ok(true);
        }
        time -= env.wall_ms() - current;
        if time <= 0 {
            self.acquire_failed(env).await;
            return Ok(false);
        }
        current = env.wall_ms();
        // subscribeFuture.get(time, MILLISECONDS)
        let subscription = match self.subscribe(env).await {
            Ok(s) => s,
            Err(_) => {
                self.acquire_failed(env).await;
                return Ok(false);
            }
        };
        time -= env.wall_ms() - current;
        if time <= 0 {
            self.acquire_failed(env).await;
            return Ok(false);
        }
        loop {
            let mut current_time = env.wall_ms();
            let ttl = self.try_acquire(env).await?;
            let Some(ttl) = ttl else {
                return Ok(true);
            };
            time -= env.wall_ms() - current_time;
            if time <= 0 {
                self.acquire_failed(env).await;
                return Ok(false);
            }
            // Waiting for an unlock message (the latch) up to the TTL or the time left.
            current_time = env.wall_ms();
            let wait = if ttl >= 0 && ttl < time { ttl } else { time };
            subscription.next_message(wait.max(0) as u64).await;
            time -= env.wall_ms() - current_time;
            if time <= 0 {
                self.acquire_failed(env).await;
                return Ok(false);
            }
        }
    }
}

fn add_thread(entry: &mut ExpirationEntry, thread_id: u64) {
    match entry.thread_ids.iter_mut().find(|(t, _)| *t == thread_id) {
        Some((_, n)) => *n += 1,
        None => entry.thread_ids.push((thread_id, 1)),
    }
}

fn remove_thread(entry: &mut ExpirationEntry, thread_id: u64) {
    if let Some(i) = entry.thread_ids.iter().position(|(t, _)| *t == thread_id) {
        entry.thread_ids[i].1 -= 1;
        if entry.thread_ids[i].1 == 0 {
            entry.thread_ids.remove(i);
        }
    }
}

/// `RedissonObject.prefixName`: `prefix:{name}`, or `prefix:name` when the name has a hash tag.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `CommandAsyncService.syncedEval` (see the module doc). An error reply is an exception.
pub(crate) async fn synced_eval(
    env: &Rc<dyn LockEnv>,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> Result<Reply, String> {
    let reply = match eval(env, 0, script, keys, args).await {
        Ok(Reply::Error(e)) => return Err(String::from_utf8_lossy(&e).into_owned()),
        Ok(reply) => reply,
        Err(e) => return Err(e.to_string()),
    };
    let replicas = env.replicas();
    if replicas > 0 {
        let synced = command(
            env,
            0,
            &["WAIT", &replicas.to_string(), SLAVES_SYNC_TIMEOUT_MS],
        )
        .await
        .map_err(|e| e.to_string())?;
        if synced == Reply::Integer(0) {
            return Err(NO_SYNC.to_string());
        }
    }
    Ok(reply)
}

#[async_trait(?Send)]
impl LockScheme for RedissonLock {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let name = self.lock_name(env);
        env.register_token(&name);
        if self.try_lock(env, timeout_ms).await? {
            Ok(Grant {
                token: name,
                fence: None,
            })
        } else {
            Err(format!("tryLock({timeout_ms} ms) returned false"))
        }
    }

    /// `unlock()`.
    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let result = self.unlock_inner(env).await;
        self.cancel_expiration_renewal(Some(self.thread_id));
        match result {
            Ok(Reply::Integer(1)) => Release {
                ok: true,
                detail: "unlocked".into(),
            },
            Ok(Reply::Integer(_)) => Release {
                ok: true,
                detail: "still held (reentrant)".into(),
            },
            Ok(Reply::Nil) => Release {
                ok: false,
                detail: format!(
                    "IllegalMonitorStateException: attempt to unlock lock, not locked by current thread by node id: {} thread-id: {}",
                    self.client.borrow().id.clone().unwrap_or_default(),
                    self.thread_id
                ),
            },
            Ok(other) => Release {
                ok: false,
                detail: format!("unexpected reply {other:?}"),
            },
            Err(e) => Release {
                ok: false,
                detail: e,
            },
        }
    }

    /// Another thread of the same Redisson client.
    fn share(&self) -> Option<Box<dyn LockScheme>> {
        let thread_id = {
            let mut client = self.client.borrow_mut();
            client.threads += 1;
            client.threads
        };
        Some(Box::new(RedissonLock {
            client: self.client.clone(),
            thread_id,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::locks::testing::{DirectEnv, Mishap, Shared, block_on, pass};
    use crate::locks::{LockEnv, LockScheme, SchemeSpec};
    use crate::redis::Reply;

    fn lock(ttl_ms: u64) -> Box<dyn LockScheme> {
        SchemeSpec::from_json(
            &serde_json::json!({"name": "redisson", "ttl_ms": ttl_ms}),
            "scheme",
        )
        .unwrap()
        .build("s")
        .unwrap()
    }

    #[test]
    fn a_hash_field_per_thread_renewed_by_the_watchdog() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (lock(3000), lock(3000));
        let grant = block_on(la.acquire(&a, 100)).unwrap();
        assert!(
            grant.token.ends_with(":1"),
            "uuid:threadId, {}",
            grant.token
        );
        assert_eq!(
            shared.command(&["HGET", "lock", &grant.token]),
            Reply::bulk("1")
        );
        // b waits 10 s: the watchdog renews every second, so b never gets it.
        assert!(block_on(lb.acquire(&b, 10_000)).is_err());
        assert!(matches!(shared.command(&["PTTL", "lock"]), Reply::Integer(t) if t > 1500));
        assert!(block_on(la.release(&a)).ok);
        assert_eq!(shared.running_tasks(), 1, "only the latch DEL is left");
        pass(&shared, 10);
        assert_eq!(
            shared.command(&["DBSIZE"]),
            Reply::Integer(0),
            "lock and latch gone"
        );
    }

    #[test]
    fn a_waiter_is_woken_by_the_unlock_message() {
        let shared = Shared::new();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let mut la = lock(30_000);
        block_on(la.acquire(&a, 100)).unwrap();
        let got = Rc::new(std::cell::RefCell::new(None));
        let (got2, b2, mut lb) = (got.clone(), b.clone(), lock(30_000));
        let _t = b.spawn(Box::pin(async move {
            *got2.borrow_mut() = Some(lb.acquire(&b2, 60_000).await);
        }));
        pass(&shared, 500);
        assert!(got.borrow().is_none(), "b waits (for up to the 30 s TTL)");
        block_on(la.release(&a));
        pass(&shared, 1);
        assert!(
            matches!(*got.borrow(), Some(Ok(_))),
            "the PUBLISH woke b at once"
        );
    }

    #[test]
    fn a_failed_renewal_stops_the_watchdog_for_good() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let mut la = lock(3000);
        block_on(la.acquire(&a_dyn, 100)).unwrap();
        a.mishap("EVAL", Mishap::Drop);
        pass(&shared, 1001);
        assert_eq!(
            shared.running_tasks(),
            0,
            "the first failed renewal ended it"
        );
        pass(&shared, 2000);
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
        let unlock = block_on(la.release(&a_dyn));
        assert!(
            unlock.detail.starts_with("IllegalMonitorStateException"),
            "{unlock:?}"
        );
    }

    #[test]
    fn reentry_and_threads_of_one_client() {
        let shared = Shared::new();
        let env = DirectEnv::new(&shared, "p", 1);
        let mut t1 = lock(30_000);
        let mut t2 = t1.share().unwrap();
        let g1 = block_on(t1.acquire(&env, 100)).unwrap();
        block_on(t1.acquire(&env, 100)).unwrap();
        assert_eq!(
            shared.command(&["HGET", "lock", &g1.token]),
            Reply::bulk("2")
        );
        assert!(
            block_on(t2.acquire(&env, 200)).is_err(),
            "thread 2 is another owner"
        );
        assert_eq!(block_on(t1.release(&env)).detail, "still held (reentrant)");
        assert!(block_on(t1.release(&env)).ok);
        let g2 = block_on(t2.acquire(&env, 100)).unwrap();
        assert_eq!(g1.token[..36], g2.token[..36], "one client UUID");
        assert!(g2.token.ends_with(":2"));
    }

    #[test]
    fn with_replicas_a_lock_no_replica_acknowledged_is_undone() {
        let shared = Shared::new();
        let a = Rc::new(DirectEnv::concrete(&shared, "a", 1));
        a.set_replicas(1);
        let a_dyn: Rc<dyn LockEnv> = a.clone();
        let err = block_on(lock(30_000).acquire(&a_dyn, 100)).unwrap_err();
        assert!(err.starts_with("None of slaves were synced"), "{err}");
        let sent = a.sent.borrow();
        assert_eq!(sent[1], "WAIT 1 1000");
        assert_eq!(shared.command(&["EXISTS", "lock"]), Reply::Integer(0));
    }
}
