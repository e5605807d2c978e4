pub mod client;
pub mod persistence;
pub mod redis_node;
pub mod replication;
pub mod resource;
pub mod resp;
pub mod sentinel;
