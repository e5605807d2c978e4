//! The bookkeeping of a running script: instructions and bytes allocated (its deterministic
//! cost), the write flag, and the stop decided at a checkpoint. The Lua state's allocator is
//! wrapped (`lua_setallocf`) so every allocation is counted and every
//! [`ALLOCATION_CHECKPOINT_BYTES`] is a checkpoint: C functions (`string.rep`, `..`) run few
//! instructions but may allocate gigabytes. mlua's own allocator underneath enforces the heap
//! limit (`Lua::set_memory_limit`).

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::rc::Rc;

use mlua::ffi;

use super::script_limits::{
    ALLOCATION_CHECKPOINT_BYTES, ScriptMonitor, ScriptProgress, ScriptVerdict,
};

/// Why a script was stopped, and the error text it ends with (`CODE message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// The message without its `ERR ` code, as raised inside Lua.
    pub message: String,
}

/// Shared by the engine, its count hook and its allocator.
pub struct RunState {
    /// Inside `LuaEngine::run`: allocations count towards the script.
    pub running: Cell<bool>,
    pub instructions: Cell<u64>,
    pub allocated_bytes: Cell<u64>,
    next_allocation_checkpoint: Cell<u64>,
    /// `SCRIPT_WRITE_DIRTY`, set by the server when a script runs a write command.
    pub wrote: Rc<Cell<bool>>,
    pub stop: RefCell<Option<Stop>>,
    pub monitor: Rc<RefCell<Box<dyn ScriptMonitor>>>,
}

impl RunState {
    pub fn new(monitor: Rc<RefCell<Box<dyn ScriptMonitor>>>, wrote: Rc<Cell<bool>>) -> RunState {
        RunState {
            running: Cell::new(false),
            instructions: Cell::new(0),
            allocated_bytes: Cell::new(0),
            next_allocation_checkpoint: Cell::new(ALLOCATION_CHECKPOINT_BYTES),
            wrote,
            stop: RefCell::new(None),
            monitor,
        }
    }

    /// A script starts: counters reset, the monitor told.
    pub fn start(&self) {
        self.instructions.set(0);
        self.allocated_bytes.set(0);
        self.next_allocation_checkpoint
            .set(ALLOCATION_CHECKPOINT_BYTES);
        self.wrote.set(false);
        *self.stop.borrow_mut() = None;
        self.running.set(true);
        if let Ok(mut monitor) = self.monitor.try_borrow_mut() {
            monitor.start();
        }
    }

    pub fn progress(&self) -> ScriptProgress {
        ScriptProgress {
            instructions: self.instructions.get(),
            allocated_bytes: self.allocated_bytes.get(),
            wrote: self.wrote.get(),
        }
    }

    pub fn stopped(&self) -> Option<Stop> {
        self.stop.borrow().clone()
    }

    /// A checkpoint: asks the monitor (unless a stop was already decided) and records a stop.
    pub fn checkpoint(&self) -> Option<Stop> {
        if let Some(stop) = self.stopped() {
            return Some(stop);
        }
        let verdict = match self.monitor.try_borrow_mut() {
            Ok(mut monitor) => monitor.check(&self.progress()),
            Err(_) => ScriptVerdict::Continue,
        };
        let stop = match verdict {
            ScriptVerdict::Continue => return None,
            ScriptVerdict::Kill => Stop {
                message: "Script killed by user with SCRIPT KILL...".to_string(),
            },
            ScriptVerdict::Abort(text) => Stop {
                message: text.strip_prefix("ERR ").unwrap_or(&text).to_string(),
            },
        };
        *self.stop.borrow_mut() = Some(stop.clone());
        Some(stop)
    }
}

/// The allocator's user data: mlua's allocator to delegate to and the run state.
pub struct CountingAlloc {
    inner: ffi::lua_Alloc,
    inner_ud: *mut c_void,
    run: Rc<RunState>,
}

/// Installs the counting allocator on `state` (in front of the current one). The returned box
/// must outlive the state or be uninstalled with [`uninstall`] first.
///
/// # Safety
/// `state` must be a valid Lua state, not running a script.
pub unsafe fn install(state: *mut ffi::lua_State, run: Rc<RunState>) -> Box<CountingAlloc> {
    let mut inner_ud = std::ptr::null_mut();
    // SAFETY: `state` is valid per the caller.
    let inner = unsafe { ffi::lua_getallocf(state, &mut inner_ud) };
    let mut alloc = Box::new(CountingAlloc {
        inner,
        inner_ud,
        run,
    });
    let ud: *mut CountingAlloc = &mut *alloc;
    // SAFETY: `ud` points into the box, which the caller keeps alive while it is installed.
    unsafe { ffi::lua_setallocf(state, counting_alloc, ud.cast()) };
    alloc
}

/// Puts the original allocator back.
///
/// # Safety
/// `state` must be the state `alloc` was installed on, still valid.
pub unsafe fn uninstall(state: *mut ffi::lua_State, alloc: &CountingAlloc) {
    // SAFETY: per the caller.
    unsafe { ffi::lua_setallocf(state, alloc.inner, alloc.inner_ud) };
}

/// `lua_Alloc`: delegates, then counts growth; past a stop, growth fails (Lua raises its
/// `not enough memory` error), so a C function cannot go on allocating after the decision.
unsafe extern "C" fn counting_alloc(
    ud: *mut c_void,
    ptr: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    // SAFETY: `ud` is the `CountingAlloc` installed with this function (see `install`).
    let alloc = unsafe { &*(ud as *const CountingAlloc) };
    let growth = if ptr.is_null() {
        nsize
    } else {
        nsize.saturating_sub(osize)
    } as u64;
    let run = &alloc.run;
    if growth > 0 && run.running.get() && run.stop.try_borrow().is_ok_and(|s| s.is_some()) {
        return std::ptr::null_mut();
    }
    // SAFETY: the inner allocator is mlua's, called with its own user data.
    let out = unsafe { (alloc.inner)(alloc.inner_ud, ptr, osize, nsize) };
    if growth > 0 && !out.is_null() && run.running.get() {
        let total = run.allocated_bytes.get().saturating_add(growth);
        run.allocated_bytes.set(total);
        if total >= run.next_allocation_checkpoint.get() {
            run.next_allocation_checkpoint
                .set(total.saturating_add(ALLOCATION_CHECKPOINT_BYTES));
            run.checkpoint();
        }
    }
    out
}
