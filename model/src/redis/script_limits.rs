//! Bounds on a running script.
//!
//! Redis 7.0 checks a running script every 100,000 Lua instructions (`script_lua.c`
//! `luaMaskCountHook` → `script.c` `scriptInterrupt`): past `lua-time-limit` (5 s) it serves
//! other clients with `-BUSY` and obeys `SCRIPT KILL` unless the script has already written. The
//! model does not own a clock, so the host decides at each checkpoint through a
//! [`ScriptMonitor`]: `locksim serve` on the real clock, the simulation with the deterministic
//! [`ScriptBudget`]. Work done inside C functions is counted too: the bytes the string and table
//! functions will produce (`string.rep`, `table.concat`, ..., charged before they run) and the
//! bytes Lua allocates (`..`, table growth), and these are checkpoints too (every
//! [`WORK_PER_CHECKPOINT`] units), so a script looping on C work cannot run unchecked. A single
//! C call that neither allocates nor produces (a pathological `string.find` pattern) cannot be
//! interrupted, in Redis either.
//!
//! Memory: Lua's heap is limited (`ServerConfig::lua_memory_limit_bytes`); an allocation past the
//! limit fails inside Lua, which raises its `not enough memory` error: the script ends with
//! `ERR Error running script <sha>, not enough memory` instead of the process aborting.

/// `luaMaskCountHook` runs every 100,000 instructions (`lua_sethook(..., LUA_MASKCOUNT, 100000)`).
pub const INSTRUCTIONS_PER_CHECKPOINT: u64 = 100_000;

/// C work (allocated and produced bytes, in work units) between two checkpoints: a C function
/// handling gigabytes runs few instructions.
pub const WORK_PER_CHECKPOINT: u64 = 16 * 1024 * 1024;

/// Allocated bytes per work unit: allocation is cheap next to the byte-by-byte work of the
/// string functions, and the heap limit, not the budget, should stop a script that only grows.
pub const ALLOCATED_BYTES_PER_UNIT: u64 = 8;

/// What the running script has done so far, as the monitor sees it at a checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptProgress {
    /// Lua instructions executed (counted per checkpoint).
    pub instructions: u64,
    /// Bytes Lua allocated since the script started (freed memory is not subtracted).
    pub allocated_bytes: u64,
    /// Bytes the string and table functions were asked to produce or scan (`string.rep`,
    /// `string.format`, `table.concat`, ...), charged before they run.
    pub produced_bytes: u64,
    /// A write command ran (`SCRIPT_WRITE_DIRTY`): Redis refuses SCRIPT KILL from now on.
    pub wrote: bool,
}

impl ScriptProgress {
    /// The deterministic cost of the script so far: one unit per instruction, per byte produced
    /// by a C function and per [`ALLOCATED_BYTES_PER_UNIT`] bytes allocated.
    pub fn work(&self) -> u64 {
        self.instructions
            .saturating_add(self.produced_bytes)
            .saturating_add(self.allocated_bytes / ALLOCATED_BYTES_PER_UNIT)
    }
}

/// The host's decision at a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptVerdict {
    Continue,
    /// Stop the script as `SCRIPT KILL` does: `ERR Script killed by user with SCRIPT KILL...`.
    Kill,
    /// Stop the script with this message (raised as a Lua error: the reply is
    /// `ERR <message> script: <sha>, on <source>:<line>.`).
    Abort(String),
}

/// Decides, at each checkpoint of a running script, whether it goes on.
pub trait ScriptMonitor {
    /// A script starts (EVAL, EVALSHA, from a client or inside EXEC).
    fn start(&mut self) {}
    /// A checkpoint: every [`INSTRUCTIONS_PER_CHECKPOINT`] instructions and every
    /// [`WORK_PER_CHECKPOINT`] units of C work.
    fn check(&mut self, progress: &ScriptProgress) -> ScriptVerdict;
}

/// The simulation's `lua-time-limit`: a fixed amount of work instead of 5 s of a machine's time,
/// so the outcome is the same on every machine and every run. When it runs out, the script is
/// stopped where an operator's `SCRIPT KILL` at the time limit would stop it; Redis refuses to
/// kill a script that has written (UNKILLABLE, only `SHUTDOWN NOSAVE` ends it), which would hang
/// the simulated server for ever, so such a script is aborted with its own error and its writes
/// stay, as after any script error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScriptBudget {
    /// Work units (see [`ScriptProgress::work`]).
    pub work: u64,
}

/// 200 million units: about a second of CPU on a current machine (200 million instructions, or
/// `string.rep` producing 200 MB, or 1.6 GB allocated).
pub const DEFAULT_SCRIPT_WORK: u64 = 200_000_000;

/// The error of a script that used up its budget after writing.
pub const BUDGET_EXCEEDED_AFTER_WRITE: &str = "Script exceeded the simulated lua-time-limit after it wrote (Redis would refuse SCRIPT KILL with UNKILLABLE and answer BUSY until SHUTDOWN NOSAVE); stopped, its writes kept";

/// Whether an error reply is one of a script stopped for running away: killed at the time limit
/// or the budget, or out of Lua memory. Retrying it does the same work again.
pub fn is_runaway_script_error(text: &[u8]) -> bool {
    text.starts_with(b"ERR Script killed by user with SCRIPT KILL...")
        || text.starts_with(format!("ERR {BUDGET_EXCEEDED_AFTER_WRITE}").as_bytes())
        || (text.starts_with(b"ERR Error running script ")
            && text.ends_with(b", not enough memory"))
}

impl Default for ScriptBudget {
    fn default() -> Self {
        ScriptBudget {
            work: DEFAULT_SCRIPT_WORK,
        }
    }
}

impl ScriptMonitor for ScriptBudget {
    fn check(&mut self, progress: &ScriptProgress) -> ScriptVerdict {
        if progress.work() <= self.work {
            ScriptVerdict::Continue
        } else if progress.wrote {
            ScriptVerdict::Abort(BUDGET_EXCEEDED_AFTER_WRITE.to_string())
        } else {
            ScriptVerdict::Kill
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_kills_an_unwritten_script_and_aborts_a_written_one() {
        let mut budget = ScriptBudget { work: 1000 };
        let mut p = ScriptProgress {
            instructions: 600,
            allocated_bytes: 800,
            produced_bytes: 300,
            wrote: false,
        };
        assert_eq!(budget.check(&p), ScriptVerdict::Continue);
        p.produced_bytes += 1;
        assert_eq!(budget.check(&p), ScriptVerdict::Kill);
        p.wrote = true;
        assert!(matches!(budget.check(&p), ScriptVerdict::Abort(_)));
    }
}
