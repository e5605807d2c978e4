//! Redis Sentinel (`sentinel.c`).

use std::sync::Arc;

use crate::world::World;

pub async fn sentinel_node(_world: Arc<World>, _name: String) {
    std::future::pending::<()>().await
}

pub async fn request_failover(_world: Arc<World>, _master: String) {}
