//! Scenario files (DESIGN.md "Scenario file (contract)"): loading, defaults and validation.
//!
//! Every field of the contract is known here. Omitted fields take the defaults documented on
//! each struct; unknown fields and bad values are errors that name the file and the field —
//! never a panic.

pub mod expect;
pub mod faults;
pub mod limits;
pub mod nemesis;
pub mod range;
pub mod schema;

use std::collections::BTreeMap;
use std::path::Path;

use model::locks::{Family, Lease, SchemeSpec, matrix_rows};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use expect::Expect;
use faults::{Fault, FaultSpec, RowNodes};
use nemesis::NemesisSpec;
use range::{MsRange, SeedRange};
use reports::incidents::Incident;

/// A validated scenario, ready to run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Where it was loaded from (for messages and `replay` commands).
    pub path: String,
    pub name: String,
    pub description: String,
    pub source: String,
    /// The seed `locksim run` uses without `--seed`.
    pub seed: u64,
    /// The seeds `check`, `sweep` and `compare` use.
    pub seeds: SeedRange,
    pub duration_ms: u64,
    pub topology: Topology,
    pub network: Network,
    /// One entry for `scheme`, several for `schemes` (a scheme sweep).
    pub schemes: Vec<SchemeSpec>,
    /// `"schemes": "all"`: every row of `locksim schemes` (a column of the comparison matrix).
    pub all_schemes: bool,
    /// The lease every scheme with one gets as its `ttl_ms` (`lease_ms`), unless it sets its own.
    pub lease_ms: Option<u64>,
    pub clients: Clients,
    pub resource: Resource,
    pub faults: Vec<Fault>,
    /// Random faults drawn from the seed (`nemesis`).
    pub nemesis: Option<NemesisSpec>,
    pub expect: Expect,
    pub expect_some: Expect,
    /// Per scheme row (by label): expectations merged over `expect` / `expect_some`.
    pub expect_by_scheme: BTreeMap<String, Expect>,
    pub expect_some_by_scheme: BTreeMap<String, Expect>,
    /// How long the lock may go ungranted while live clients want it, once every fault has
    /// healed (see `liveness_window_ms()` for the default).
    pub liveness_window_ms: Option<u64>,
    /// A reported real-world failure this scenario reproduces (`scenarios/incidents/`).
    pub incident: Option<Incident>,
    /// Where the comparison shows this scenario as a column of its matrix.
    pub matrix: Option<MatrixColumn>,
    /// Faults and nemesis validated for each number of masters a row runs with (Redlock rows
    /// may have `redlock_masters`), keyed by that number.
    variants: BTreeMap<u32, Variant>,
}

/// `matrix`: the column a `"schemes": "all"` scenario is in the comparison matrix.
#[derive(Clone, Debug, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatrixColumn {
    /// A short header (`pause > lease`); the description is its tooltip.
    pub column: String,
    /// The fault family the column is grouped under (`pauses`, `clocks`).
    pub family: String,
}

/// The faults of one node set (see `Scenario::variants`).
#[derive(Clone, Debug)]
struct Variant {
    faults: Vec<Fault>,
    nemesis: Option<NemesisSpec>,
}

/// `topology` (defaults: one master, no replicas, no sentinels, no AOF — redis.conf's defaults).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Topology {
    /// Independent masters `redis-1..N` (Redlock uses them all).
    pub masters: u32,
    /// Replicas per master: `redis-N-replica-1..M`, replicating asynchronously.
    pub replicas: u32,
    /// Sentinels `sentinel-1..S`, each monitoring every master with quorum S/2+1.
    pub sentinels: u32,
    /// Sentinel's `down-after-milliseconds`.
    pub sentinel_down_after_ms: u64,
    /// Sentinel's `failover-timeout` (default 180 s, as sentinel.conf).
    pub sentinel_failover_timeout_ms: u64,
    /// Independent masters of the Redlock-family rows (default: `masters` when it is more
    /// than 1, else 5); other schemes use `masters`.
    pub redlock_masters: Option<u32>,
    /// Extra one-way latency of every master → replica link for the whole run: a replication
    /// stream that lags this much (a failover loses what it has not delivered yet).
    pub replica_lag_ms: u64,
    /// `off` (no AOF) | `no` | `everysec` | `always`.
    #[schemars(schema_with = "schema::appendfsync_schema")]
    pub appendfsync: String,
    /// A crashed Redis stays unavailable this long after its restart is due (antirez's delayed restart).
    pub restart_delay_ms: u64,
    /// `min-replicas-to-write` (with `min-replicas-max-lag` 10 s): a master refuses writes with
    /// fewer good replicas.
    pub min_replicas_to_write: u32,
    /// `min-replicas-max-lag`: a replica counts as good for `min_replicas_to_write` if it
    /// acknowledged within this (default 10 000, redis.conf's 10 s).
    pub min_replicas_max_lag_ms: u64,
    /// How a master sends TTLs down its replication stream: `absolute` (Redis 7.0: `SET ...
    /// PXAT`, `PEXPIREAT`; redis/redis PR 8474) or `relative` (Redis 6.2: `SET ... PX ms`,
    /// `PEXPIRE`, each replica counting from its own clock when it applies them).
    #[schemars(schema_with = "schema::ttl_propagation_schema")]
    pub ttl_propagation: String,
    /// The simulation's `lua-time-limit`: the work (Lua instructions, bytes the string functions
    /// produce, bytes allocated / 8) after which a script is stopped as at the time limit
    /// (`model::redis::ScriptBudget`; a fixed amount, not seconds of this machine's time).
    pub lua_time_limit_work: u64,
    /// Lua's heap limit per Redis node: past it a script fails with Lua's "not enough memory".
    pub lua_memory_limit_mb: u64,
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            masters: 1,
            replicas: 0,
            sentinels: 0,
            sentinel_down_after_ms: 5000,
            sentinel_failover_timeout_ms: 180_000,
            redlock_masters: None,
            replica_lag_ms: 0,
            appendfsync: "off".into(),
            restart_delay_ms: 0,
            min_replicas_to_write: 0,
            min_replicas_max_lag_ms: 10_000,
            ttl_propagation: "absolute".into(),
            lua_time_limit_work: model::redis::script_limits::DEFAULT_SCRIPT_WORK,
            lua_memory_limit_mb: (model::redis::DEFAULT_LUA_MEMORY_LIMIT_BYTES >> 20) as u64,
        }
    }
}

/// `network` (default one-way latency 1–5 ms on every link).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Network {
    pub latency_ms: MsRange,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            latency_ms: MsRange { min: 1, max: 5 },
        }
    }
}

/// `clients`: the workload. Each client repeats `acquisitions` times: acquire (retrying up to
/// `acquire_timeout_ms`), read the resource, hold `hold_ms`, write it back decremented, release,
/// think `think_ms`. With `threads` > 1 every client process runs that many worker threads, each
/// doing the whole workload, sharing one lock object where the scheme's source shares state
/// between threads (seed 003's one clientId per instance, Redisson's one client UUID); each
/// thread is its own lock owner (`client-1/t2`) for the checkers.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Clients {
    pub count: u32,
    pub acquisitions: u32,
    pub hold_ms: MsRange,
    pub think_ms: MsRange,
    pub acquire_timeout_ms: u64,
    /// The client's own timeout per command; the server may still execute a command after it.
    pub command_timeout_ms: u64,
    /// Worker threads per client process (default 1).
    pub threads: u32,
    /// Lease extension during the hold, through the scheme's own extend operation.
    pub extend: Option<Extend>,
}

/// `clients.extend`: `{ "every_ms": N }` extends every N ms of the hold (a heartbeat: redbeat's
/// tick, a job extending as it goes), `{ "before_write": true }` once, after the hold and just
/// before writing. A client whose extension fails skips its write (the library told it the lock
/// is lost) and releases.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Extend {
    #[serde(default)]
    pub every_ms: Option<u64>,
    #[serde(default)]
    pub before_write: bool,
}

impl Default for Clients {
    fn default() -> Self {
        Clients {
            count: 2,
            acquisitions: 10,
            hold_ms: MsRange { min: 10, max: 50 },
            think_ms: MsRange { min: 0, max: 20 },
            acquire_timeout_ms: 5000,
            command_timeout_ms: 500,
            threads: 1,
            extend: None,
        }
    }
}

/// `resource`: the protected counter (the seeds' stock). With `fencing` it rejects stale tokens.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Resource {
    pub fencing: bool,
}

/// A locksim scenario: a topology, a workload through one lock scheme (or several), the faults
/// to inject and the verdicts to expect (docs/scenarios.md). The file as written, before
/// validation.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "locksim scenario")]
pub(crate) struct ScenarioFile {
    /// The JSON Schema an editor completes the file from (`docs/scenario.schema.json`); the
    /// run ignores it.
    #[serde(default, rename = "$schema")]
    _schema: Option<String>,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    seed: u64,
    /// The seeds `check`, `sweep` and `compare` use (default 0..19).
    #[serde(default)]
    #[schemars(schema_with = "schema::seeds_schema")]
    seeds: Option<String>,
    #[serde(default = "default_duration_ms")]
    duration_ms: u64,
    #[serde(default)]
    topology: Topology,
    #[serde(default)]
    network: Network,
    /// The lock scheme the clients use (or `schemes`).
    #[serde(default)]
    #[schemars(with = "Option<schema::SchemeSchema>")]
    scheme: Option<Value>,
    /// Several schemes: the scenario runs once per scheme (rows of `compare`).
    #[serde(default)]
    #[schemars(with = "Option<schema::SchemesSchema>")]
    schemes: Option<Value>,
    /// The lease every scheme with one gets as its `ttl_ms`, unless it sets its own; a scheme
    /// without a lease is judged on it (the liveness window).
    #[serde(default)]
    lease_ms: Option<u64>,
    #[serde(default)]
    clients: Clients,
    #[serde(default)]
    resource: Resource,
    #[serde(default)]
    faults: Vec<FaultSpec>,
    /// Random faults drawn from the seed.
    #[serde(default)]
    #[schemars(with = "Option<schema::NemesisSchema>")]
    nemesis: Option<Value>,
    /// Verdicts every seed of `seeds` must give.
    #[serde(default)]
    expect: Expect,
    /// Verdicts at least one seed of `seeds` must give (random-nemesis hunts).
    #[serde(default)]
    expect_some: Expect,
    /// Per scheme row (its label, as `locksim schemes` lists it): verdicts that replace
    /// `expect`'s, property by property.
    #[serde(default)]
    expect_by_scheme: BTreeMap<String, Expect>,
    /// Per scheme row: verdicts that replace `expect_some`'s, property by property.
    #[serde(default)]
    expect_some_by_scheme: BTreeMap<String, Expect>,
    /// How long the lock may go ungranted while live clients want it, once every fault has
    /// healed (default 2 × max(lease, longest hold) + 1 s).
    #[serde(default)]
    liveness_window_ms: Option<u64>,
    /// A reported failure of a real lock library this file reproduces (scenarios/incidents/).
    #[serde(default)]
    incident: Option<Incident>,
    /// The column of the comparison matrix a `"schemes": "all"` file is.
    #[serde(default)]
    matrix: Option<MatrixColumn>,
}

fn default_duration_ms() -> u64 {
    DEFAULT_DURATION_MS
}

/// How long a run lasts when the file does not say (`duration_ms`).
pub const DEFAULT_DURATION_MS: u64 = 60_000;

/// The lease a scheme without one (`setnx-del`, `incr-semaphore`, `set`) is given for its
/// default liveness window: the most common default lease of the other schemes (10 s).
pub const LEASELESS_WINDOW_LEASE_MS: u64 = 10_000;

/// The default seed range of `check`/`sweep`/`compare` when a scenario names none.
pub const DEFAULT_SEEDS: SeedRange = SeedRange { first: 0, last: 19 };

impl Scenario {
    /// Loads and validates a scenario file. Errors read `FILE: FIELD: PROBLEM`.
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let shown = path.display().to_string();
        let bytes = std::fs::metadata(path)
            .map_err(|e| format!("{shown}: cannot read: {e}"))?
            .len();
        if bytes > limits::MAX_FILE_BYTES {
            return Err(format!(
                "{shown}: {bytes} bytes is too large for a scenario file (limit {} bytes)",
                limits::MAX_FILE_BYTES
            ));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
        Scenario::parse(&text, &shown)
    }

    /// Parses scenario JSON; `path` is only used in messages.
    pub fn parse(text: &str, path: &str) -> Result<Scenario, String> {
        // Sizes first: an oversized string or list is named before anything is built from it.
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            limits::check_sizes(&value).map_err(|e| format!("{path}: {e}"))?;
        }
        let de = &mut serde_json::Deserializer::from_str(text);
        let file: ScenarioFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            if field == "." || field.is_empty() {
                format!("{path}: {inner}")
            } else {
                format!("{path}: {field}: {inner}")
            }
        })?;
        file.validate(path).map_err(|e| format!("{path}: {e}"))
    }

    /// The masters a scheme row runs with: `redlock_masters` for the Redlock family (its
    /// default: `masters` when more than 1 — what Redlock used before that field — else 5),
    /// `masters` for the others.
    pub fn masters_for(&self, scheme: &SchemeSpec) -> u32 {
        masters_for(&self.topology, scheme)
    }

    /// This scenario as scheme row `index` runs it: its masters, the faults and nemesis
    /// validated for its nodes, and its expectations (`expect_by_scheme` merged over `expect`).
    pub fn for_scheme(&self, index: usize) -> Scenario {
        let mut row = self.clone();
        let masters = self.masters_for(&self.schemes[index]);
        if masters != self.topology.masters {
            let variant = &self.variants[&masters];
            row.topology.masters = masters;
            row.faults = variant.faults.clone();
            row.nemesis = variant.nemesis.clone();
        }
        (row.expect, row.expect_some) = self.expectations(index);
        row
    }

    /// The expectations of scheme row `index`: `expect` and `expect_some`, each overridden
    /// property by property by the row's `expect_by_scheme` / `expect_some_by_scheme`.
    pub fn expectations(&self, index: usize) -> (Expect, Expect) {
        let label = self.schemes[index].label();
        let merge = |base: &Expect, by: &BTreeMap<String, Expect>| match by.get(&label) {
            Some(own) => base.overridden_by(own),
            None => base.clone(),
        };
        (
            merge(&self.expect, &self.expect_by_scheme),
            merge(&self.expect_some, &self.expect_some_by_scheme),
        )
    }

    /// Whether any row expects anything.
    pub fn expects_anything(&self) -> bool {
        let none = Expect::default();
        self.expect != none
            || self.expect_some != none
            || !self.expect_by_scheme.is_empty()
            || !self.expect_some_by_scheme.is_empty()
    }

    /// Every node name of this scenario's topology, in creation order.
    pub fn node_names(&self) -> Vec<String> {
        node_names(&self.topology, &self.clients)
    }

    pub fn client_names(&self) -> Vec<String> {
        (1..=self.clients.count)
            .map(|i| format!("client-{i}"))
            .collect()
    }

    /// The lock owners the checkers judge: the client names, or with `clients.threads` > 1 one
    /// `client-N/tK` per worker thread.
    pub fn owner_names(&self) -> Vec<String> {
        let threads = self.clients.threads;
        self.client_names()
            .into_iter()
            .flat_map(|c| {
                (1..=threads)
                    .map(move |t| model::history::owner_name(&c, (threads > 1).then_some(t)))
            })
            .collect()
    }

    pub fn master_names(&self) -> Vec<String> {
        (1..=self.topology.masters)
            .map(|i| format!("redis-{i}"))
            .collect()
    }

    /// Whether runs of this scenario judge FIFO order (it expects a `fairness` verdict).
    pub fn judges_fairness(&self) -> bool {
        self.expect.fairness.is_some() || self.expect_some.fairness.is_some()
    }

    /// How much earlier a waiter must have started for an overtaking to count as a FIFO
    /// violation: four one-way latencies (a connection set-up plus the request), so requests the
    /// network may reorder are not judged.
    pub fn fifo_slack_ms(&self) -> u64 {
        4 * self.network.latency_ms.max
    }

    /// The replicas of master `redis-M`.
    pub fn replica_names(&self, master: &str) -> Vec<String> {
        (1..=self.topology.replicas)
            .map(|i| format!("{master}-replica-{i}"))
            .collect()
    }

    /// Every Redis node: masters, then each master's replicas.
    pub fn redis_names(&self) -> Vec<String> {
        let mut names = self.master_names();
        for master in self.master_names() {
            names.extend(self.replica_names(&master));
        }
        names
    }

    pub fn sentinel_names(&self) -> Vec<String> {
        (1..=self.topology.sentinels)
            .map(|i| format!("sentinel-{i}"))
            .collect()
    }

    /// When the random nemesis heals everything: its `heal_at_ms`, or two liveness windows
    /// before the end of the run, so that a lock-out after healing can last a whole window
    /// before the run ends and be seen (validated to be after the start).
    pub fn heal_at_ms(&self, scheme: &SchemeSpec) -> u64 {
        self.nemesis
            .as_ref()
            .and_then(|n| n.heal_at_ms)
            .unwrap_or_else(|| {
                self.duration_ms
                    .saturating_sub(2 * self.liveness_window_ms(scheme))
            })
    }

    /// The liveness window for a scheme: the scenario's `liveness_window_ms`, or
    /// 2 × max(lease, longest hold) + 1 s — long enough for a dead holder's lease to run out
    /// and for a live holder to finish, twice over. A lease-less scheme is judged as if its
    /// lease were [`LEASELESS_WINDOW_LEASE_MS`], never on a shorter window than a leased one.
    /// With `lease_ms`, a scheme without a lease is judged on that lease.
    pub fn liveness_window_ms(&self, scheme: &SchemeSpec) -> u64 {
        self.liveness_window_ms.unwrap_or_else(|| {
            let lease_ms = match (self.lease_ms, scheme.lease(), scheme.ttl_ms()) {
                (Some(lease_ms), Lease::None, _) => lease_ms,
                (_, _, 0) => LEASELESS_WINDOW_LEASE_MS,
                (_, _, ttl_ms) => ttl_ms,
            };
            2 * lease_ms.max(self.clients.hold_ms.max) + 1000
        })
    }
}

fn masters_for(topology: &Topology, scheme: &SchemeSpec) -> u32 {
    let redlock = scheme.info().is_some_and(|i| i.family == Family::Redlock);
    match (redlock, topology.redlock_masters) {
        (false, _) => topology.masters,
        (true, Some(n)) => n,
        (true, None) if topology.masters > 1 => topology.masters,
        (true, None) => 5,
    }
}

fn node_names(topology: &Topology, clients: &Clients) -> Vec<String> {
    let mut names: Vec<String> = (1..=topology.masters)
        .map(|i| format!("redis-{i}"))
        .collect();
    for m in 1..=topology.masters {
        names.extend((1..=topology.replicas).map(|r| format!("redis-{m}-replica-{r}")));
    }
    names.extend((1..=topology.sentinels).map(|i| format!("sentinel-{i}")));
    names.extend((1..=clients.count).map(|i| format!("client-{i}")));
    names.push("resource".into());
    names
}

impl ScenarioFile {
    fn validate(self, path: &str) -> Result<Scenario, String> {
        if self.name.trim().is_empty() {
            return Err("name: must not be empty".into());
        }
        if self.duration_ms == 0 {
            return Err("duration_ms: must be greater than 0".into());
        }

        let t = &self.topology;
        if t.masters == 0 {
            return Err("topology.masters: must be at least 1".into());
        }
        if t.masters > 64 {
            return Err("topology.masters: at most 64".into());
        }
        if let Some(n) = t.redlock_masters
            && !(1..=64).contains(&n)
        {
            return Err(format!(
                "topology.redlock_masters: must be from 1 to 64, got {n}"
            ));
        }
        if !["off", "no", "everysec", "always"].contains(&t.appendfsync.as_str()) {
            return Err(format!(
                "topology.appendfsync: \"{}\" is not one of off, no, everysec, always",
                t.appendfsync
            ));
        }
        if t.replicas > 16 {
            return Err("topology.replicas: at most 16 per master".into());
        }
        if t.sentinels > 15 {
            return Err("topology.sentinels: at most 15".into());
        }
        if t.sentinel_down_after_ms == 0 {
            return Err("topology.sentinel_down_after_ms: must be greater than 0".into());
        }
        if t.sentinel_failover_timeout_ms == 0 {
            return Err("topology.sentinel_failover_timeout_ms: must be greater than 0".into());
        }
        if t.min_replicas_max_lag_ms == 0 || !t.min_replicas_max_lag_ms.is_multiple_of(1000) {
            return Err(format!(
                "topology.min_replicas_max_lag_ms: Redis takes min-replicas-max-lag in whole seconds: give a positive multiple of 1000, got {}",
                t.min_replicas_max_lag_ms
            ));
        }
        if !(1..=limits::MAX_LUA_WORK).contains(&t.lua_time_limit_work) {
            return Err(format!(
                "topology.lua_time_limit_work: must be from 1 to {} (ten times the default), got {}",
                limits::MAX_LUA_WORK,
                t.lua_time_limit_work
            ));
        }
        if !(1..=limits::MAX_LUA_MEMORY_MB).contains(&t.lua_memory_limit_mb) {
            return Err(format!(
                "topology.lua_memory_limit_mb: must be from 1 to {}, got {}",
                limits::MAX_LUA_MEMORY_MB,
                t.lua_memory_limit_mb
            ));
        }
        if !["absolute", "relative"].contains(&t.ttl_propagation.as_str()) {
            return Err(format!(
                "topology.ttl_propagation: \"{}\" is not one of absolute (Redis 7.0), relative (Redis 6.2)",
                t.ttl_propagation
            ));
        }
        if t.min_replicas_to_write > t.replicas {
            return Err(format!(
                "topology.min_replicas_to_write: {} is more than the {} replicas per master: no write could ever succeed",
                t.min_replicas_to_write, t.replicas
            ));
        }
        let c = &self.clients;
        if c.count == 0 {
            return Err("clients.count: must be at least 1".into());
        }
        if c.count > 1000 {
            return Err("clients.count: at most 1000".into());
        }
        if c.command_timeout_ms == 0 {
            return Err("clients.command_timeout_ms: must be greater than 0".into());
        }
        if c.threads == 0 || c.threads > 64 {
            return Err(format!(
                "clients.threads: must be from 1 to 64, got {}",
                c.threads
            ));
        }
        if c.count * c.threads > limits::MAX_LOCK_OWNERS {
            return Err(format!(
                "clients.threads: {} clients × {} threads is {} lock owners (limit {})",
                c.count,
                c.threads,
                c.count * c.threads,
                limits::MAX_LOCK_OWNERS
            ));
        }
        if c.acquisitions > limits::MAX_ACQUISITIONS {
            return Err(format!(
                "clients.acquisitions: {} per worker (limit {}; the run also ends at duration_ms)",
                c.acquisitions,
                limits::MAX_ACQUISITIONS
            ));
        }
        if self.faults.len() > limits::MAX_FAULTS {
            return Err(format!(
                "faults: {} scripted faults (limit {}; a random nemesis draws many more)",
                self.faults.len(),
                limits::MAX_FAULTS
            ));
        }
        if let Some(Value::Array(list)) = &self.schemes
            && list.len() > limits::MAX_SCHEMES
        {
            return Err(format!(
                "schemes: {} schemes, each a run of its own (limit {})",
                list.len(),
                limits::MAX_SCHEMES
            ));
        }
        if self.lease_ms == Some(0) {
            return Err("lease_ms: must be greater than 0".into());
        }
        let (schemes, all_schemes) = self.scheme_rows()?;
        if let Some(extend) = c.extend {
            match (extend.every_ms, extend.before_write) {
                (Some(every_ms), _) if every_ms < limits::MIN_EXTEND_EVERY_MS => {
                    return Err(format!(
                        "clients.extend.every_ms: an extension every {every_ms} ms is too frequent (limit: at least {} ms)",
                        limits::MIN_EXTEND_EVERY_MS
                    ));
                }
                (Some(_), true) | (None, false) => {
                    return Err(
                        "clients.extend: give exactly one of every_ms (extend every N ms of the hold) and before_write: true"
                            .into(),
                    );
                }
                _ => {}
            }
            for (i, spec) in schemes.iter().enumerate() {
                let field = if self.schemes.is_some() {
                    format!("schemes[{i}]")
                } else {
                    "scheme".to_string()
                };
                if !spec.build(&field)?.can_extend() {
                    return Err(format!(
                        "clients.extend: {field} ({}) has no extend operation (schemes with one: redlock presets leandromoreira/redlock-rb and redsync, set-nx-px-lua presets redis-py with ttl_ms and redbeat@*)",
                        spec.label()
                    ));
                }
            }
        }
        if let Some(incident) = &self.incident {
            incident.validate()?;
        }
        let labels: Vec<String> = schemes.iter().map(SchemeSpec::label).collect();
        for (field, by) in [
            ("expect_by_scheme", &self.expect_by_scheme),
            ("expect_some_by_scheme", &self.expect_some_by_scheme),
        ] {
            if let Some(unknown) = by.keys().find(|l| !labels.contains(l)) {
                return Err(format!(
                    "{field}.{unknown}: no scheme row \"{unknown}\" in this scenario (its rows: {})",
                    labels.join(", ")
                ));
            }
        }
        let mut variants = BTreeMap::new();
        for masters in schemes
            .iter()
            .map(|s| masters_for(&self.topology, s))
            .chain([self.topology.masters])
        {
            if variants.contains_key(&masters) {
                continue;
            }
            let topology = Topology {
                masters,
                ..self.topology.clone()
            };
            let row = RowNodes {
                nodes: node_names(&topology, &self.clients).into_iter().collect(),
                masters: (1..=masters).map(|i| format!("redis-{i}")).collect(),
            };
            let variant = self.variant(&row).map_err(|e| {
                if masters == self.topology.masters {
                    e
                } else {
                    format!("{e} (for the Redlock rows, with {masters} masters)")
                }
            })?;
            variants.insert(masters, variant);
        }
        let Variant { faults, nemesis } = variants[&self.topology.masters].clone();
        let seeds = match &self.seeds {
            Some(text) => SeedRange::parse(text).map_err(|e| format!("seeds: {e}"))?,
            None => DEFAULT_SEEDS,
        };
        if self.liveness_window_ms == Some(0) {
            return Err("liveness_window_ms: must be greater than 0".into());
        }
        let scenario = Scenario {
            path: path.to_string(),
            name: self.name,
            description: self.description,
            source: self.source,
            seed: self.seed,
            seeds,
            duration_ms: self.duration_ms,
            topology: self.topology,
            network: self.network,
            schemes,
            all_schemes,
            lease_ms: self.lease_ms,
            clients: self.clients,
            resource: self.resource,
            faults,
            nemesis,
            expect: self.expect,
            expect_some: self.expect_some,
            expect_by_scheme: self.expect_by_scheme,
            expect_some_by_scheme: self.expect_some_by_scheme,
            liveness_window_ms: self.liveness_window_ms,
            incident: self.incident,
            matrix: self.matrix,
            variants,
        };
        scenario.validate_liveness_phase()?;
        Ok(scenario)
    }
}

impl ScenarioFile {
    /// The scheme rows: `scheme`, the `schemes` list, or `"schemes": "all"` (every row of
    /// `locksim schemes` but `script`), each with `lease_ms` applied. Also says whether it was
    /// "all".
    fn scheme_rows(&self) -> Result<(Vec<SchemeSpec>, bool), String> {
        let lease = |spec: SchemeSpec, field: &str| match self.lease_ms {
            Some(lease_ms) => spec.with_lease(lease_ms, field),
            None => Ok(spec),
        };
        let one = |v: &Value, field: &str| lease(SchemeSpec::from_json(v, field)?, field);
        match (&self.scheme, &self.schemes) {
            (Some(_), Some(_)) => Err("scheme and schemes: give one of them, not both".into()),
            (None, None) => Err(
                "scheme: missing (a scheme id such as \"set-nx-px-lua\", or `schemes`: a list or \"all\")"
                    .into(),
            ),
            (Some(v), None) => Ok((vec![one(v, "scheme")?], false)),
            (None, Some(Value::String(all))) if all == "all" => {
                let rows = matrix_rows()
                    .iter()
                    .map(|r| one(&r.spec_json(), &format!("schemes (\"all\": {})", r.label())))
                    .collect::<Result<_, _>>()?;
                Ok((rows, true))
            }
            (None, Some(Value::Array(list))) => {
                if list.is_empty() {
                    return Err("schemes: must list at least one scheme".into());
                }
                let rows = list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| one(v, &format!("schemes[{i}]")))
                    .collect::<Result<_, _>>()?;
                Ok((rows, false))
            }
            (None, Some(other)) => Err(format!(
                "schemes: expected a list of schemes or \"all\", got {other}"
            )),
        }
    }

    /// The faults and nemesis validated against one node set.
    fn variant(&self, row: &RowNodes) -> Result<Variant, String> {
        let faults = self
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| f.validate(&format!("faults[{i}]"), row))
            .collect::<Result<Vec<_>, _>>()?;
        let node_list: Vec<String> = row.nodes.iter().cloned().collect();
        let mut link_changes = 0;
        for (i, fault) in faults.iter().enumerate() {
            let left = (limits::MAX_LINK_CHANGES - link_changes) / 2;
            link_changes += 2 * fault.kind.count_links(&node_list, left);
            if link_changes > limits::MAX_LINK_CHANGES {
                return Err(format!(
                    "faults[{i}]: the partitions and isolations up to this one cut and heal more than {0} links (limit {0} link changes)",
                    limits::MAX_LINK_CHANGES
                ));
            }
        }
        let nemesis = match &self.nemesis {
            Some(value) => Some(NemesisSpec::from_json(value, &row.nodes, self.duration_ms)?),
            None => None,
        };
        Ok(Variant { faults, nemesis })
    }
}

impl Scenario {
    /// With a random nemesis, the run must go on for more than a liveness window after the
    /// nemesis heals, or a lock-out could never be judged `stuck`.
    fn validate_liveness_phase(&self) -> Result<(), String> {
        let Some(nemesis) = &self.nemesis else {
            return Ok(());
        };
        for scheme in &self.schemes {
            let window_ms = self.liveness_window_ms(scheme);
            let heal_at_ms = self.heal_at_ms(scheme);
            let after_ms = self.duration_ms - heal_at_ms.min(self.duration_ms);
            if nemesis.heal_at_ms.is_some() && after_ms <= window_ms {
                return Err(format!(
                    "nemesis.heal_at_ms: healing at {heal_at_ms} ms leaves {after_ms} ms of the {} ms run, not more than the liveness window ({window_ms} ms for {}): a lock-out after healing could never be seen; heal earlier, lengthen duration_ms or shorten liveness_window_ms",
                    self.duration_ms,
                    scheme.label()
                ));
            }
            if heal_at_ms == 0 {
                return Err(format!(
                    "duration_ms: {} ms leaves no time for random faults: the nemesis heals two liveness windows ({window_ms} ms each for {}) before the end; lengthen duration_ms, or set nemesis.heal_at_ms or liveness_window_ms",
                    self.duration_ms,
                    scheme.label()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faults::FaultKind;

    const MINIMAL: &str = r#"{ "name": "m", "scheme": "set-nx-px-lua" }"#;

    #[test]
    fn omitted_fields_take_their_defaults() {
        let s = Scenario::parse(MINIMAL, "m.json").unwrap();
        assert_eq!(s.topology.masters, 1);
        assert_eq!(s.clients.count, 2);
        assert_eq!(s.network.latency_ms, MsRange { min: 1, max: 5 });
        assert_eq!(s.seeds, DEFAULT_SEEDS);
        assert_eq!(
            s.node_names(),
            vec!["redis-1", "client-1", "client-2", "resource"]
        );
        assert_eq!(s.liveness_window_ms(&s.schemes[0]), 61_000);
        let leaseless =
            Scenario::parse(r#"{ "name": "m", "scheme": "setnx-del" }"#, "m.json").unwrap();
        assert_eq!(
            leaseless.liveness_window_ms(&leaseless.schemes[0]),
            21_000,
            "a lease-less scheme is judged as with a 10 s lease, not on 1 s"
        );
        let long_hold = Scenario::parse(
            r#"{ "name": "m", "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
                 "clients": { "hold_ms": [100, 5000] } }"#,
            "m.json",
        )
        .unwrap();
        assert_eq!(long_hold.liveness_window_ms(&long_hold.schemes[0]), 11_000);
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let err = Scenario::parse(
            r#"{ "name": "m", "scheme": "set-nx-px-lua", "clientz": {} }"#,
            "f.json",
        )
        .unwrap_err();
        assert!(err.starts_with("f.json: "), "{err}");
        assert!(err.contains("unknown field `clientz`"), "{err}");
        let err = Scenario::parse(
            r#"{ "name": "m", "scheme": "set-nx-px-lua", "clients": { "count": "two" } }"#,
            "f.json",
        )
        .unwrap_err();
        assert!(err.starts_with("f.json: clients.count: "), "{err}");
        let err = Scenario::parse(
            r#"{ "name": "m", "scheme": "set-nx-px-lua", "network": { "latency_ms": [5, 1] } }"#,
            "f.json",
        )
        .unwrap_err();
        assert!(
            err.contains("network.latency_ms") && err.contains("min is greater than max"),
            "{err}"
        );
        let err = Scenario::parse(r#"{ "name": "m", "scheme": "nope" }"#, "f.json").unwrap_err();
        assert!(
            err.starts_with("f.json: scheme.name: unknown scheme"),
            "{err}"
        );
        let err = Scenario::parse(
            r#"{ "name": "m", "scheme": "fencing", "seeds": "9..2" }"#,
            "f.json",
        )
        .unwrap_err();
        assert!(err.starts_with("f.json: seeds: "), "{err}");
        let err = Scenario::parse("{ not json", "f.json").unwrap_err();
        assert!(err.starts_with("f.json: "), "{err}");
    }

    /// Unbounded work is refused with the field and the limit (issue 17).
    #[test]
    fn work_beyond_the_limits_is_an_error_naming_the_field() {
        let err = |fields: &str| {
            Scenario::parse(
                &format!(r#"{{ "name": "m", "scheme": "set-nx-px-lua", {fields} }}"#),
                "f.json",
            )
            .unwrap_err()
        };
        assert_eq!(
            err(r#""duration_ms": 1000000000000000, "clients": { "acquisitions": 4294967295 }"#),
            "f.json: duration_ms: 1000000000000000 ms is longer than a run may be (limit 3600000 ms, one simulated hour)"
        );
        assert_eq!(
            err(r#""clients": { "acquisitions": 4294967295 }"#),
            "f.json: clients.acquisitions: 4294967295 per worker (limit 1000000; the run also ends at duration_ms)"
        );
        assert_eq!(
            err(r#""clients": { "count": 100, "threads": 64 }"#),
            "f.json: clients.threads: 100 clients × 64 threads is 6400 lock owners (limit 1000)"
        );
        assert!(
            err(r#""clients": { "hold_ms": [10, 1e300] }"#)
                .starts_with("f.json: clients.hold_ms[1]: ")
        );
        let faults = vec![r#"{ "kind": "pause", "node": "client-1", "at_ms": 1 }"#; 1001];
        assert_eq!(
            err(&format!(r#""faults": [{}]"#, faults.join(","))),
            "f.json: faults: 1001 scripted faults (limit 1000; a random nemesis draws many more)"
        );
        let clients: Vec<String> = (1..=1000).map(|i| format!("\"client-{i}\"")).collect();
        let split = format!(
            r#"{{ "kind": "partition", "groups": [[{}], [{}]], "at_ms": 1 }}"#,
            clients[..500].join(","),
            clients[500..].join(",")
        );
        assert_eq!(
            err(&format!(
                r#""clients": {{ "count": 1000 }}, "faults": [{split}, {split}, {split}]"#
            )),
            "f.json: faults[2]: the partitions and isolations up to this one cut and heal more than 2000000 links (limit 2000000 link changes)"
        );
        assert!(
            err(r#""clients": { "count": 1000 }, "duration_ms": 30000,
                   "nemesis": { "partition": { "every_ms": [1000, 2000], "duration_ms": 100 } }"#)
                .starts_with("f.json: nemesis.partition: up to 31 faults, each cutting and healing up to 1002001 links of its 1001 nodes")
        );
        let value = "x".repeat(50 << 20);
        let err = Scenario::parse(
            &format!(r#"{{ "name": "m", "scheme": {{ "name": "set", "value": "{value}" }} }}"#),
            "f.json",
        )
        .unwrap_err();
        assert_eq!(
            err,
            "f.json: scheme.value: a string of 52428800 bytes (limit 65536 bytes)"
        );
        let err = Scenario::parse(
            r#"{ "name": "m", "scheme": "fencing", "seeds": "0..18446744073709551615" }"#,
            "f.json",
        )
        .unwrap_err();
        assert!(
            err.starts_with("f.json: seeds: ") && err.ends_with("(limit 1000000 in one range)")
        );
        assert!(
            Scenario::parse(
                r#"{ "name": "m", "scheme": "set-nx-px-lua", "duration_ms": 3600000,
                     "clients": { "count": 1000, "acquisitions": 1000000 } }"#,
                "f.json"
            )
            .is_ok()
        );
    }

    #[test]
    fn replicas_and_sentinels_are_nodes() {
        let s = Scenario::parse(
            r#"{ "name": "m", "scheme": "fencing", "topology": { "replicas": 1, "sentinels": 3 } }"#,
            "f.json",
        )
        .unwrap();
        assert_eq!(
            s.node_names(),
            vec![
                "redis-1",
                "redis-1-replica-1",
                "sentinel-1",
                "sentinel-2",
                "sentinel-3",
                "client-1",
                "client-2",
                "resource"
            ]
        );
        let err = Scenario::parse(
            r#"{ "name": "m", "scheme": "fencing", "topology": { "min_replicas_to_write": 1 } }"#,
            "f.json",
        )
        .unwrap_err();
        assert!(err.contains("topology.min_replicas_to_write"), "{err}");
    }

    #[test]
    fn threads_name_one_owner_each() {
        let s = Scenario::parse(
            r#"{ "name": "m", "scheme": "reentrant", "clients": { "count": 2, "threads": 2 } }"#,
            "f.json",
        )
        .unwrap();
        assert_eq!(
            s.owner_names(),
            vec!["client-1/t1", "client-1/t2", "client-2/t1", "client-2/t2"]
        );
        assert_eq!(
            Scenario::parse(MINIMAL, "m.json").unwrap().owner_names(),
            vec!["client-1", "client-2"]
        );
        let err = Scenario::parse(
            r#"{ "name": "m", "scheme": "reentrant", "clients": { "threads": 0 } }"#,
            "f.json",
        )
        .unwrap_err();
        assert_eq!(err, "f.json: clients.threads: must be from 1 to 64, got 0");
    }

    /// `"schemes": "all"` runs every row of `locksim schemes` but `script`; `lease_ms` becomes
    /// the `ttl_ms` of every scheme with a lease, and the window of those without one; Redlock
    /// rows get their own masters, and the faults are validated for each node set.
    #[test]
    fn all_schemes_with_one_lease_and_redlock_masters() {
        let s = Scenario::parse(
            r#"{ "name": "a", "schemes": "all", "lease_ms": 2000,
                 "faults": [ { "kind": "partition", "at_ms": 0,
                               "groups": [["client-1", "{first_majority}"], ["client-2", "{last_majority}"]] },
                             { "kind": "crash", "node": "{holder_master}", "restart_after_ms": 1,
                               "on": { "event": "acquired" } } ],
                 "expect_by_scheme": { "redlock": { "mutual_exclusion": "violated" } } }"#,
            "a.json",
        )
        .unwrap();
        let labels: Vec<String> = s.schemes.iter().map(SchemeSpec::label).collect();
        assert_eq!(labels.len(), model::locks::matrix_rows().len());
        assert!(!labels.contains(&"script".to_string()));
        let row = |label: &str| labels.iter().position(|l| l == label).unwrap();
        assert_eq!(s.schemes[row("fencing")].ttl_ms(), 2000);
        assert_eq!(s.schemes[row("setex")].ttl_ms(), 2000);
        assert!(!s.schemes[row("setnx-del")].params.contains_key("ttl_ms"));
        assert_eq!(
            s.liveness_window_ms(&s.schemes[row("setnx-del")]),
            5000,
            "a lease-less row is judged on lease_ms"
        );
        let redlock = s.for_scheme(row("redlock:redsync"));
        assert_eq!(redlock.master_names().len(), 5);
        assert_eq!(
            s.for_scheme(row("set-nx-px-lua")).master_names(),
            ["redis-1"]
        );
        let FaultKind::Partition { groups, .. } = &redlock.faults[0].kind else {
            panic!("a partition");
        };
        assert_eq!(groups[1], ["client-2", "redis-3", "redis-4", "redis-5"]);
        let (expect, _) = s.expectations(row("redlock"));
        assert_eq!(
            expect.mutual_exclusion,
            Some(expect::SafetyExpect::Violated)
        );
        assert_eq!(s.expectations(row("fencing")).0, Expect::default());
    }

    #[test]
    fn matrix_fields_are_checked() {
        let err = |json: &str| Scenario::parse(json, "m.json").unwrap_err();
        assert!(
            err(r#"{ "name": "m", "schemes": "al" }"#)
                .starts_with("m.json: schemes: expected a list of schemes or \"all\""),
        );
        assert!(
            err(r#"{ "name": "m", "schemes": "all", "lease_ms": 1500 }"#).starts_with(
                "m.json: lease_ms: 1500 ms is not a whole number of seconds, which setex needs"
            )
        );
        let unknown = err(
            r#"{ "name": "m", "schemes": "all", "expect_by_scheme": { "redlok": { "liveness": "ok" } } }"#,
        );
        assert!(
            unknown.starts_with("m.json: expect_by_scheme.redlok: no scheme row \"redlok\""),
            "{unknown}"
        );
        let redis_4 = err(r#"{ "name": "m", "schemes": ["set-nx-px-lua", "redlock"],
                 "faults": [ { "kind": "pause", "node": "redis-4", "at_ms": 1, "duration_ms": 5 } ] }"#);
        assert!(
            redis_4.starts_with("m.json: faults[0].node: no node \"redis-4\""),
            "{redis_4}"
        );
        let masters = |json: &str| {
            let s = Scenario::parse(json, "m.json").unwrap();
            s.masters_for(&s.schemes[0])
        };
        assert_eq!(masters(r#"{ "name": "m", "scheme": "redlock" }"#), 5);
        assert_eq!(
            masters(r#"{ "name": "m", "scheme": "redlock", "topology": { "masters": 3 } }"#),
            3,
            "as before redlock_masters existed"
        );
        assert_eq!(
            masters(
                r#"{ "name": "m", "scheme": "redlock", "topology": { "masters": 3, "redlock_masters": 7 } }"#
            ),
            7
        );
    }

    /// The nemesis heals two liveness windows before the end by default, so that a lock-out
    /// after healing can be seen; a heal time that leaves no whole window is an error.
    #[test]
    fn a_random_nemesis_leaves_room_to_judge_liveness() {
        let with = |extra: &str| {
            Scenario::parse(
                &format!(
                    r#"{{ "name": "n", "duration_ms": 20000,
                          "scheme": {{ "name": "setnx-expire", "ttl_ms": 2000 }},
                          "nemesis": {{ "crash": {{ "every_ms": [1000, 2000], "duration_ms": [0, 500] }} {extra} }} }}"#
                ),
                "n.json",
            )
        };
        let s = with("").unwrap();
        assert_eq!(s.liveness_window_ms(&s.schemes[0]), 5000);
        assert_eq!(s.heal_at_ms(&s.schemes[0]), 10_000);
        assert!(with(r#", "heal_at_ms": 14999"#).is_ok());
        let err = with(r#", "heal_at_ms": 15000"#).unwrap_err();
        assert!(
            err.starts_with("n.json: nemesis.heal_at_ms: healing at 15000 ms leaves 5000 ms"),
            "{err}"
        );
        let short = Scenario::parse(
            r#"{ "name": "n", "duration_ms": 10000, "scheme": { "name": "setnx-expire", "ttl_ms": 2000 },
                 "nemesis": { "crash": { "every_ms": [1000, 2000], "duration_ms": [0, 500] } } }"#,
            "n.json",
        )
        .unwrap_err();
        assert!(
            short.starts_with("n.json: duration_ms: 10000 ms leaves no time for random faults"),
            "{short}"
        );
    }

    #[test]
    fn extensions_incidents_and_topology_options_are_validated() {
        let parse = |json: &str| Scenario::parse(json, "x.json");
        let err = parse(
            r#"{ "name": "m", "scheme": "set-nx-px-lua", "clients": { "extend": { "before_write": true } } }"#,
        )
        .unwrap_err();
        assert!(
            err.contains("clients.extend: scheme (set-nx-px-lua) has no extend operation"),
            "{err}"
        );
        let err = parse(
            r#"{ "name": "m", "scheme": "redlock", "clients": { "extend": { "every_ms": 100, "before_write": true } } }"#,
        )
        .unwrap_err();
        assert!(err.contains("clients.extend: give exactly one of"), "{err}");
        let ok = parse(
            r#"{ "name": "m", "schemes": ["redlock", { "name": "redlock", "preset": "redsync@4.0.3" }],
                 "clients": { "extend": { "every_ms": 100 } } }"#,
        )
        .unwrap();
        assert_eq!(ok.clients.extend.and_then(|e| e.every_ms), Some(100));
        let err = parse(
            r#"{ "name": "m", "scheme": "redlock", "topology": { "ttl_propagation": "6.2" } }"#,
        )
        .unwrap_err();
        assert!(err.contains("topology.ttl_propagation"), "{err}");
        let err = parse(
            r#"{ "name": "m", "scheme": "redlock", "topology": { "min_replicas_max_lag_ms": 1500 } }"#,
        )
        .unwrap_err();
        assert!(err.contains("topology.min_replicas_max_lag_ms"), "{err}");
        for (topology, field) in [
            (
                r#"{ "lua_time_limit_work": 0 }"#,
                "topology.lua_time_limit_work",
            ),
            (
                r#"{ "lua_memory_limit_mb": 0 }"#,
                "topology.lua_memory_limit_mb",
            ),
        ] {
            let json = format!(r#"{{ "name": "m", "scheme": "redlock", "topology": {topology} }}"#);
            let err = parse(&json).unwrap_err();
            assert!(err.contains(field), "{err}");
        }
        let err = parse(
            r#"{ "name": "m", "scheme": "redlock", "incident": { "case": "c", "library": "l",
                 "version": "1", "role": "broken", "link": "https://x", "mechanism": "m" } }"#,
        )
        .unwrap_err();
        assert!(err.contains("incident.role"), "{err}");
    }
}
