//! `setnx-del`: `SETNX key token` to acquire, `DEL key` to release — no TTL.
//!
//! Sources: seed 000 (《Redis实现分布式锁的几种方案》) 方案一, `setIfAbsent(REDIS_LOCK, value)` with
//! `value = UUID.randomUUID().toString().replace("-","")` and `redisTemplate.delete(REDIS_LOCK)`
//! in `finally`; seed 004 (《大家所推崇的Redis分布式锁真的就万无一失吗》): "当要获取锁时, 直接使用SETNX
//! 获取锁, 当要释放锁时, 使用DEL命令删除掉对应的键key即可". Both name the flaw: "某个线程在获取锁
//! 之后由于某些异常因素 (比如宕机) 而不能正常的执行解锁操作, 那么这个锁就永远释放不掉了".
//!
//! Seed 000 returns "抢锁失败" at once; the workload's acquire retries every `retry_delay_ms`
//! (default 100 ms) until its timeout.
//!
//! Parameters: `key` (`lock`), `retry_delay_ms` (100).
//! What breaks it: the holder crashes — the key stays for ever (liveness `stuck`).

use std::rc::Rc;

use async_trait::async_trait;

use super::set::del_release;
use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, command, not_acquired,
    retry_until, undashed, uuid4,
};
use crate::redis::Reply;

pub const INFO: SchemeInfo = SchemeInfo {
    id: "setnx-del",
    summary: "SETNX k token / DEL k, no TTL: a crashed holder keeps the lock for ever",
    source: "seed 000 方案一; seed 004 (SETNX + DEL)",
    default_ttl_ms: 0,
    family: Family::TwoStep,
    lease: Lease::None,
    in_all: true,
    presets: &[],
    build,
};

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    Ok(Box::new(SetnxDel {
        key: params.key()?,
        retry_delay_ms: params.positive("retry_delay_ms", 100)?,
        held: false,
    }))
}

pub struct SetnxDel {
    key: String,
    retry_delay_ms: u64,
    held: bool,
}

/// One `SETNX key value`: true when this client created the key.
pub async fn setnx(env: &Rc<dyn LockEnv>, key: &str, value: &str) -> Result<bool, String> {
    match command(env, 0, &["SETNX", key, value]).await {
        Ok(Reply::Integer(n)) => Ok(n == 1),
        Ok(other) => Err(format!("unexpected reply {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

#[async_trait(?Send)]
impl LockScheme for SetnxDel {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let token = undashed(&uuid4(env.as_ref()));
        env.register_token(&token);
        let key = self.key.clone();
        let grant = retry_until(env, timeout_ms, self.retry_delay_ms, async || {
            matches!(setnx(env, &key, &token).await, Ok(true)).then(|| Grant {
                token: token.clone(),
                fence: None,
            })
        })
        .await?;
        self.held = true;
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        if !std::mem::take(&mut self.held) {
            return not_acquired();
        }
        del_release(env, &self.key).await
    }
}

#[cfg(test)]
mod tests {

    use crate::locks::testing::{block_on, pass, two_clients};
    use crate::redis::Reply;

    #[test]
    fn excludes_but_never_expires() {
        let (shared, (a, mut la), (b, mut lb)) = two_clients(serde_json::json!("setnx-del"));
        let grant = block_on(la.acquire(&a, 100)).unwrap();
        assert_eq!(grant.token.len(), 32, "a UUID without dashes");
        // a dies without releasing: a day later the key is still there.
        pass(&shared, 86_400_000);
        assert_eq!(shared.command(&["PTTL", "lock"]), Reply::Integer(-1));
        assert!(block_on(lb.acquire(&b, 1000)).is_err());
    }
}
