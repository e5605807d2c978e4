//! `locksim live`: scenarios on the real clock with real client processes (issue 27) — the
//! real-time executor. `process`: process hygiene for everything a live run starts.

pub mod process;
