//! Scenario files (DESIGN.md "Scenario file (contract)"): loading, defaults and validation.
//!
//! Every field of the contract is known here. Omitted fields take the defaults documented on
//! each struct; unknown fields and bad values are errors that name the file and the field —
//! never a panic.

pub mod expect;
pub mod faults;
pub mod json;
pub mod limits;
pub mod nemesis;
pub mod range;
pub mod schema;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use model::locks::{Family, Lease, SchemeSpec, matrix_rows};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use expect::{Expect, Unasserted};
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
    /// `faults_in_sequence`: the `at_ms` faults start from one task, one after another, so a
    /// fault changes nothing before its time (`faults::schedule::scripted_nemesis`).
    pub faults_in_sequence: bool,
    /// Random faults drawn from the seed (`nemesis`).
    pub nemesis: Option<NemesisSpec>,
    pub expect: Expect,
    pub expect_some: Expect,
    /// Per scheme row (by label): expectations merged over `expect` / `expect_some`.
    pub expect_by_scheme: BTreeMap<String, Expect>,
    pub expect_some_by_scheme: BTreeMap<String, Expect>,
    /// Per scheme row (by label): properties neither `expect` nor `expect_some` asserts on it,
    /// each with why.
    pub unasserted_by_scheme: BTreeMap<String, Unasserted>,
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
    /// Start the `at_ms` faults from one task in time order, rather than one waiting task each
    /// from the start: a fault then changes nothing of the run before its time, so two
    /// schedules with the same faults up to t give the same trace up to t (`locksim hunt`
    /// writes it; its prefix branches rely on it).
    #[serde(default)]
    faults_in_sequence: bool,
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
    /// Per scheme row: properties deliberately not asserted on that row, each with the reason
    /// (`{ "mutual_exclusion": "violated on ~10 % of seeds, none of 0..19" }`). `check`
    /// judges none of them there, even one `expect` names; `check --record` keeps them out of
    /// what it writes.
    #[serde(default)]
    unasserted_by_scheme: BTreeMap<String, Unasserted>,
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
        let text = limits::read_file(path).map_err(|e| format!("{shown}: {e}"))?;
        Scenario::parse(&text, &shown)
    }

    /// Parses scenario JSON; `path` is only used in messages.
    pub fn parse(text: &str, path: &str) -> Result<Scenario, String> {
        // The whole text first: one value, no key twice, within the size limits, before
        // anything is built from it.
        let value = json::parse_strict(text).map_err(|e| format!("{path}: {e}"))?;
        limits::check_sizes(&value).map_err(|e| format!("{path}: {e}"))?;
        let de = &mut serde_json::Deserializer::from_str(text);
        let file: ScenarioFile = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            if field == "." || field.is_empty() {
                format!("{path}: {inner}")
            } else {
                format!("{path}: {field}: {inner}")
            }
        })?;
        de.end().map_err(|e| format!("{path}: {e}"))?;
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
    /// property by property by the row's `expect_by_scheme` / `expect_some_by_scheme`, and
    /// without the properties its `unasserted_by_scheme` names.
    pub fn expectations(&self, index: usize) -> (Expect, Expect) {
        let label = self.schemes[index].label();
        let unasserted = self.unasserted(index);
        let merge = |base: &Expect, by: &BTreeMap<String, Expect>| {
            let merged = match by.get(&label) {
                Some(own) => base.overridden_by(own),
                None => base.clone(),
            };
            unasserted.removed_from(&merged)
        };
        (
            merge(&self.expect, &self.expect_by_scheme),
            merge(&self.expect_some, &self.expect_some_by_scheme),
        )
    }

    /// The properties scheme row `index` leaves unasserted (`unasserted_by_scheme`).
    pub fn unasserted(&self, index: usize) -> Unasserted {
        self.unasserted_by_scheme
            .get(&self.schemes[index].label())
            .cloned()
            .unwrap_or_default()
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

#[cfg(test)]
mod tests;
