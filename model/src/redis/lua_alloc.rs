//! The bookkeeping of a running script: instructions, bytes allocated and bytes produced by C
//! functions (its deterministic cost), the write flag, and the stop decided at a checkpoint. The
//! Lua state's allocator is wrapped (`lua_setallocf`) so every allocation is counted; C work
//! crossing each [`WORK_PER_CHECKPOINT`] is a checkpoint: C functions run few instructions but
//! may handle gigabytes. mlua's own allocator underneath enforces the heap limit
//! (`Lua::set_memory_limit`).

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::rc::Rc;

use mlua::ffi;

use super::script_limits::{
    ALLOCATED_BYTES_PER_UNIT, INSTRUCTIONS_PER_CHECKPOINT, ScriptMonitor, ScriptProgress,
    ScriptVerdict, WORK_PER_CHECKPOINT,
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
    pub produced_bytes: Cell<u64>,
    /// The C work (in units) at which the next checkpoint happens.
    next_checkpoint: Cell<u64>,
    /// `SCRIPT_WRITE_DIRTY`, set by the server when a script runs a write command.
    pub wrote: Rc<Cell<bool>>,
    pub stop: RefCell<Option<Stop>>,
    /// Bytes allocated when the stop was decided: growth beyond a small grace then fails.
    stop_allocated: Cell<u64>,
    pub monitor: Rc<RefCell<Box<dyn ScriptMonitor>>>,
    /// The Lua state's main thread, whose count hook is tightened after a stop.
    main_state: *mut ffi::lua_State,
}

impl RunState {
    pub fn new(
        monitor: Rc<RefCell<Box<dyn ScriptMonitor>>>,
        wrote: Rc<Cell<bool>>,
        main_state: *mut ffi::lua_State,
    ) -> RunState {
        RunState {
            running: Cell::new(false),
            instructions: Cell::new(0),
            allocated_bytes: Cell::new(0),
            produced_bytes: Cell::new(0),
            next_checkpoint: Cell::new(WORK_PER_CHECKPOINT),
            wrote,
            stop: RefCell::new(None),
            stop_allocated: Cell::new(0),
            monitor,
            main_state,
        }
    }

    /// A script starts: counters reset, the monitor told.
    pub fn start(&self) {
        self.instructions.set(0);
        self.allocated_bytes.set(0);
        self.produced_bytes.set(0);
        self.next_checkpoint.set(WORK_PER_CHECKPOINT);
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
            produced_bytes: self.produced_bytes.get(),
            wrote: self.wrote.get(),
        }
    }

    /// C work so far, in work units.
    fn c_work(&self) -> u64 {
        self.produced_bytes
            .get()
            .saturating_add(self.allocated_bytes.get() / ALLOCATED_BYTES_PER_UNIT)
    }

    /// A checkpoint if the C work crossed the next threshold.
    pub fn after_c_work(&self) -> Option<Stop> {
        let work = self.c_work();
        if work < self.next_checkpoint.get() {
            return self.stopped();
        }
        self.next_checkpoint
            .set(work.saturating_add(WORK_PER_CHECKPOINT));
        self.checkpoint()
    }

    /// A C function is about to produce or scan `bytes`: charged first, so a huge request is
    /// stopped before it runs.
    pub fn charge(&self, bytes: u64) -> Option<Stop> {
        if !self.running.get() {
            return None;
        }
        self.produced_bytes
            .set(self.produced_bytes.get().saturating_add(bytes));
        self.after_c_work()
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
        self.stop_allocated.set(self.allocated_bytes.get());
        // Also when decided inside the allocator, in the middle of a C function: the script's
        // next instruction raises the stop.
        self.tighten_hook();
        Some(stop)
    }

    /// The stop, about to be raised (by the count hook or a charged C function): the grace
    /// starts again, so the error, its location and the error handler's reply can be built
    /// even after the C function that met the stop used up the grace.
    pub fn raising(&self) -> Option<Stop> {
        let stop = self.stopped()?;
        self.stop_allocated.set(self.allocated_bytes.get());
        Some(stop)
    }

    /// Makes the count hook fire at every instruction (`lua_sethook` only stores its
    /// arguments, so this is safe inside the allocator too).
    fn tighten_hook(&self) {
        // SAFETY: `main_state` is the engine's open main thread.
        unsafe {
            let hook = ffi::lua_gethook(self.main_state);
            ffi::lua_sethook(self.main_state, hook, ffi::LUA_MASKCOUNT, 1);
        }
    }

    /// Back to a checkpoint every [`INSTRUCTIONS_PER_CHECKPOINT`] instructions.
    pub fn relax_hook(&self) {
        // SAFETY: as in `tighten_hook`.
        unsafe {
            let hook = ffi::lua_gethook(self.main_state);
            ffi::lua_sethook(
                self.main_state,
                hook,
                ffi::LUA_MASKCOUNT,
                INSTRUCTIONS_PER_CHECKPOINT as c_int,
            );
        }
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

/// Growth allowed after a stop, so the stop's error (and its location) can still be built.
const STOP_GRACE_BYTES: u64 = 1 << 20;

/// `lua_Alloc`: delegates, then counts growth; past a stop (and its grace), growth fails (Lua
/// raises its `not enough memory` error), so a C function cannot go on allocating after the
/// decision.
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
    if growth > 0
        && run.running.get()
        && run.stop.try_borrow().is_ok_and(|s| s.is_some())
        && run.allocated_bytes.get() > run.stop_allocated.get() + STOP_GRACE_BYTES
    {
        return std::ptr::null_mut();
    }
    // SAFETY: the inner allocator is mlua's, called with its own user data.
    let out = unsafe { (alloc.inner)(alloc.inner_ud, ptr, osize, nsize) };
    if growth > 0 && !out.is_null() && run.running.get() {
        run.allocated_bytes
            .set(run.allocated_bytes.get().saturating_add(growth));
        run.after_c_work();
    }
    out
}
