//! The processes of a run, each a madsim node that uses the world's resources (`crate::world`):
//! - `redis`: a Redis server (the model's `RedisServer` behind a listener), with its
//!   replication and its AOF;
//! - `sentinel`: a Redis Sentinel;
//! - `client`: a lock client — the workload, run through a lock scheme;
//! - `resource`: the protected counter, with optional fencing;
//! - `resp`: the RESP client connection the clients, Sentinel and replicas use.
//!
//! The runner starts them (`runner::simulate`); a node kind is its module here plus a line there.

pub mod client;
pub mod redis;
pub mod resource;
pub mod resp;
pub mod sentinel;

/// Every Redis node listens here.
pub const REDIS_PORT: u16 = 6379;
/// Every Sentinel listens here.
pub const SENTINEL_PORT: u16 = 26379;
