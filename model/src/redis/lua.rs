//! The Lua 5.1 scripting engine (`script_lua.c`, `eval.c` of Redis 7.0): a sandboxed state
//! reused across scripts, the `redis` library, the RESP ⇄ Lua conversions and Redis's error
//! formats.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};

use std::ffi::{CString, c_char, c_int, c_void};

use mlua::state::{GcIncParams, GcMode};
use mlua::{Function, IntoLua, Lua, LuaOptions, StdLib, Table, Value, ffi};
use sha1::{Digest, Sha1};

use super::lua_alloc::{self, CountingAlloc, RunState};
use super::reply::{Protocol, Reply};
use super::script_limits::{INSTRUCTIONS_PER_CHECKPOINT, ScriptMonitor};

/// `rand.c`: the initial 48-bit state `{0x330E, 0xABCD, 0x1234}`. Redis 7.0 never reseeds it
/// per script, so `math.random` is one stream per process.
pub const RAND48_INITIAL: u64 = 0x1234_ABCD_330E;

/// `redisLrand48`: the next 31-bit value.
pub fn lrand48(state: &Cell<u64>) -> i32 {
    let next = (0x5_DEEC_E66D_u64
        .wrapping_mul(state.get())
        .wrapping_add(0xB))
        & ((1 << 48) - 1);
    state.set(next);
    (next >> 17) as i32
}

/// `redisSrand48`.
pub fn srand48(state: &Cell<u64>, seed: i32) {
    state.set((u64::from(seed as u32) << 16) | 0x330E);
}

/// Lowercase hex sha1 (`sha1hex`).
pub fn sha1_hex(data: &[u8]) -> String {
    crate::history::hex(&Sha1::digest(data))
}

/// The chunk name of our own Lua code; its frames are skipped when locating an error.
const PRELUDE_NAME: &str = "=locksim";

/// Builds the sandbox: the script globals table `S` (what scripts may see), its read-only proxy
/// used as the scripts' environment (`_G`), and the `redis` library written in Lua over the Rust
/// primitives in `prims`.
const PRELUDE: &str = r#"
local prims = ...
local error, select, type, tonumber, tostring, rawset, setmetatable, floor =
      error, select, type, tonumber, tostring, rawset, setmetatable, math.floor
local readonly = {}
-- Globals built on first use, behind the strict proxy (scripts cannot tell: `pairs` and
-- `rawget` on the proxy see nothing either way).
local lazy = {}
local function protect(real, strict)
  local proxy = {}
  local mt = {
    __index = real,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = false,
  }
  if strict then
    -- Only a name `real` lacks reaches the function: `redis`, `KEYS` and `ARGV` are found in
    -- `real` as a table lookup, without a Lua call per access (three per lock script: 8 % of
    -- `locksim serve`'s EVALSHA, issue 32), as Redis finds them in its read-only globals table
    -- (`script_lua.c` `luaSetErrorMetatable`: its `__index` only sees missing names). The
    -- function is called from the script's frame either way, so level 2 is the script's line.
    setmetatable(real, {__index = function(_, k)
      local v
      if lazy[k] then
        v = lazy[k]()
        lazy[k] = nil
        rawset(real, k, v)
      end
      if v == nil then
        error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
      end
      return v
    end})
  end
  readonly[proxy] = real
  return setmetatable(proxy, mt)
end

-- Functions that Redis implements in C raise their errors from a C frame, so the error location
-- is the caller's line even after a tail call. `raising(impl)` gives such a C function: impl
-- returns (value) or (error, true) to raise the error as is, or (message, 'where') to raise it
-- prefixed with the caller's position, like luaL_error.
local raising = prims.raising
local redis = {}
redis.call = prims.redis_call
redis.pcall = function(...)
  return (prims.call(...))
end
redis.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if e:sub(1, 1) ~= '-' then e = '-' .. e end
  return {err = prims.error_text(e)}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
redis.sha1hex = raising(function(...)
  if select('#', ...) ~= 1 then return {err = 'ERR wrong number of arguments'}, true end
  return prims.sha1hex((...))
end)
redis.log = raising(function(...)
  local n = select('#', ...)
  if n < 2 then return {err = 'ERR redis.log() requires two arguments or more.'}, true end
  local level = tonumber((...))
  if level == nil then return {err = 'ERR First argument must be a number (log level).'}, true end
  if level < 0 or level > 3 then return {err = 'ERR Invalid debug level.'}, true end
end)
redis.setresp = raising(function(...)
  if select('#', ...) ~= 1 then return {err = 'ERR redis.setresp() requires one argument.'}, true end
  local v = tonumber((...))
  if v ~= 2 and v ~= 3 then return {err = 'ERR RESP version must be 2 or 3.'}, true end
  prims.setresp(v)
end)
redis.set_repl = raising(function(...)
  if select('#', ...) ~= 1 then return {err = 'ERR redis.set_repl() requires one argument.'}, true end
  local v = tonumber((...))
  if v == nil or v < 0 or v > 3 then
    return {err = 'ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.'}, true
  end
end)
redis.acl_check_cmd = prims.acl_check_cmd
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = '7.0.15'
redis.REDIS_VERSION_NUM = 0x0007000f

-- An integer below 2^63 in magnitude as C's int arithmetic wraps it (its low 32 bits).
local function int32(x)
  x = x % 2^32
  if x >= 2^31 then x = x - 2^32 end
  return x
end
-- luaL_checkint: (integer) or (message) for the argument error. As `(int)lua_tointeger` on
-- x86-64: truncated toward zero into 64 bits (cvttsd2sq: NaN and numbers beyond 2^63 give
-- INT64_MIN), then its low 32 bits, so math.random(2^53 + 1) is math.random(1) as in Redis.
local function checkint(n, v, fname)
  local x = tonumber(v)
  if x == nil then
    local got = v == nil and 'no value' or type(v)
    return nil, "bad argument #" .. n .. " to '" .. fname .. "' (number expected, got " .. got .. ")"
  end
  if x ~= x or x >= 2^63 or x < -2^63 then return 0 end
  return int32(x - x % 1 + (x < 0 and x % 1 ~= 0 and 1 or 0))
end
local mathlib = {}
for k, v in pairs(math) do mathlib[k] = v end
-- script_lua.c redis_math_random / redis_math_randomseed over rand.c
mathlib.random = raising(function(...)
  local r = prims.rand()
  local n = select('#', ...)
  if n == 0 then return r end
  if n == 1 then
    local u, e = checkint(1, (...), 'random')
    if e then return e, 'where' end
    if not (1 <= u) then return "bad argument #1 to 'random' (interval is empty)", 'where' end
    return floor(r * u) + 1
  end
  if n == 2 then
    local a, b = ...
    local l, e1 = checkint(1, a, 'random')
    if e1 then return e1, 'where' end
    local u, e2 = checkint(2, b, 'random')
    if e2 then return e2, 'where' end
    if not (l <= u) then return "bad argument #2 to 'random' (interval is empty)", 'where' end
    -- `u-l+1` is int arithmetic in lmathlib.c: math.random(0, 2147483647) spans INT_MIN.
    return floor(r * int32(u - l + 1)) + l
  end
  return "wrong number of arguments", 'where'
end)
mathlib.randomseed = raising(function(seed)
  local v, e = checkint(1, seed, 'randomseed')
  if e then return e, 'where' end
  prims.srand(v)
end)

local S = {}
for _, name in ipairs({'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable', 'ipairs',
    'load', 'loadstring', 'next', 'pairs', 'pcall', 'rawequal', 'rawget', 'select', 'setmetatable',
    'tonumber', 'tostring', 'type', 'unpack', 'xpcall', '_VERSION'}) do
  S[name] = _G[name]
end
-- script_lua.c luaRedisPcall, a C function: `error(msg, 2)` under it points at the script.
S.pcall = prims.pcall
S.rawset, S.setmetatable = prims.readonly_aware(readonly)
-- eval.c's message handler is a global in Redis 7.0, as scripts see it; ours runs in Rust
-- (`error_handler`), and this copy of eval.c's Lua serves scripts that call it.
local getinfo = prims.getinfo
S.__redis__err__handler = function(err)
  local i = getinfo(2)
  if i and i.what == 'C' then
    i = getinfo(3)
  end
  if type(err) ~= 'table' then
    err = {err='ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end
S.coroutine = protect(coroutine)
S.string = protect(string)
-- The strings' metatable is shared by every script: a script that changed its `__index` ran its
-- own code inside the next scripts (CVE-2025-46818, Redis 45eac0262 made it read-only). Scripts
-- get it read-only, as the other tables they share.
local string_meta = getmetatable('')
string_meta.__index = S.string
S.getmetatable = prims.getmetatable_view(string_meta, protect(string_meta), getmetatable)
S.table = protect(table)
S.math = protect(mathlib)
S.redis = protect(redis)
for _, name in ipairs({'cjson', 'struct', 'cmsgpack', 'bit'}) do
  lazy[name] = function() return protect(prims.open_library(name)) end
end
local env = protect(S, true)
S._G = env
-- Redis 7.0's read-only tables are real tables (`lua_enablereadonlytable`): `next`, `pairs`,
-- `rawget` and `table.foreach` read what they hold, and `table.insert` raises on them. Ours are
-- empty proxies, so these C functions look through a proxy to the table behind it (the lazy
-- globals built first) and `table.insert` refuses one. Functions that read only the array part
-- (`ipairs`, `unpack`, `table.concat`, ...) need no view: no read-only table has one.
local function materialize()
  if next(lazy) == nil then return end
  for k, load in pairs(lazy) do
    rawset(S, k, load())
    lazy[k] = nil
  end
end
S.next, S.pairs, S.rawget, table.foreach, table.insert =
  prims.readonly_views(readonly, materialize, next, pairs, rawget, table.foreach, table.insert)
return env, S
"#;

/// Runs a command for `redis.call` / `redis.pcall` as the Lua client speaking `Protocol`:
/// `Ok(reply)` or `Err(error text)` for checks that refuse the call (`scriptCall`).
pub type CallFn<'a> = dyn FnMut(&[Vec<u8>], Protocol) -> Result<Reply, String> + 'a;

/// Where `redis.call` finds the host's callback while a script runs.
type CallSlot = Cell<Option<*mut CallFn<'static>>>;

/// What the engine is created with.
pub struct EngineConfig {
    pub rand48: Rc<Cell<u64>>,
    /// Lua's heap limit in bytes (0: none).
    pub memory_limit_bytes: usize,
    pub monitor: Rc<RefCell<Box<dyn ScriptMonitor>>>,
    /// The server's `SCRIPT_WRITE_DIRTY` flag.
    pub wrote: Rc<Cell<bool>>,
}

pub struct LuaEngine {
    lua: Lua,
    env: Table,
    runner: Function,
    handler: Function,
    /// Stores KEYS and ARGV in the globals (`set_arrays`).
    set_arrays: Function,
    /// Compiled scripts by sha, up to `FUNCTION_HANDLES_MAX`; the rest in `spilled`.
    functions: BTreeMap<String, Function>,
    /// Scripts past `FUNCTION_HANDLES_MAX`, in a Lua table (sha → function), created on the
    /// first one; `spilled_shas` answers `has_function` without entering Lua.
    spilled: Option<Table>,
    spilled_shas: BTreeSet<String>,
    run: Rc<RunState>,
    /// The Lua client's protocol (`redis.setresp`), RESP2 at the start of every script.
    protocol: Rc<Cell<Protocol>>,
    /// What `redis.call` reaches the host through (its address is an upvalue of `prims.call`).
    call: Box<CallContext>,
    /// The main thread, whose count hook is tightened when a script must stop.
    main_state: *mut ffi::lua_State,
    alloc: Option<Box<CountingAlloc>>,
    memory_limit_bytes: usize,
}

/// Compiled scripts an engine holds as mlua handles. mlua keeps each handle in a slot of its
/// reference thread, which Lua 5.1 caps near 8,000 (`LUAI_MAXCSTACK`): with a handle per script,
/// every EVAL failed with "out of Lua stack" after about 7,000 distinct scripts. Past this many
/// they are kept in a Lua table instead, as Redis keeps every script in its Lua state.
const FUNCTION_HANDLES_MAX: usize = 1024;

/// Our own chunks, compiled once per process and loaded into every Lua state as bytecode:
/// parsing them from source was 0.3 ms per Redis node per run, 40 % of `redlock-clock-jump`
/// (issue 15). The bytecode keeps its chunk name and lines, so errors read as before.
struct Sandbox {
    prelude: Vec<u8>,
    runner: Vec<u8>,
}

/// Stores KEYS and ARGV (`set_arrays` over its light userdata) then runs the script under its
/// error handler: one call into Lua per script (KEYS and ARGV were a protected call of their
/// own, 5 % of `locksim serve`'s EVALSHA, issue 32).
const RUNNER: &str = "local set, arrays, f, h = ... set(arrays) return xpcall(f, h)";

impl Sandbox {
    fn compiled() -> &'static Sandbox {
        static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
        SANDBOX.get_or_init(|| {
            let lua = Lua::new_with(StdLib::NONE, LuaOptions::default()).expect("a Lua state");
            let compile = |source: &str| {
                lua.load(source)
                    .set_name(PRELUDE_NAME)
                    .into_function()
                    .expect("our own Lua compiles")
                    .dump(false)
            };
            Sandbox {
                prelude: compile(PRELUDE),
                runner: compile(RUNNER),
            }
        })
    }

    fn load(&self, lua: &Lua, bytecode: &[u8]) -> mlua::Result<Function> {
        load_bytecode(lua, bytecode, PRELUDE_NAME, Value::Nil)
    }
}

unsafe extern "C-unwind" {
    /// `lauxlib.c` of `model/vendor/lua`: loads a binary chunk. `lua_load`, and so mlua's
    /// `Lua::load` and the `load` and `loadstring` of scripts, reads source only, as in Redis
    /// (`ldo.c` `f_parser` there).
    fn luaL_loadbytecode(
        state: *mut ffi::lua_State,
        buff: *const c_char,
        size: usize,
        name: *const c_char,
    ) -> c_int;
}

/// The function of bytecode locksim compiled itself (`Sandbox`, `script_bytecode`), with `env`
/// as its environment unless it is nil.
fn load_bytecode(lua: &Lua, bytecode: &[u8], name: &str, env: Value) -> mlua::Result<Function> {
    let name = CString::new(name).map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
    // SAFETY: Lua C API on the state mlua hands us: the environment (argument 1) is replaced by
    // the function, or by `nil, message, status`; `luaL_loadbytecode` is protected and raises
    // nothing.
    let (function, message, status): (Value, Value, Value) = unsafe {
        lua.exec_raw(env, |state| {
            let status = luaL_loadbytecode(
                state,
                bytecode.as_ptr().cast(),
                bytecode.len(),
                name.as_ptr(),
            );
            if status == ffi::LUA_OK {
                if ffi::lua_istable(state, 1) != 0 {
                    ffi::lua_pushvalue(state, 1);
                    ffi::lua_setfenv(state, -2);
                }
            } else {
                ffi::lua_pushnil(state);
                ffi::lua_insert(state, -2);
                ffi::lua_pushinteger(state, status as ffi::lua_Integer);
            }
            ffi::lua_remove(state, 1);
        })?
    };
    let message = match message {
        Value::String(s) => s.to_string_lossy(),
        _ => String::new(),
    };
    match (function, status) {
        (Value::Function(f), _) => Ok(f),
        (_, Value::Integer(status)) if status == ffi::lua_Integer::from(ffi::LUA_ERRMEM) => {
            Err(mlua::Error::MemoryError(message))
        }
        _ => Err(mlua::Error::RuntimeError(message)),
    }
}

/// The chunk name of scripts: errors read `user_script:<line>: ...` (`luaCreateFunction`).
const USER_SCRIPT_NAME: &str = "@user_script";

/// The reply to a body that does not compile.
fn compile_error(e: &mlua::Error) -> String {
    format!(
        "ERR Error compiling script (new function): {}",
        lua_error_message(e)
    )
}

/// Bodies kept by `script_bytecode`; past it the cache starts again (a server fed endless
/// distinct scripts must not grow without bound here: its own script cache is where Redis keeps
/// them).
const COMPILED_SCRIPTS_MAX: usize = 1024;

/// The bytecode of `body` (whose sha1 is `sha`), or the compile error's reply text; a leading
/// `#!` shebang line is blanked out, keeping line numbers. Compiled once per process and loaded
/// into each engine: every Redis node of every run compiles the same few lock scripts, and
/// parsing them was 5-9 % of a Redlock run (issue 15). Every engine loads bytecode, the first as
/// the thousandth, so its heap follows the same course whatever ran before in the process.
fn script_bytecode(sha: &str, body: &[u8]) -> Result<Arc<[u8]>, String> {
    static COMPILED: Mutex<BTreeMap<String, Arc<[u8]>>> = Mutex::new(BTreeMap::new());
    let cached = COMPILED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(sha)
        .cloned();
    if let Some(bytecode) = cached {
        return Ok(bytecode);
    }
    let code: Cow<[u8]> = if body.starts_with(b"#!") {
        let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
        let mut code = vec![b' '; end];
        code.extend_from_slice(&body[end..]);
        Cow::Owned(code)
    } else {
        Cow::Borrowed(body)
    };
    // A state of its own: the garbage of parsing stays out of the engines.
    let scratch = Lua::new_with(StdLib::NONE, LuaOptions::default())
        .map_err(|e| format!("ERR Error creating the Lua state: {e}"))?;
    // Whatever the body starts with, Lua parses it as source (`load_bytecode`): a body that
    // starts like a binary chunk gets Redis's syntax error, not mlua's mode error.
    let bytecode: Arc<[u8]> = scratch
        .load(&code[..])
        .set_name(USER_SCRIPT_NAME)
        .into_function()
        .map_err(|e| compile_error(&e))?
        .dump(false)
        .into();
    let mut compiled = COMPILED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if compiled.len() >= COMPILED_SCRIPTS_MAX {
        compiled.clear();
    }
    compiled.insert(sha.to_string(), bytecode.clone());
    Ok(bytecode)
}

impl Drop for LuaEngine {
    fn drop(&mut self) {
        // A whole collection before the state closes (SCRIPT FLUSH, the end of a run), so that
        // `lua_close` does not start in the middle of a cycle a script left behind (its
        // `collectgarbage` calls): Redis collects before closing since CVE-2024-46981
        // (`freeLuaScriptsSync`, Redis 7.2.7).
        let _ = self.lua.gc_collect();
        if let Some(alloc) = &self.alloc {
            // SAFETY: the state is still open (its handles are dropped after this) and no script
            // runs; mlua's allocator frees what it allocated.
            unsafe { lua_alloc::uninstall(self.main_state, alloc) };
        }
    }
}

/// The count hook (`luaMaskCountHook`): every 100,000 instructions a checkpoint; once a stop is
/// decided it fires at every instruction and raises the stop's error in the user's code, so
/// `pcall` cannot catch it for long (Redis switches to a line hook for the same reason). Our own
/// Lua (the `pcall` wrapper, the runner around the script) is left alone: the error must reach
/// the script's error handler, not escape it.
fn count_hook(run: &RunState, debug: &mlua::debug::Debug) -> mlua::Result<mlua::VmState> {
    if !run.running.get() {
        return Ok(mlua::VmState::Continue);
    }
    if run.stopped().is_some() {
        if debug.source().source.as_deref() == Some(PRELUDE_NAME) {
            return Ok(mlua::VmState::Continue);
        }
    } else {
        run.instructions
            .set(run.instructions.get() + INSTRUCTIONS_PER_CHECKPOINT);
        if run.checkpoint().is_none() {
            return Ok(mlua::VmState::Continue);
        }
    }
    match run.raising() {
        Some(stop) => Err(mlua::Error::RuntimeError(stop.message)),
        None => Ok(mlua::VmState::Continue),
    }
}

/// How a string or table function's C work is estimated from its arguments, before it runs.
#[derive(Clone, Copy)]
enum Cost {
    /// `string.rep(s, n)`: `#s * n`.
    Repeat,
    /// The size of the first argument (`sub`, `upper`, `find`, ...).
    First,
    /// The sizes of all arguments (`format`).
    AllArguments,
    /// The number of arguments (`char`).
    ArgumentCount,
    /// `gsub(s, pattern, repl)`: `#s * (1 + #repl)`.
    Substitute,
    /// 8 bytes per element of the table (`concat`, `sort`).
    TableLength,
}

/// The C functions of the sandbox that work in proportion to their arguments.
const CHARGED: &[(&std::ffi::CStr, &std::ffi::CStr, Cost)] = &[
    (c"string", c"rep", Cost::Repeat),
    (c"string", c"format", Cost::AllArguments),
    (c"string", c"char", Cost::ArgumentCount),
    (c"string", c"gsub", Cost::Substitute),
    (c"string", c"byte", Cost::First),
    (c"string", c"find", Cost::First),
    (c"string", c"gmatch", Cost::First),
    (c"string", c"lower", Cost::First),
    (c"string", c"match", Cost::First),
    (c"string", c"reverse", Cost::First),
    (c"string", c"sub", Cost::First),
    (c"string", c"upper", Cost::First),
    (c"table", c"concat", Cost::TableLength),
    (c"table", c"sort", Cost::TableLength),
];

/// Replaces each function of `CHARGED` by a C closure that charges its cost to the running
/// script, then calls the original in the same C frame: argument errors keep Redis's texts and
/// locations (`bad argument #1 to 'rep'` at the user's line).
///
/// # Safety
/// `run` must stay valid as long as the Lua state.
unsafe fn charge_c_functions(lua: &Lua, run: *const RunState) -> mlua::Result<()> {
    // SAFETY: plain Lua C API on the state mlua hands us; stack balanced.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            for (lib, name, cost) in CHARGED {
                ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, lib.as_ptr());
                ffi::lua_getfield(state, -1, name.as_ptr());
                let original = ffi::lua_tocfunction(state, -1);
                ffi::lua_pop(state, 1);
                let Some(original) = original else {
                    ffi::lua_pop(state, 1);
                    continue;
                };
                ffi::lua_pushlightuserdata(state, run as *mut std::ffi::c_void);
                ffi::lua_pushinteger(state, *cost as ffi::lua_Integer);
                ffi::lua_pushlightuserdata(state, original as *mut std::ffi::c_void);
                ffi::lua_pushcclosure(state, charged_trampoline, 3);
                ffi::lua_setfield(state, -2, name.as_ptr());
                ffi::lua_pop(state, 1);
            }
        })
    }
}

/// The size of argument `i` as the string functions see it (numbers become short strings).
unsafe fn argument_size(state: *mut ffi::lua_State, i: c_int) -> u64 {
    // SAFETY: reads a stack slot of the running C function.
    unsafe {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => ffi::lua_objlen(state, i) as u64,
            ffi::LUA_TNUMBER => 8,
            _ => 0,
        }
    }
}

/// Upvalues: the run state, the `Cost`, the original function.
unsafe extern "C-unwind" fn charged_trampoline(state: *mut ffi::lua_State) -> c_int {
    const COSTS: [Cost; 6] = [
        Cost::Repeat,
        Cost::First,
        Cost::AllArguments,
        Cost::ArgumentCount,
        Cost::Substitute,
        Cost::TableLength,
    ];
    // SAFETY: the upvalues are those `charge_c_functions` set; `run` outlives the state; no Rust
    // value with a destructor is alive when `lua_error` long-jumps out.
    unsafe {
        let run = ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const RunState;
        let kind = ffi::lua_tointeger(state, ffi::lua_upvalueindex(2)) as usize;
        let original: ffi::lua_CFunction =
            std::mem::transmute(ffi::lua_touserdata(state, ffi::lua_upvalueindex(3)));
        let nargs = ffi::lua_gettop(state);
        let cost = match COSTS.get(kind).copied().unwrap_or(Cost::First) {
            Cost::Repeat => {
                let n = ffi::lua_tonumber(state, 2);
                let n = if n.is_finite() && n > 0.0 {
                    n.min(1e18) as u64
                } else {
                    0
                };
                argument_size(state, 1).saturating_mul(n)
            }
            Cost::First => argument_size(state, 1),
            Cost::AllArguments => (1..=nargs).map(|i| argument_size(state, i)).sum(),
            Cost::ArgumentCount => nargs as u64,
            Cost::Substitute => argument_size(state, 1).saturating_mul(1 + argument_size(state, 3)),
            Cost::TableLength => {
                if ffi::lua_type(state, 1) == ffi::LUA_TTABLE {
                    ffi::lua_objlen(state, 1) as u64 * 8
                } else {
                    0
                }
            }
        };
        let stopped = match (*run).charge(cost).and_then(|_| (*run).raising()) {
            Some(stop) => {
                ffi::lua_pushlstring(state, stop.message.as_ptr().cast(), stop.message.len());
                true
            }
            None => false,
        };
        if stopped {
            ffi::lua_error(state)
        }
        original(state)
    }
}

impl LuaEngine {
    pub fn new(config: EngineConfig) -> mlua::Result<LuaEngine> {
        let EngineConfig {
            rand48,
            memory_limit_bytes,
            monitor,
            wrote,
        } = config;
        let lua = Lua::new_with(
            StdLib::STRING | StdLib::TABLE | StdLib::MATH,
            LuaOptions::default(),
        )?;
        lua.set_memory_limit(memory_limit_bytes)?;
        // Every collection cycle runs whole, inside the allocation that crosses the threshold
        // (`lgc.c` `luaC_step`: a step multiplier of 0 is "no limit"). Lua 5.1's incremental
        // steps end after a fixed amount of work, and how far a step gets depends on the order it
        // meets objects in, which for tables keyed by tables or functions is their address: with
        // address-space randomisation the moment garbage was freed, so the heap in use and the
        // bytes a script allocated (a freed string is allocated again), changed from one process
        // to the next, and with them which limit a runaway script met first.
        lua.gc_set_mode(GcMode::Incremental(
            GcIncParams::default().step_multiplier(0),
        ));
        // The cycle under way while the libraries opened (still incremental) ends here, so every
        // engine goes on from the same heap: dropping the handle `Lua::new_with` returned runs a
        // full collection (mlua's `Drop for Lua`); its clones do not, so closing the state when
        // the engine is dropped does not first collect what closing frees anyway.
        let lua = {
            let handle = lua.clone();
            drop(lua);
            handle
        };
        let mut main_state = std::ptr::null_mut();
        // SAFETY: only reads the state pointer of the main thread.
        unsafe {
            lua.exec_raw::<()>((), |state| main_state = state)?;
        }
        let run = Rc::new(RunState::new(monitor, wrote, main_state));
        // SAFETY: the libraries are loaded; `run` lives in the engine as long as the state.
        unsafe { charge_c_functions(&lua, Rc::as_ptr(&run))? };
        let prims = lua.create_table()?;
        let protocol = Rc::new(Cell::new(Protocol::Resp2));
        let resp = protocol.clone();
        prims.set(
            "setresp",
            lua.create_function(move |_, v: f64| {
                resp.set(if v == 3.0 {
                    Protocol::Resp3
                } else {
                    Protocol::Resp2
                });
                Ok(())
            })?,
        )?;
        let state = rand48.clone();
        prims.set(
            "rand",
            lua.create_function(move |_, ()| {
                let v = lrand48(&state);
                Ok(f64::from(v % i32::MAX) / f64::from(i32::MAX))
            })?,
        )?;
        let state = rand48;
        prims.set(
            "srand",
            lua.create_function(move |_, seed: f64| {
                srand48(&state, seed as i64 as i32);
                Ok(())
            })?,
        )?;
        prims.set(
            "sha1hex",
            lua.create_function(|lua, v: Value| {
                let bytes = match &v {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Number(_) | Value::Integer(_) => lua_tostring(lua, &v)?.into_bytes(),
                    _ => Vec::new(),
                };
                Ok(sha1_hex(&bytes))
            })?,
        )?;
        prims.set(
            "error_text",
            lua.create_function(|lua, s: mlua::LuaString| {
                lua.create_string(lua_error_text(&s.as_bytes()))
            })?,
        )?;
        prims.set(
            "raising",
            // A C closure over `imp` that raises what `imp` flags as an error (see `PRELUDE`).
            lua.create_function(|lua, imp: Function| c_closure(lua, imp, raising_trampoline))?,
        )?;
        let call = Box::new(CallContext {
            host: CallSlot::default(),
            protocol: protocol.clone(),
            panic: RefCell::new(None),
        });
        let (prims_call, redis_call) = call_primitives(&lua, &call)?;
        prims.set("call", prims_call)?;
        prims.set("redis_call", redis_call)?;
        prims.set(
            "readonly_aware",
            lua.create_function(|lua, readonly: Table| {
                Ok((
                    c_closure(lua, &readonly, rawset_trampoline)?,
                    c_closure(lua, &readonly, setmetatable_trampoline)?,
                ))
            })?,
        )?;
        prims.set("pcall", c_closure(&lua, Value::Nil, redis_pcall)?)?;
        prims.set("getinfo", c_closure(&lua, Value::Nil, getinfo)?)?;
        prims.set("acl_check_cmd", c_closure(&lua, Value::Nil, acl_check_cmd)?)?;
        prims.set(
            "readonly_views",
            c_closure(&lua, Value::Nil, readonly_views)?,
        )?;
        prims.set(
            "getmetatable_view",
            c_closure(&lua, Value::Nil, getmetatable_view)?,
        )?;
        let sandbox = Sandbox::compiled();
        // Redis's C libraries, each built on a script's first use of it (a Lua state per Redis
        // node per run, issue 15).
        prims.set("open_library", c_closure(&lua, Value::Nil, open_library)?)?;
        let (env, globals): (Table, Table) =
            sandbox.load(&lua, &sandbox.prelude)?.call(prims.clone())?;
        let hook_run = run.clone();
        lua.set_global_hook(
            mlua::HookTriggers::new().every_nth_instruction(INSTRUCTIONS_PER_CHECKPOINT as u32),
            move |_, debug| count_hook(&hook_run, debug),
        )?;
        let runner = sandbox.load(&lua, &sandbox.runner)?;
        let handler = lua.create_function(|lua, err: Value| error_handler(lua, err))?;
        let set_arrays = c_closure(&lua, &globals, set_arrays)?;
        // SAFETY: the state is open and idle; the box lives in the engine, whose Drop uninstalls
        // it before the state closes.
        let alloc = unsafe { lua_alloc::install(main_state, run.clone()) };
        Ok(LuaEngine {
            lua,
            env,
            runner,
            handler,
            set_arrays,
            functions: BTreeMap::new(),
            spilled: None,
            spilled_shas: BTreeSet::new(),
            run,
            protocol,
            call,
            main_state,
            alloc: Some(alloc),
            memory_limit_bytes,
        })
    }

    pub fn has_function(&self, sha: &str) -> bool {
        self.functions.contains_key(sha) || self.spilled_shas.contains(sha)
    }

    /// `luaCreateFunction`: compiles a body under the chunk name `@user_script`. A leading
    /// `#!` shebang line is blanked out (keeping line numbers). `Err` is the reply text.
    pub fn create_function(&mut self, sha: &str, body: &[u8]) -> Result<(), String> {
        if self.has_function(sha) {
            return Ok(());
        }
        let bytecode = script_bytecode(sha, body)?;
        let env = Value::Table(self.env.clone());
        match load_bytecode(&self.lua, &bytecode, USER_SCRIPT_NAME, env) {
            Ok(f) if self.functions.len() < FUNCTION_HANDLES_MAX => {
                self.functions.insert(sha.to_string(), f);
                Ok(())
            }
            Ok(f) => {
                let spilled = match &self.spilled {
                    Some(table) => table.clone(),
                    None => self.lua.create_table().map_err(|e| compile_error(&e))?,
                };
                spilled.raw_set(sha, f).map_err(|e| compile_error(&e))?;
                self.spilled = Some(spilled);
                self.spilled_shas.insert(sha.to_string());
                Ok(())
            }
            Err(e) => Err(compile_error(&e)),
        }
    }

    /// Runs a compiled script (`luaCallFunction`): sets KEYS/ARGV, binds `redis.call` to `call`
    /// and converts the result or the error.
    pub fn run(
        &mut self,
        sha: &str,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
        call: &mut CallFn<'_>,
    ) -> Reply {
        let spilled = || {
            let table = self.spilled.as_ref()?;
            self.spilled_shas.contains(sha).then_some(())?;
            table.raw_get::<Function>(sha).ok()
        };
        let spilled_function;
        let function = match self.functions.get(sha) {
            Some(function) => function,
            None => {
                spilled_function = spilled();
                match &spilled_function {
                    Some(function) => function,
                    None => return Reply::error("NOSCRIPT No matching script. Please use EVAL."),
                }
            }
        };
        self.protocol.set(Protocol::Resp2);
        self.run.relax_hook();
        self.run.start();
        let protocol = self.protocol.clone();
        // SAFETY: only the lifetime is erased; the slot is emptied again below, before `call`'s
        // borrow ends.
        let host = unsafe { std::mem::transmute::<*mut CallFn<'_>, *mut CallFn<'static>>(call) };
        let outer = self.call.host.replace(Some(host));
        let arrays = Arrays { keys, args };
        let arrays = mlua::LightUserData(&arrays as *const Arrays as *mut c_void);
        let result = (|| {
            // `xpcall`'s status and the script's first value (Redis keeps one: redis@7.0.15
            // `script_lua.c` `luaCallFunction`, `lua_pcall(lua,0,1,-2)`): read as a pair, the
            // rest left on the stack unconverted (a `MultiValue` of them all was 2 % of `locksim
            // serve`'s instructions under EVALSHA, issue 32).
            let (status, value): (Value, Value) =
                self.runner
                    .call((&self.set_arrays, arrays, function, &self.handler))?;
            let ok = matches!(status, Value::Boolean(true));
            Ok(if ok {
                lua_to_reply(&value, protocol.get())
            } else {
                script_error_reply(sha, &value)
            })
        })();
        self.call.host.set(outer);
        if let Some(payload) = self.call.panic.take() {
            std::panic::resume_unwind(payload);
        }
        self.run.running.set(false);
        self.run.relax_hook();
        let stop = self.run.stopped();
        let reply = result.unwrap_or_else(|e| {
            Reply::error(format!(
                "ERR Error running script: {}",
                lua_error_message(&e)
            ))
        });
        let failed = reply.is_error();
        let reply = match stop {
            // The stop's error with its location, or (raised where no location could be built)
            // the bare text.
            Some(stop)
                if !reply
                    .error_text()
                    .is_some_and(|e| e.contains(&stop.message)) =>
            {
                Reply::error(format!("ERR {}", stop.message))
            }
            _ => reply,
        };
        // Garbage of a failed script (a memory error leaves it all behind) or a heap half full
        // is collected now, so the next script starts with its whole allowance.
        if failed
            || (self.memory_limit_bytes > 0 && self.lua.used_memory() > self.memory_limit_bytes / 2)
        {
            let _ = self.lua.gc_collect();
        }
        reply
    }

    /// Lua memory in use, as INFO prints it.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }
}

/// What `set_arrays` stores as KEYS and ARGV.
struct Arrays<'a> {
    keys: &'a [Vec<u8>],
    args: &'a [Vec<u8>],
}

/// A C closure of `f` over one upvalue (`raising`, `set_arrays`, the read-only-aware base
/// functions).
fn c_closure(lua: &Lua, upvalue: impl IntoLua, f: ffi::lua_CFunction) -> mlua::Result<Function> {
    // SAFETY: the closure only moves the upvalue (already on the stack) into the new closure.
    unsafe { lua.exec_raw(upvalue, |state| ffi::lua_pushcclosure(state, f, 1)) }
}

/// `luaSetGlobalArray` for KEYS and ARGV, both tables built by one C function (through mlua's
/// API each string and each store was its own protected call, and each protected call
/// allocated three C closures: 9 % of the baseline, issue 15). Called by `RUNNER` (inside the
/// engine's protected call) with a light userdata pointing to `Arrays` that outlives the call;
/// stores both arrays in upvalue 1. Only borrows are alive here, so a
/// memory error long-jumping out skips no destructor.
unsafe extern "C-unwind" fn set_arrays(state: *mut ffi::lua_State) -> c_int {
    /// `globals[name] = {items...}`; at most three slots pushed (LUA_MINSTACK is 20).
    unsafe fn set_array(state: *mut ffi::lua_State, name: &str, items: &[Vec<u8>]) {
        // SAFETY (caller): the globals table is upvalue 1.
        unsafe {
            ffi::lua_pushlstring(state, name.as_ptr().cast(), name.len());
            ffi::lua_createtable(state, items.len() as c_int, 0);
            for (i, item) in items.iter().enumerate() {
                ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
                ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
            }
            ffi::lua_rawset(state, ffi::lua_upvalueindex(1));
        }
    }
    // SAFETY: argument 1 is the light userdata `set_keys_and_argv` passes, alive for the call.
    unsafe {
        let arrays = &*(ffi::lua_touserdata(state, 1) as *const Arrays);
        set_array(state, "KEYS", arrays.keys);
        set_array(state, "ARGV", arrays.args);
    }
    0
}

// `rawset` and `setmetatable` for scripts are C functions, as in Redis, so that `return
// rawset(...)` keeps the script's frame for the error location and argument errors point at the
// script's line. Upvalue 1 is the set of read-only tables.

/// Redis's read-only tables: its patched `lua_rawset` and `lua_setmetatable` raise this from
/// the C function (no position), before anything else about the table is looked at.
unsafe fn check_writable(state: *mut ffi::lua_State) {
    const READONLY: &str = "Attempt to modify a readonly table";
    // SAFETY (caller): a C function over the read-only map, the table at index 1.
    unsafe {
        ffi::lua_pushvalue(state, 1);
        ffi::lua_rawget(state, ffi::lua_upvalueindex(1));
        if ffi::lua_toboolean(state, -1) != 0 {
            ffi::lua_pushlstring(state, READONLY.as_ptr().cast(), READONLY.len());
            ffi::lua_error(state);
        }
        ffi::lua_pop(state, 1);
    }
}

/// `luaB_rawset` over read-only tables.
unsafe extern "C-unwind" fn rawset_trampoline(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; no Rust value with a destructor is
    // alive when an error long-jumps out.
    unsafe {
        ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
        ffi::luaL_checkany(state, 2);
        ffi::luaL_checkany(state, 3);
        ffi::lua_settop(state, 3);
        check_writable(state);
        ffi::lua_rawset(state, 1);
        1
    }
}

/// `luaB_setmetatable` over read-only tables (ours carry a `__metatable` field Redis's do not
/// have, so the read-only check comes first).
unsafe extern "C-unwind" fn setmetatable_trampoline(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as `rawset_trampoline`.
    unsafe {
        let t = ffi::lua_type(state, 2);
        ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
        if t != ffi::LUA_TNIL && t != ffi::LUA_TTABLE {
            ffi::luaL_argerror(state, 2, c"nil or table expected".as_ptr());
        }
        check_writable(state);
        if ffi::luaL_getmetafield(state, 1, c"__metatable".as_ptr()) != 0 {
            ffi::luaL_error(state, c"cannot change a protected metatable".as_ptr());
        }
        ffi::lua_settop(state, 2);
        ffi::lua_setmetatable(state, 1);
        1
    }
}

/// `prims.readonly_views(readonly, materialize, next, pairs, rawget, foreach, insert)`: the same
/// functions, looking through read-only proxies (`readonly` maps each to its table) as Redis's
/// real read-only tables let them. `pairs` is its own C function again over a `next` that looks
/// through, so a loop holds the proxy, not the table behind it. The originals must be C
/// functions without upvalues of their own (views call them in their own frame).
unsafe extern "C-unwind" fn readonly_views(state: *mut ffi::lua_State) -> c_int {
    /// Pushes `view` over the C function at `index`.
    unsafe fn push_view(state: *mut ffi::lua_State, index: c_int, view: ffi::lua_CFunction) {
        // SAFETY (caller): arguments 1 and 2 are the read-only map and `materialize`.
        unsafe {
            let Some(original) = ffi::lua_tocfunction(state, index) else {
                ffi::luaL_argerror(state, index, c"C function expected".as_ptr());
                unreachable!("luaL_argerror raises");
            };
            ffi::lua_pushvalue(state, 1);
            ffi::lua_pushlightuserdata(state, original as *mut c_void);
            ffi::lua_pushvalue(state, 2);
            ffi::lua_pushcclosure(state, view, 3);
        }
    }
    // SAFETY: Lua C API on the state Lua called us with (7 arguments; 5 results and 4
    // temporaries pushed, within the stack `lua_checkstack` ensures).
    unsafe {
        ffi::lua_settop(state, 7);
        ffi::luaL_checkstack(state, 10, c"readonly_views".as_ptr());
        // The encoders (`cjson`, `cmsgpack`) look through the proxies with the same map
        // (`vendor/redis/deps/lua/src/locksim_readonly.h`).
        ffi::lua_pushvalue(state, 1);
        ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, c"locksim.readonly".as_ptr());
        push_view(state, 3, see_through);
        // `luaB_pairs` again, over a `next` that looks through (its upvalue 1): another
        // closure than the global `next`, as in Lua 5.1 (`pairs({}) == next` is false).
        let Some(pairs) = ffi::lua_tocfunction(state, 4) else {
            ffi::luaL_argerror(state, 4, c"C function expected".as_ptr());
            unreachable!("luaL_argerror raises");
        };
        push_view(state, 3, see_through);
        ffi::lua_pushcclosure(state, pairs, 1);
        push_view(state, 5, see_through);
        push_view(state, 6, see_through);
        push_view(state, 7, refuse_readonly);
        5
    }
}

/// `prims.getmetatable_view(string_meta, string_meta_view, getmetatable)`: the `getmetatable`
/// of scripts, a C closure over them (`getmetatable_trampoline`).
unsafe extern "C-unwind" fn getmetatable_view(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; 3 arguments become upvalues.
    unsafe {
        ffi::lua_settop(state, 3);
        let Some(original) = ffi::lua_tocfunction(state, 3) else {
            ffi::luaL_argerror(state, 3, c"C function expected".as_ptr());
            unreachable!("luaL_argerror raises");
        };
        ffi::lua_pop(state, 1);
        ffi::lua_pushlightuserdata(state, original as *mut c_void);
        ffi::lua_pushcclosure(state, getmetatable_trampoline, 3);
        1
    }
}

/// `luaB_getmetatable` (upvalue 3) run in this frame (its argument error points at the
/// script's line), then the strings' metatable (upvalue 1) comes back as its read-only view
/// (upvalue 2).
unsafe extern "C-unwind" fn getmetatable_trampoline(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; upvalue 3 is a `lua_CFunction`
    // (`getmetatable_view`) that leaves its result on top; one more slot is pushed, within
    // LUA_MINSTACK.
    unsafe {
        let original = std::mem::transmute::<*mut c_void, ffi::lua_CFunction>(ffi::lua_touserdata(
            state,
            ffi::lua_upvalueindex(3),
        ));
        original(state);
        if ffi::lua_rawequal(state, -1, ffi::lua_upvalueindex(1)) != 0 {
            ffi::lua_pop(state, 1);
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        }
        1
    }
}

/// The view of a C function (upvalue 2) that reads its table argument: a read-only proxy
/// (upvalue 1 maps it to its table) is replaced by its table, after the lazy globals are built
/// (upvalue 3). The original runs in this frame, so its argument errors name the function as
/// the script called it and point at the script's line.
unsafe extern "C-unwind" fn see_through(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; upvalue 2 is a `lua_CFunction`
    // (`readonly_views`), called with this frame's stack as Lua would have called it.
    unsafe {
        if push_proxied(state) {
            ffi::lua_replace(state, 1);
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(3));
            ffi::lua_call(state, 0, 0);
        } else {
            ffi::lua_pop(state, 1);
        }
        original(state)(state)
    }
}

/// Pushes what the read-only map (upvalue 1) holds for argument 1 (nil for anything but a
/// proxy); whether argument 1 is a proxy.
unsafe fn push_proxied(state: *mut ffi::lua_State) -> bool {
    // SAFETY (caller): a view's frame; one slot pushed.
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
            ffi::lua_pushnil(state);
            return false;
        }
        ffi::lua_pushvalue(state, 1);
        ffi::lua_rawget(state, ffi::lua_upvalueindex(1));
        ffi::lua_type(state, -1) == ffi::LUA_TTABLE
    }
}

/// `table.insert`'s view: on a read-only table it checks its arguments as `tinsert` does, then
/// raises where `tinsert`'s `lua_rawseti` would in Redis (no position: a C function's error).
unsafe extern "C-unwind" fn refuse_readonly(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as `see_through`.
    unsafe {
        let readonly = push_proxied(state);
        ffi::lua_pop(state, 1);
        if readonly {
            match ffi::lua_gettop(state) {
                2 => {}
                3 => {
                    ffi::luaL_checkinteger(state, 2);
                }
                _ => {
                    ffi::luaL_error(state, c"wrong number of arguments to 'insert'".as_ptr());
                }
            }
            check_writable(state);
        }
        original(state)(state)
    }
}

/// The original C function of a view (upvalue 2).
unsafe fn original(state: *mut ffi::lua_State) -> ffi::lua_CFunction {
    // SAFETY (caller): upvalue 2 is the light userdata `readonly_views` made of a C function.
    unsafe {
        std::mem::transmute::<*mut c_void, ffi::lua_CFunction>(ffi::lua_touserdata(
            state,
            ffi::lua_upvalueindex(2),
        ))
    }
}

/// Calls upvalue 1 with the arguments; on `(err, true)` raises `err`, on `(msg, 'where')`
/// raises the caller's position followed by `msg` (`luaL_error`), else returns the value.
unsafe extern "C-unwind" fn raising_trampoline(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: standard Lua C API use on the state Lua called us with; no Rust value with a
    // destructor is alive when `lua_error` long-jumps out of this frame.
    unsafe {
        let nargs = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, nargs, 2);
        match ffi::lua_type(state, -1) {
            ffi::LUA_TBOOLEAN if ffi::lua_toboolean(state, -1) != 0 => {
                ffi::lua_pop(state, 1);
                ffi::lua_error(state)
            }
            ffi::LUA_TSTRING => {
                ffi::lua_pop(state, 1);
                ffi::luaL_where(state, 1);
                ffi::lua_insert(state, -2);
                ffi::lua_concat(state, 2);
                ffi::lua_error(state)
            }
            _ => {
                ffi::lua_pop(state, 1);
                1
            }
        }
    }
}

/// Our xpcall message handler, `__redis__err__handler` of Redis 7.0: wrap string errors as
/// `{err='ERR ' .. msg}` and record where in the user script the error happened.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let table = match err {
        Value::Table(t) => t,
        Value::Error(e) => {
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {}", lua_error_message(&e)))?;
            t
        }
        other => {
            let t = lua.create_table()?;
            let text = lua_tostring(lua, &other)?;
            t.raw_set("err", format!("ERR {text}"))?;
            t
        }
    };
    let mut level = 1;
    while let Some((what, source, line)) = lua.inspect_stack(level, |d| {
        let src = d.source();
        (
            src.what,
            src.source.map(|s| s.into_owned()),
            d.current_line(),
        )
    }) {
        level += 1;
        if what == "C" || source.as_deref() == Some(PRELUDE_NAME) {
            continue;
        }
        if let Some(source) = source {
            table.raw_set("source", source)?;
        }
        if let Some(line) = line {
            table.raw_set("line", line)?;
        }
        break;
    }
    Ok(table)
}

/// Lua's `tostring` of a value.
fn lua_tostring(lua: &Lua, v: &Value) -> mlua::Result<String> {
    let tostring: Function = lua.globals().get("tostring")?;
    let s: mlua::LuaString = tostring.call(v.clone())?;
    Ok(String::from_utf8_lossy(&s.as_bytes()).into_owned())
}

/// The message of an mlua error without mlua's decorations (tracebacks, "runtime error: ").
fn lua_error_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_error_message(cause),
        other => other.to_string(),
    }
}

/// `luaPushErrorBuff`: turns a `-CODE message` reply text into the Lua error string
/// `CODE message` (a text without a space becomes `ERR text`), trailing CR/LF trimmed.
pub fn lua_error_text(text: &[u8]) -> Vec<u8> {
    match text.strip_prefix(b"-") {
        Some(rest) => reply_error_text(rest),
        None => [b"ERR ", trim_line_ends(text)].concat(),
    }
}

/// `lua_error_text` of an error reply's text (after its `-`).
fn reply_error_text(rest: &[u8]) -> Vec<u8> {
    let (code, msg) = reply_error_parts(rest);
    [code, b" ", msg].concat()
}

/// The code and the message of an error reply's text (after its `-`), as `lua_error_text`
/// joins them.
fn reply_error_parts(rest: &[u8]) -> (&[u8], &[u8]) {
    match rest.iter().position(|&b| b == b' ') {
        Some(i) => (&rest[..i], trim_line_ends(&rest[i + 1..])),
        None => (b"ERR", trim_line_ends(rest)),
    }
}

fn trim_line_ends(mut msg: &[u8]) -> &[u8] {
    while let Some(rest) = msg.strip_suffix(b"\n").or_else(|| msg.strip_suffix(b"\r")) {
        msg = rest;
    }
    while let Some(rest) = msg.strip_prefix(b"\n").or_else(|| msg.strip_prefix(b"\r")) {
        msg = rest;
    }
    msg
}

/// What `prims.call` (under `redis.call` and `redis.pcall`) reaches the host through.
struct CallContext {
    /// The host's callback while a script runs (`None` between scripts).
    host: CallSlot,
    /// The Lua client's protocol (`redis.setresp`).
    protocol: Rc<Cell<Protocol>>,
    /// A panic of the host's callback, resumed when the script has returned: it cannot unwind
    /// through Lua's C frames.
    panic: RefCell<Option<Box<dyn std::any::Any + Send>>>,
}

/// `prims.call` (under `redis.pcall`) and `redis.call` itself: C closures over the
/// context and `push_call_result`. C functions of our own rather than mlua callbacks: mlua
/// converted every argument and result through protected calls that each allocated C closures,
/// the larger part of a `redis.call` (issue 15). `redis.call` raises its error table from its
/// own C frame, as `luaRedisCallCommand` does.
fn call_primitives(lua: &Lua, context: &CallContext) -> mlua::Result<(Function, Function)> {
    let closure = |raising: bool| {
        // SAFETY: pushes three C values and closes over them; `context` is boxed in the
        // engine, which outlives every script of its state.
        unsafe {
            lua.exec_raw::<Function>((), |state| {
                ffi::lua_pushlightuserdata(state, context as *const CallContext as *mut c_void);
                ffi::lua_pushcfunction(state, push_call_result);
                ffi::lua_pushboolean(state, c_int::from(raising));
                ffi::lua_pushcclosure(state, call_trampoline, 3);
            })
        }
    };
    Ok((closure(false)?, closure(true)?))
}

/// What a `redis.call` comes to, before it is a Lua value.
enum CallResult {
    /// The command's reply, for a Lua client speaking the protocol.
    Reply(Reply, Protocol),
    /// An error table `{err = text}` (`ignore_error_stats_update` for a command's own error).
    Error { text: Vec<u8>, ignore_stats: bool },
}

/// `luaRedisGenericCommand`: argument conversion, the call, the reply conversion. Returns the Lua
/// value; an error table is raised instead for `redis.call`, returned for `redis.pcall`. The result is pushed by `push_call_result` under `lua_pcall`, and every Rust
/// value is dropped before an error of that push is raised again: a Lua error long-jumps, and no
/// destructor may be pending when it does.
unsafe extern "C-unwind" fn call_trampoline(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; upvalue 1 is the engine's boxed
    // `CallContext`, upvalue 2 `push_call_result`.
    unsafe {
        let context =
            &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const CallContext);
        // `redis.call` (upvalue 3) raises an error table; `prims.call` returns it.
        let raising = ffi::lua_toboolean(state, ffi::lua_upvalueindex(3)) != 0;
        let status = {
            let result = call_host(state, context);
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
            ffi::lua_pushlightuserdata(state, &result as *const CallResult as *mut c_void);
            ffi::lua_pcall(state, 1, 2, 0)
        };
        if status == ffi::LUA_ERRMEM {
            // As mlua raised a memory error of a callback (the script's error reads the same).
            ffi::lua_pop(state, 1);
            let text = "memory error: not enough memory";
            ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
        }
        if status != ffi::LUA_OK {
            ffi::lua_error(state)
        }
        let is_error = ffi::lua_toboolean(state, -1) != 0;
        ffi::lua_pop(state, 1);
        if raising && is_error {
            ffi::lua_error(state)
        }
        1
    }
}

/// Reads the arguments and runs the command through the host.
unsafe fn call_host(state: *mut ffi::lua_State, context: &CallContext) -> CallResult {
    let error = |text: &[u8]| CallResult::Error {
        text: text.to_vec(),
        ignore_stats: false,
    };
    // SAFETY (caller): a C function's state.
    let argv = match unsafe { command_arguments(state) } {
        Ok(argv) => argv,
        Err(text) => return error(text),
    };
    let Some(host) = context.host.get() else {
        return error(b"ERR redis.call outside a script");
    };
    let protocol = context.protocol.get();
    // SAFETY: `run` stores a callback that outlives the script and takes it back before
    // returning; scripts never run inside `redis.call` (EVAL is `noscript`), so this is the
    // only live borrow of it.
    let host = unsafe { &mut *host };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| host(&argv, protocol)));
    match outcome {
        Err(payload) => {
            *context.panic.borrow_mut() = Some(payload);
            error(b"ERR the host panicked")
        }
        Ok(Err(text)) => error(&lua_error_text(text.as_bytes())),
        Ok(Ok(Reply::Error(e))) => CallResult::Error {
            text: reply_error_text(&e),
            ignore_stats: true,
        },
        Ok(Ok(reply)) => CallResult::Reply(reply, protocol),
    }
}

/// A C function's arguments as a command's (`luaArgsToRedisArgv`): strings as they are, numbers
/// as `%.17g`; else the error text Redis raises. Reading raises no Lua error.
unsafe fn command_arguments(state: *mut ffi::lua_State) -> Result<Vec<Vec<u8>>, &'static [u8]> {
    // SAFETY (caller): a C function's state; reading strings and numbers raises no error.
    let nargs = unsafe { ffi::lua_gettop(state) };
    if nargs < 1 {
        return Err(b"ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(nargs as usize);
    for i in 1..=nargs {
        // SAFETY: `i` is a valid index; `lua_tolstring` on a string does not convert it.
        unsafe {
            match ffi::lua_type(state, i) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let ptr = ffi::lua_tolstring(state, i, &mut len);
                    argv.push(std::slice::from_raw_parts(ptr.cast::<u8>(), len).to_vec());
                }
                ffi::LUA_TNUMBER => {
                    argv.push(super::number::fmt_g17(ffi::lua_tonumber(state, i)).into_bytes())
                }
                _ => {
                    return Err(b"ERR Lua redis lib command arguments must be strings or integers");
                }
            }
        }
    }
    Ok(argv)
}

// The libraries Redis 7.0.15 bundles with its Lua, compiled from its sources by `build.rs`.
unsafe extern "C-unwind" {
    fn luaopen_cjson(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_struct(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_cmsgpack(state: *mut ffi::lua_State) -> c_int;
    fn luaopen_bit(state: *mut ffi::lua_State) -> c_int;
}

/// `prims.open_library(name)`: the table of one of Redis's C libraries (`luaLoadLib` of
/// `script_lua.c`: its `luaopen_*` called with the name).
unsafe extern "C-unwind" fn open_library(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; the `luaopen_*` are Lua C functions.
    unsafe {
        let mut len = 0;
        let name = ffi::luaL_checklstring(state, 1, &mut len);
        let open: ffi::lua_CFunction = match std::slice::from_raw_parts(name.cast::<u8>(), len) {
            b"cjson" => luaopen_cjson,
            b"struct" => luaopen_struct,
            b"cmsgpack" => luaopen_cmsgpack,
            b"bit" => luaopen_bit,
            _ => {
                ffi::luaL_argerror(state, 1, c"no such library".as_ptr());
                unreachable!("luaL_argerror raises");
            }
        };
        ffi::lua_pushcfunction(state, open);
        ffi::lua_pushvalue(state, 1);
        ffi::lua_call(state, 1, 1);
        1
    }
}

/// `prims.getinfo(level)`: `{what, source, currentline}` of the function at `level` (0: this
/// one), or nil: the part of `debug.getinfo(level, 'nSl')` eval.c's message handler reads (the
/// sandbox has no `debug`).
unsafe extern "C-unwind" fn getinfo(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; `ar` is filled by `lua_getstack` before
    // `lua_getinfo` reads it.
    unsafe {
        let level = ffi::luaL_checkinteger(state, 1) as c_int;
        let mut ar: ffi::lua_Debug = std::mem::zeroed();
        if ffi::lua_getstack(state, level, &mut ar) == 0 {
            ffi::lua_pushnil(state);
            return 1;
        }
        ffi::lua_getinfo(state, c"Sl".as_ptr(), &mut ar);
        ffi::lua_createtable(state, 0, 3);
        ffi::lua_pushstring(state, ar.what);
        ffi::lua_setfield(state, -2, c"what".as_ptr());
        ffi::lua_pushstring(state, ar.source);
        ffi::lua_setfield(state, -2, c"source".as_ptr());
        ffi::lua_pushinteger(state, ar.currentline as ffi::lua_Integer);
        ffi::lua_setfield(state, -2, c"currentline".as_ptr());
        1
    }
}

/// The scripts' `pcall` (`luaRedisPcall`): Lua's, with an error table that has an `err` string
/// (or number) reduced to it, and any other `err` field returned after the table. A C function, as in Redis: a level-2 `error` inside it names the
/// script's line. Without arguments Redis's `lua_pcall(lua, -1, ...)` calls its own `true`
/// placeholder; that outcome is given here without the out-of-bounds call.
unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    const NO_FUNCTION: &str = "attempt to call a boolean value";
    // SAFETY: Lua C API on the state Lua called us with; no Rust value with a destructor is
    // alive across the calls that may raise.
    unsafe {
        let argc = ffi::lua_gettop(state);
        if argc == 0 {
            ffi::lua_pushboolean(state, 0);
            ffi::lua_pushlstring(state, NO_FUNCTION.as_ptr().cast(), NO_FUNCTION.len());
            return 2;
        }
        ffi::lua_pushboolean(state, 1);
        ffi::lua_insert(state, 1);
        if ffi::lua_pcall(state, argc - 1, ffi::LUA_MULTRET, 0) != ffi::LUA_OK {
            ffi::lua_remove(state, 1);
            if ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
                // Redis 7.0.15 leaves a field that is not a string on the stack: `pcall` then
                // returns it as a third value (`select('#', pcall(error, {}))` is 3).
                ffi::lua_getfield(state, -1, c"err".as_ptr());
                if ffi::lua_isstring(state, -1) != 0 {
                    ffi::lua_replace(state, -2);
                }
            }
            ffi::lua_pushboolean(state, 0);
            ffi::lua_insert(state, 1);
        }
        ffi::lua_gettop(state)
    }
}

/// `redis.acl_check_cmd(command, args...)` (`luaRedisAclCheckCmdPermissionsCommand`): whether
/// the user may run the command; here every command the model knows (subcommands included, no
/// arity check), as for Redis's default user; an unknown one raises an error table.
unsafe extern "C-unwind" fn acl_check_cmd(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua C API on the state Lua called us with; the argument vector is dropped before
    // anything that may raise a Lua error.
    unsafe {
        let known = command_arguments(state).and_then(|argv| {
            super::commands::lookup(&argv)
                .map(|_| ())
                .ok_or(b"ERR Invalid command passed to redis.acl_check_cmd()".as_slice())
        });
        match known {
            Ok(()) => {
                ffi::lua_pushboolean(state, 1);
                1
            }
            Err(text) => {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                ffi::lua_setfield(state, -2, c"err".as_ptr());
                ffi::lua_error(state)
            }
        }
    }
}

/// Called (protected) with a light userdata pointing to a `CallResult`: pushes its Lua value
/// and whether it is an error table.
unsafe extern "C-unwind" fn push_call_result(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: argument 1 is the light userdata `call_trampoline` passes, alive for the call;
    // only borrows are alive here.
    unsafe {
        let result = &*(ffi::lua_touserdata(state, 1) as *const CallResult);
        match result {
            CallResult::Reply(reply, protocol) => {
                push_reply(state, reply, *protocol);
                ffi::lua_pushboolean(state, 0);
            }
            CallResult::Error { text, ignore_stats } => {
                ffi::lua_createtable(state, 0, 0);
                set_field(state, "err", |state| push_bytes(state, text));
                if *ignore_stats {
                    set_field(state, "ignore_error_stats_update", |state| {
                        ffi::lua_pushboolean(state, 1)
                    });
                }
                ffi::lua_pushboolean(state, 1);
            }
        }
        2
    }
}

unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    // SAFETY (caller): a protected C function's state with a free slot.
    unsafe {
        ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
    }
}

/// `t[key] = value` (raw) for the table on top, `push` pushing the value.
unsafe fn set_field(state: *mut ffi::lua_State, key: &str, push: impl FnOnce(*mut ffi::lua_State)) {
    // SAFETY (caller): a protected C function's state, the table on top.
    unsafe {
        push_bytes(state, key.as_bytes());
        push(state);
        ffi::lua_rawset(state, -3);
    }
}

/// `{key = value}`, `push` pushing the value.
unsafe fn push_table_with(
    state: *mut ffi::lua_State,
    key: &str,
    push: impl FnOnce(*mut ffi::lua_State),
) {
    // SAFETY (caller): as `set_field`.
    unsafe {
        ffi::lua_createtable(state, 0, 0);
        set_field(state, key, push);
    }
}

/// `redisProtocolToLuaType`, for a Lua client speaking `protocol`: integer → number, bulk →
/// string, status → {ok=}, error → {err=}, array → table; RESP2 nulls → false; RESP3 nulls →
/// nil, booleans → booleans, maps → {map={}}, sets → {set={}}, doubles → {double=},
/// big numbers → {big_number=}, verbatim strings → {verbatim_string={format=, string=}}.
/// A RESP2 client sees a map flattened, a double as its `%.17g` string, a boolean as 1/0.
/// Tables are built as mlua built them (empty, then grown), so the heap follows the same course.
///
/// # Safety
/// A protected C function's state (a memory error long-jumps); only borrows may be alive.
unsafe fn push_reply(state: *mut ffi::lua_State, reply: &Reply, protocol: Protocol) {
    let resp3 = protocol == Protocol::Resp3;
    // SAFETY: per the function's contract; each level uses at most four slots.
    unsafe {
        ffi::luaL_checkstack(state, 4, c"reply too deeply nested".as_ptr());
        let sequence = |state, items: &mut dyn Iterator<Item = &Reply>| {
            ffi::lua_createtable(state, 0, 0);
            for (i, item) in items.enumerate() {
                push_reply(state, item, protocol);
                ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
            }
        };
        match reply {
            Reply::Integer(i) => ffi::lua_pushnumber(state, *i as f64),
            Reply::Bulk(b) => push_bytes(state, b),
            Reply::Nil | Reply::NilArray if resp3 => ffi::lua_pushnil(state),
            Reply::Nil | Reply::NilArray => ffi::lua_pushboolean(state, 0),
            Reply::Status(s) => {
                push_table_with(state, "ok", |state| push_bytes(state, s.as_bytes()))
            }
            Reply::Error(e) => {
                let (code, msg) = reply_error_parts(e);
                push_bytes(state, code);
                push_bytes(state, b" ");
                push_bytes(state, msg);
                ffi::lua_concat(state, 3);
                ffi::lua_createtable(state, 0, 0);
                push_bytes(state, b"err");
                ffi::lua_pushvalue(state, -3);
                ffi::lua_rawset(state, -3);
                ffi::lua_remove(state, -2);
            }
            Reply::Array(items) | Reply::Sequence(items) | Reply::Push(items) => {
                sequence(state, &mut items.iter())
            }
            Reply::Set(items) if resp3 => push_table_with(state, "set", |state| {
                ffi::lua_createtable(state, 0, 0);
                for item in items {
                    push_reply(state, item, protocol);
                    ffi::lua_pushboolean(state, 1);
                    ffi::lua_rawset(state, -3);
                }
            }),
            Reply::Set(items) => sequence(state, &mut items.iter()),
            Reply::Map(pairs) if resp3 => push_table_with(state, "map", |state| {
                ffi::lua_createtable(state, 0, 0);
                for (k, v) in pairs {
                    push_reply(state, k, protocol);
                    push_reply(state, v, protocol);
                    ffi::lua_rawset(state, -3);
                }
            }),
            Reply::Map(pairs) => sequence(state, &mut pairs.iter().flat_map(|(k, v)| [k, v])),
            Reply::Double(d) if resp3 => {
                push_table_with(state, "double", |state| ffi::lua_pushnumber(state, *d))
            }
            Reply::Double(d) => {
                // Copied out of the String first: no Rust value with a destructor may be alive
                // while Lua allocates. `%.17g` takes at most 24 bytes.
                let mut digits = [0u8; 32];
                let len = {
                    let text = super::number::fmt_g17(*d);
                    let len = text.len().min(digits.len());
                    digits[..len].copy_from_slice(&text.as_bytes()[..len]);
                    len
                };
                push_bytes(state, &digits[..len])
            }
            Reply::Bool(b) if resp3 => ffi::lua_pushboolean(state, c_int::from(*b)),
            Reply::Bool(b) => ffi::lua_pushnumber(state, f64::from(u8::from(*b))),
            Reply::BigNumber(n) if resp3 => {
                push_table_with(state, "big_number", |state| push_bytes(state, n))
            }
            Reply::BigNumber(n) => push_bytes(state, n),
            Reply::Verbatim { format, text } if resp3 => {
                push_table_with(state, "verbatim_string", |state| {
                    ffi::lua_createtable(state, 0, 0);
                    set_field(state, "string", |state| push_bytes(state, text));
                    set_field(state, "format", |state| push_bytes(state, format));
                })
            }
            Reply::Verbatim { text, .. } => push_bytes(state, text),
        }
    }
}

/// C's `(long long)` cast of a double on x86-64: NaN and out-of-range give `LLONG_MIN`.
fn c_double_to_ll(d: f64) -> i64 {
    if d.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// Error and status texts end up in a RESP line: CR and LF become spaces (`sdsmapchars`).
fn one_line(bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

/// `luaReplyToRedisReply`: the script's result for its caller. Booleans follow the Lua client's
/// protocol (`redis.setresp`): RESP2 true → 1, false → null; RESP3 → a boolean.
pub fn lua_to_reply(value: &Value, protocol: Protocol) -> Reply {
    match value {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(b) if protocol == Protocol::Resp3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Integer(1),
        Value::Boolean(false) | Value::Nil => Reply::Nil,
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => Reply::Integer(c_double_to_ll(*n)),
        Value::Table(t) => table_to_reply(t, protocol),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, protocol: Protocol) -> Reply {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        return Reply::Error(one_line(&e.as_bytes()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        let bytes = s.as_bytes();
        let status = super::commands::c_str(&bytes);
        return Reply::Status(String::from_utf8_lossy(&one_line(status)).into_owned());
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return Reply::Double(d),
        Ok(Value::Integer(d)) => return Reply::Double(d as f64),
        _ => {}
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        return Reply::BigNumber(one_line(&s.as_bytes()));
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string")
        && let Ok(Value::String(format)) = v.raw_get::<Value>("format")
        && let Ok(Value::String(text)) = v.raw_get::<Value>("string")
    {
        let mut f = [b' '; 3];
        for (slot, b) in f.iter_mut().zip(super::commands::c_str(&format.as_bytes())) {
            *slot = *b;
        }
        return Reply::Verbatim {
            format: f,
            text: text.as_bytes().to_vec(),
        };
    }
    if let Ok(Value::Table(map)) = t.raw_get::<Value>("map") {
        return Reply::Map(
            map.pairs::<Value, Value>()
                .filter_map(Result::ok)
                .map(|(k, v)| (lua_to_reply(&k, protocol), lua_to_reply(&v, protocol)))
                .collect(),
        );
    }
    if let Ok(Value::Table(set)) = t.raw_get::<Value>("set") {
        return Reply::Set(
            set.pairs::<Value, Value>()
                .filter_map(Result::ok)
                .map(|(k, _)| lua_to_reply(&k, protocol))
                .collect(),
        );
    }
    let mut items = Vec::new();
    let mut i = 1;
    while let Ok(v) = t.raw_get::<Value>(i) {
        if v.is_nil() {
            break;
        }
        items.push(lua_to_reply(&v, protocol));
        i += 1;
    }
    Reply::Array(items)
}

/// The reply of a script that raised (`luaCallFunction`): `-<err> script: <sha>, on
/// <source>:<line>.` for error tables with a location, the bare message otherwise.
fn script_error_reply(sha: &str, err: &Value) -> Reply {
    let Value::Table(t) = err else {
        // Not raised through the handler (Lua's memory error): `%.100s` of the message.
        let msg = match err {
            Value::String(s) => s.as_bytes()[..s.as_bytes().len().min(100)].to_vec(),
            _ => b"execution failure".to_vec(),
        };
        let mut text = format!("ERR Error running script {sha}, ").into_bytes();
        text.extend_from_slice(&one_line(&msg));
        return Reply::Error(text);
    };
    let mut msg = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => one_line(&s.as_bytes()),
        _ => b"(null)".to_vec(),
    };
    let source = match t.raw_get::<Value>("source") {
        Ok(Value::String(s)) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        _ => None,
    };
    let line = match t.raw_get::<Value>("line") {
        Ok(Value::Integer(l)) => Some(l),
        Ok(Value::Number(l)) => Some(l as i64),
        _ => None,
    };
    if let (Some(source), Some(line)) = (source, line)
        && line != 0
    {
        msg.extend_from_slice(format!(" script: {sha}, on {source}:{line}.").as_bytes());
    }
    Reply::Error(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand48_matches_redis_first_values() {
        let state = Cell::new(RAND48_INITIAL);
        let r = f64::from(lrand48(&state) % i32::MAX) / f64::from(i32::MAX);
        assert_eq!((r * 1_000_000.0).floor() as i64 + 1, 396465);
    }

    #[test]
    fn error_text_splits_code() {
        assert_eq!(lua_error_text(b"-ERR bad thing\r\n"), b"ERR bad thing");
        assert_eq!(lua_error_text(b"-bad"), b"ERR bad");
        assert_eq!(lua_error_text(b"-MY bad thing"), b"MY bad thing");
        assert_eq!(lua_error_text(b"plain"), b"ERR plain");
    }
}
