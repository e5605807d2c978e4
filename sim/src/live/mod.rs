//! `locksim live`: scenarios on the real clock with real client processes (issue 27) — the
//! real-time executor. `process`: process hygiene for everything a live run starts;
//! `redis_server`: real redis-server and redis-sentinel processes for a topology (issue 26).

pub mod process;
pub mod redis_server;
