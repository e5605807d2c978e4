//! The simulated Redis server: a pure state machine, driven by the `sim` crate's nodes and by
//! `locksim serve`. Replies are meant to be byte-identical to `redis-server` 7.0 (see
//! `docs/redis.md` for the supported commands and the known differences).

pub mod client;
mod commands;
pub mod keyspace;
pub mod lua;
mod lua_alloc;
pub mod number;
pub mod reply;
pub mod resp;
pub mod script_limits;
pub mod server;
pub mod types;

pub use client::ClientAddr;
pub use commands::{HelloFields, hello_reply};
pub use reply::{Protocol, Reply};
pub use resp::{ProtocolError, RequestParser};
pub use script_limits::{ScriptBudget, ScriptMonitor, ScriptProgress, ScriptVerdict};
pub use server::{
    ClientId, DEFAULT_LUA_MEMORY_LIMIT_BYTES, Outcome, RedisServer, ReplicaInfo, ReplicationInfo,
    Role, ServerConfig,
};

#[cfg(test)]
mod tests;
