//! The simulated Redis server: a pure state machine, driven by the `sim` crate's nodes and by
//! `locksim serve`. Replies are meant to be byte-identical to `redis-server` 7.0 (see
//! `docs/redis.md` for the supported commands and the known differences).

mod commands;
pub mod keyspace;
pub mod lua;
pub mod number;
pub mod reply;
pub mod resp;
pub mod server;
pub mod types;

pub use reply::Reply;
pub use resp::{ProtocolError, RequestParser};
pub use server::{
    ClientId, Outcome, RedisServer, ReplicaInfo, ReplicationInfo, Role, ServerConfig,
};

#[cfg(test)]
mod tests;
