pub mod client;
pub mod redis;
pub mod resource;
pub mod resp;
pub mod sentinel;

/// Every Redis node listens here.
pub const REDIS_PORT: u16 = 6379;
/// Every Sentinel listens here.
pub const SENTINEL_PORT: u16 = 26379;
