pub mod client;
pub mod persistence;
pub mod redis_node;
pub mod replication;
pub mod resource;
pub mod resp;
pub mod sentinel;

/// Every Redis node listens here.
pub const REDIS_PORT: u16 = 6379;
/// Every Sentinel listens here.
pub const SENTINEL_PORT: u16 = 26379;
