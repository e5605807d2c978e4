//! locksim's pure domain: the simulated Redis server, the lock schemes (client algorithms), the
//! history of a run and the checkers that judge it. No madsim and no I/O here, so all of it is
//! testable with plain `#[test]`s; the `sim` crate wraps it in a simulated world.

pub mod check;
pub mod history;
pub mod locks;
pub mod marks;
pub mod redis;
pub mod result;
