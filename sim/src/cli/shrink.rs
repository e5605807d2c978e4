//! `locksim shrink FILE --seed N [--scheme ID]`: from a failing seed to a minimal scripted
//! regression test.
//!
//! 1. Run the seed: the verdicts it breaks are the target.
//! 2. Write the faults the random nemesis injected (`RunOutput::nemesis_faults`) as scripted
//!    faults at their `at_ms`, each cut short where the nemesis healed everything
//!    (`heal_at_ms`), and remove the nemesis. The faults land on the same instants, but the
//!    trace is not the same: madsim draws from the seed's one random stream at every task
//!    step (which ready task runs, 50–100 ns of time), and the nemesis's own tasks are gone,
//!    so every later draw, message latency and interleaving differs from the first step on
//!    (`exact_trace` says whether it happened to be the same). Verdicts that need a fault to
//!    land within a few microseconds of a command (a crash between SETNX and EXPIRE) may then
//!    not break on the same seed: the replay tries the following seeds too (up to
//!    [`REPLAY_SEEDS`]) and the shrunk scenario runs the first seed that breaks the target.
//! 3. Delta debugging (Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing
//!    Input", IEEE TSE 2002): `ddmin` over the faults; then each fault's numbers (duration,
//!    restart delay, clock delta, extra delay, trigger delay: the smallest that still fails,
//!    by bisection; `at_ms` moved to a round instant), after moving the whole schedule as
//!    early as it still fails; then `clients.count`,
//!    `clients.acquisitions` and `duration_ms`; then `ddmin` once more. Each step is one run
//!    and exact (determinism); at most `--max-runs` runs in all.
//! 4. Write the scenario: the one scheme and seed, `expect` = every verdict of the final run,
//!    `source` naming the original file, seed and fault counts.
//!
//! `--live` shrinks a live failure (`locksim live`, [`Mode::Live`]): every run is a live run,
//! not replayable, so each candidate runs up to `--repeats` K times and still fails if any of
//! them breaks the target (the first that does ends its runs); the original is the first of K
//! runs that breaks a verdict, and only its seed is tried. A candidate that fails once in K
//! runs may be kept where a rarer failure was: the result is a smaller scenario that failed at
//! least once, to be run with `locksim live --repeat N` for its rate.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use model::result::RunResult;
use serde_json::{Map, Value, json};

use crate::cli::artifacts::{path_component, shell_quote, write_file};
use crate::cli::catalog::{scheme_spec_json, select_one_scheme};
use crate::faults::nemesis::as_scripted;
use crate::runner::{RunOutput, run};
use crate::scenario::Scenario;
use crate::scenario::expect::{Expect, broken_verdicts};
use crate::scenario::faults::FaultSpec;
use crate::scenario::json::parse_strict;
use crate::scenario::limits::read_file;

#[derive(clap::Args)]
pub struct Args {
    /// The scenario file (JSON).
    file: PathBuf,
    /// The failing seed (with --live: the world's seed, by default the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// The scheme, for a scenario with a `schemes` list.
    #[arg(long)]
    scheme: Option<String>,
    /// Where the shrunk scenario goes (default: shrunk/<name>.json).
    #[arg(long)]
    out: Option<PathBuf>,
    /// At most this many runs (with --live, each repeat is a run).
    #[arg(long, default_value_t = DEFAULT_MAX_RUNS)]
    max_runs: u64,
    /// Shrink a live failure (`locksim live`): every candidate runs on the real clock with
    /// real client processes, up to --repeats times; it still fails if any repeat breaks the
    /// target verdicts.
    #[arg(long)]
    live: bool,
    /// With --live: the repeats per candidate.
    #[arg(long, default_value_t = 3, requires = "live")]
    repeats: u32,
    /// With --live: as `locksim live --op-timeout-ms`.
    #[arg(long, default_value_t = 10_000, requires = "live")]
    op_timeout_ms: u64,
    /// With --live: as `locksim live --grace-ms`.
    #[arg(long, default_value_t = 1_000, requires = "live")]
    grace_ms: u64,
    /// With --live: as `locksim live --observe`.
    #[arg(long, requires = "live")]
    observe: bool,
    /// With --live: the client command (after `--`); without it, the built-in scheme.
    #[arg(last = true, requires = "live")]
    command: Vec<std::ffi::OsString>,
}

/// How candidates run: the simulation (one exact run each), or live (`--live`).
pub enum Mode {
    Simulated,
    Live(LiveRuns),
}

/// `--live`: each candidate runs up to `repeats` times on the real clock; the first repeat
/// that breaks the target ends its runs (it still fails), and if none does it no longer fails.
pub struct LiveRuns {
    pub repeats: u32,
    pub command: Option<crate::live::clients::ClientCommand>,
    pub op_timeout_ms: u64,
    pub grace: std::time::Duration,
    pub observe: bool,
    /// Where each candidate's file and the runs' logs go (the built-in scheme's client process
    /// reads the candidate from its file).
    pub work_dir: PathBuf,
}

impl LiveRuns {
    /// One live run of `scenario` (a file on disk) on a thread of its own.
    fn run_once(
        &self,
        scenario: &Arc<Scenario>,
        scheme: usize,
        seed: u64,
    ) -> Result<RunOutput, String> {
        let options = crate::live::Options {
            scenario: scenario.clone(),
            scheme_index: scheme,
            seed,
            command: self.command.clone(),
            log_dir: self.work_dir.join("logs"),
            op_timeout_ms: self.op_timeout_ms,
            grace: self.grace,
            observe: self.observe,
            // Shrinking runs on the model's servers: candidates need no real processes.
            servers: None,
        };
        let _ = std::fs::remove_dir_all(self.work_dir.join("logs"));
        std::thread::spawn(move || crate::live::run(options))
            .join()
            .unwrap_or_else(|_| Err("the live run panicked".into()))
            .map(|output| output.run)
    }
}

/// Seeds the scripted replay of the recorded faults tries, from the original one on.
pub const REPLAY_SEEDS: u64 = 20;

/// Runs `shrink` may spend by default: a few hundred suffice for the catalog's nemeses.
pub const DEFAULT_MAX_RUNS: u64 = 1000;

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let scenario = super::load(&args.file)?;
    let seed = match (args.seed, args.live) {
        (Some(seed), _) => seed,
        (None, true) => scenario.seed,
        (None, false) => return Err("--seed: give the failing seed".into()),
    };
    let scheme = select_one_scheme(&scenario, &args.file, args.scheme.as_deref(), "shrink")?;
    let mode = if args.live {
        crate::live::process::install_stop_signals();
        Mode::Live(LiveRuns {
            repeats: args.repeats.max(1),
            command: args.command.split_first().map(|(program, rest)| {
                crate::live::clients::ClientCommand {
                    program: program.clone(),
                    args: rest.to_vec(),
                }
            }),
            op_timeout_ms: args.op_timeout_ms,
            grace: std::time::Duration::from_millis(args.grace_ms),
            observe: args.observe,
            work_dir: std::env::temp_dir().join(format!(
                "locksim-shrink-live-{}-{}",
                std::process::id(),
                crate::live::pacer::real_unix_us()
            )),
        })
    } else {
        Mode::Simulated
    };
    let shrunk = shrink_in(&mode, &scenario, scheme, seed, args.out, args.max_runs)?;
    print!("{}", shrunk.render());
    Ok(ExitCode::SUCCESS)
}

/// What `shrink` did.
pub struct Shrunk {
    /// The file written.
    pub out: PathBuf,
    pub name: String,
    pub original: String,
    pub scheme: String,
    pub seed: u64,
    /// The verdicts the original run broke and the shrunk scenario still breaks.
    pub target: Vec<&'static str>,
    pub scripted_before: usize,
    pub nemesis_before: usize,
    pub faults_after: usize,
    /// The seed the shrunk scenario runs: the first from `seed` on whose scripted replay of
    /// every recorded fault breaks the target.
    pub replay_seed: u64,
    /// Whether that replay gave the original trace hash.
    pub exact_trace: bool,
    /// (field, before, after) of the workload and run length.
    pub sizes: Vec<(&'static str, u64, u64)>,
    pub runs: u64,
    /// The run budget ran out before every step was tried.
    pub budget_spent: bool,
    /// `--live`: the repeats per candidate.
    pub live_repeats: Option<u32>,
    pub wall_s: f64,
}

impl Shrunk {
    pub fn render(&self) -> String {
        let mut text = format!(
            "shrink {} seed {} ({}): breaks {}\n  faults: {} scripted + {} from the random nemesis = {} → {}\n",
            self.original,
            self.seed,
            self.scheme,
            self.target.join(", "),
            self.scripted_before,
            self.nemesis_before,
            self.scripted_before + self.nemesis_before,
            self.faults_after
        );
        let sizes: Vec<String> = self
            .sizes
            .iter()
            .map(|(field, a, b)| format!("{field} {a} → {b}"))
            .collect();
        text.push_str(&format!("  {}\n", sizes.join(", ")));
        match self.live_repeats {
            Some(repeats) => text.push_str(&format!(
                "  live: every candidate ran up to {repeats} times on the real clock and still failed if any run broke {} (live runs are not replayable: run the result with `locksim live --repeat N`)\n",
                self.target.join(", ")
            )),
            None => text.push_str(&format!(
                "  the recorded faults, replayed as scripted faults, break the same verdicts on seed {} ({})\n",
                self.replay_seed,
                if self.exact_trace {
                    "the same trace"
                } else {
                    "not the same trace: madsim's scheduling draws differ without the nemesis's tasks"
                }
            )),
        }
        text.push_str(&format!(
            "  {} runs, {:.1} s{}\n",
            self.runs,
            self.wall_s,
            if self.budget_spent {
                " (the run budget ran out: --max-runs for more)"
            } else {
                ""
            }
        ));
        let out = shell_quote(&self.out.display().to_string());
        let check = match self.live_repeats {
            Some(_) => format!("live {out} --repeat 10 -- CMD..."),
            None => format!("check {out}"),
        };
        text.push_str(&format!(
            "wrote {out} ({})\n  check it: {}\n",
            self.name,
            crate::cli::invocation::command(&check)
        ));
        text
    }
}

/// Shrinks `seed` of `scenario` with scheme `scheme` and writes the result to `out` (default
/// `shrunk/<name>.json`).
pub fn shrink(
    scenario: &Arc<Scenario>,
    scheme: usize,
    seed: u64,
    out: Option<PathBuf>,
    max_runs: u64,
) -> Result<Shrunk, String> {
    shrink_in(&Mode::Simulated, scenario, scheme, seed, out, max_runs)
}

/// [`shrink`] with candidates run as `mode` says.
pub fn shrink_in(
    mode: &Mode,
    scenario: &Arc<Scenario>,
    scheme: usize,
    seed: u64,
    out: Option<PathBuf>,
    max_runs: u64,
) -> Result<Shrunk, String> {
    let start = std::time::Instant::now();
    let label = scenario.schemes[scheme].label();
    let judges_fairness = scenario.for_scheme(scheme).judges_fairness();
    let original = match mode {
        Mode::Simulated => run(scenario, scheme, seed)?,
        // The first repeat that breaks a verdict is the failure to shrink.
        Mode::Live(live) => {
            let mut first = None;
            for _ in 0..live.repeats {
                let output = live.run_once(scenario, scheme, seed)?;
                let broke = !broken_verdicts(&output.result, judges_fairness).is_empty();
                if broke || first.is_none() {
                    first = Some(output);
                }
                if broke {
                    break;
                }
            }
            first.expect("at least one repeat")
        }
    };
    let target = broken_verdicts(&original.result, judges_fairness);
    if target.is_empty() {
        return Err(format!(
            "{} seed {seed} ({label}): nothing to shrink, every verdict holds{}",
            scenario.path,
            match mode {
                Mode::Live(live) => format!(" in each of {} live runs", live.repeats),
                Mode::Simulated => String::new(),
            }
        ));
    }
    let name = if scenario.schemes.len() > 1 {
        format!(
            "{}-{}-seed{seed}-shrunk",
            scenario.name,
            path_component(&label)
        )
    } else {
        format!("{}-seed{seed}-shrunk", scenario.name)
    };
    // The name is the file's own text: as a path it could climb out of `shrunk/` (`../x`) or
    // be absolute; `sweep` and `replay` make their folders of it the same way.
    let out =
        out.unwrap_or_else(|| Path::new("shrunk").join(format!("{}.json", path_component(&name))));
    let file = read_object(&scenario.path)?;
    let scripted: Vec<Value> = match file.get("faults") {
        Some(Value::Array(faults)) => faults.clone(),
        _ => Vec::new(),
    };
    let mut base = row_file(file, scenario, scheme);
    let heal_at_ms = scenario.heal_at_ms(&scenario.schemes[scheme]);
    let recorded: Vec<Value> = original
        .nemesis_faults
        .iter()
        .map(|f| {
            serde_json::to_value(FaultSpec::from(&as_scripted(f, heal_at_ms)))
                .expect("faults serialise")
        })
        .collect();
    if judges_fairness {
        // Only so that candidates judge FIFO order; the written `expect` replaces it.
        base.insert("expect".into(), json!({ "fairness": "holds" }));
    }
    let mut probe = Probe {
        mode,
        path: out.display().to_string(),
        seed,
        target: target.clone(),
        judges_fairness,
        runs: 1,
        max_runs,
    };
    let mut all = Candidate {
        base,
        faults: scripted.iter().chain(&recorded).cloned().collect(),
    };
    // The same seed first; failing that, the next ones (see the module doc).
    let mut exact_trace = false;
    let mut found = false;
    // Live runs are not replayable: their one seed, repeated.
    let replay_seeds = match mode {
        Mode::Simulated => REPLAY_SEEDS,
        Mode::Live(_) => 1,
    };
    for replay_seed in seed..seed.saturating_add(replay_seeds) {
        all.base.insert("seed".into(), json!(replay_seed));
        all.base.insert(
            "seeds".into(),
            json!(format!("{replay_seed}..{replay_seed}")),
        );
        probe.seed = replay_seed;
        let Some(replay) = probe.run(&all) else {
            break;
        };
        exact_trace = replay.result.trace_hash == original.result.trace_hash;
        if probe.breaks_target(&replay.result) {
            found = true;
            break;
        }
    }
    if !found {
        return Err(format!(
            "{} seed {seed} ({label}): the {} faults the nemesis injected, replayed as scripted faults, break {} on none of seeds {seed}..{}: cannot shrink this seed",
            scenario.path,
            recorded.len(),
            target.join(", "),
            probe.seed
        ));
    }
    let sizes_before = sizes(&all);
    let mut best = probe.ddmin(all);
    best = probe.shift_earlier(best);
    for i in 0..best.faults.len() {
        best = probe.shrink_fault(best, i);
    }
    for (pointer, min) in [
        ("/clients/count", 1),
        ("/clients/acquisitions", 1),
        ("/duration_ms", 1),
    ] {
        best = probe.shrink_number(best, pointer, min);
    }
    best = probe.ddmin(best);
    let budget_spent = probe.runs >= probe.max_runs;
    let last = match mode {
        Mode::Simulated => {
            let last_scenario = Scenario::parse(&best.file().to_string(), &probe.path)?;
            run(&Arc::new(last_scenario), 0, probe.seed)?
        }
        Mode::Live(live) => {
            // The expectations come from one more run of the result, past the budget.
            probe.max_runs = probe.runs + u64::from(live.repeats);
            probe.run(&best)
        }
        .ok_or_else(|| {
            format!(
                "{} seed {seed} ({label}): the shrunk scenario could not be run once more (a live run failed)",
                scenario.path
            )
        })?,
    };
    let sizes_after = sizes(&best);
    let faults_after = best.faults.len();
    let mut written = best.file();
    let Value::Object(map) = &mut written else {
        unreachable!("candidates are objects")
    };
    map.insert("name".into(), json!(name));
    map.insert(
        "description".into(),
        json!(format!(
            "What the random nemesis of {} did on seed {seed}, shrunk by `locksim shrink` to the {faults_after} scripted fault(s) that still break {}. The original: {}",
            scenario.name,
            target.join(", "),
            scenario.description
        )),
    );
    map.insert(
        "source".into(),
        json!(format!(
            "locksim shrink {} --seed {seed}{}: {} faults ({} scripted, {} from the random nemesis) → {faults_after}, replayed on seed {}; original source: {}",
            scenario.path,
            if scenario.schemes.len() > 1 {
                format!(" --scheme {label}")
            } else {
                String::new()
            },
            scripted.len() + recorded.len(),
            scripted.len(),
            recorded.len(),
            probe.seed,
            scenario.source
        )),
    );
    map.insert(
        "expect".into(),
        serde_json::to_value(Expect::of_run(
            &last.result,
            judges_fairness,
            scenario.clients.extend.is_some(),
        ))
        .expect("expectations serialise"),
    );
    if let Some(Value::String(schema)) = map.get("$schema") {
        let from = Path::new(&scenario.path).parent().unwrap_or(Path::new(""));
        let to = out.parent().unwrap_or(Path::new(""));
        let rebased = rebase(schema, from, to);
        map.insert("$schema".into(), json!(rebased));
    }
    write_file(&out, ordered_json(&written) + "\n")?;
    Ok(Shrunk {
        out,
        name,
        original: scenario.name.clone(),
        scheme: label,
        seed,
        target,
        scripted_before: scripted.len(),
        nemesis_before: recorded.len(),
        faults_after,
        replay_seed: probe.seed,
        exact_trace,
        sizes: sizes_before
            .into_iter()
            .zip(sizes_after)
            .map(|((field, a), (_, b))| (field, a, b))
            .collect(),
        runs: probe.runs,
        budget_spent,
        wall_s: start.elapsed().as_secs_f64(),
        live_repeats: match mode {
            Mode::Live(live) => Some(live.repeats),
            Mode::Simulated => None,
        },
    })
}

/// The scenario file `file` as one scheme row, judged by its own run: its nemesis, faults and
/// every expectation removed (other rows' too), and no matrix column or incident (a file
/// written from it is neither).
pub fn row_file(
    mut file: Map<String, Value>,
    scenario: &Scenario,
    scheme: usize,
) -> Map<String, Value> {
    for field in [
        "nemesis",
        "schemes",
        "expect",
        "expect_some",
        "expect_by_scheme",
        "expect_some_by_scheme",
        "unasserted_by_scheme",
        "faults",
        "matrix",
        "incident",
    ] {
        file.remove(field);
    }
    file.insert("scheme".into(), scheme_spec_json(scenario, scheme));
    file
}

pub fn read_object(path: &str) -> Result<Map<String, Value>, String> {
    let text = read_file(Path::new(path)).map_err(|e| format!("{path}: {e}"))?;
    match parse_strict(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("{path}: expected a JSON object")),
        Err(e) => Err(format!("{path}: {e}")),
    }
}

/// A scenario file being shrunk: everything but the faults, and the faults as written.
#[derive(Clone)]
struct Candidate {
    base: Map<String, Value>,
    faults: Vec<Value>,
}

impl Candidate {
    fn file(&self) -> Value {
        let mut map = self.base.clone();
        map.insert("faults".into(), Value::Array(self.faults.clone()));
        Value::Object(map)
    }

    fn with_faults(&self, faults: Vec<Value>) -> Candidate {
        Candidate {
            base: self.base.clone(),
            faults,
        }
    }
}

/// The workload and run length, as the file says or by their defaults.
fn sizes(candidate: &Candidate) -> Vec<(&'static str, u64)> {
    let file = candidate.file();
    let scenario = Scenario::parse(&file.to_string(), "candidate").expect("validated earlier");
    vec![
        ("clients", scenario.clients.count as u64),
        ("acquisitions", scenario.clients.acquisitions as u64),
        ("duration_ms", scenario.duration_ms),
    ]
}

/// Runs candidates and says whether they still break the target; counts the runs.
struct Probe<'a> {
    mode: &'a Mode,
    /// Where the result will be written (messages and replay commands name it).
    path: String,
    seed: u64,
    target: Vec<&'static str>,
    judges_fairness: bool,
    runs: u64,
    max_runs: u64,
}

impl Probe<'_> {
    /// One run of the candidate, unless it is not a valid scenario or the budget is spent.
    fn run(&mut self, candidate: &Candidate) -> Option<RunOutput> {
        if self.runs >= self.max_runs {
            return None;
        }
        let text = candidate.file().to_string();
        let live = match self.mode {
            Mode::Simulated => {
                let scenario = Scenario::parse(&text, &self.path).ok()?;
                self.runs += 1;
                return run(&Arc::new(scenario), 0, self.seed).ok();
            }
            Mode::Live(live) => live,
        };
        // The built-in scheme's client process reads the scenario from its file.
        let file = live.work_dir.join("candidate.json");
        std::fs::create_dir_all(&live.work_dir).ok()?;
        std::fs::write(&file, &text).ok()?;
        let scenario = Arc::new(Scenario::parse(&text, &file.display().to_string()).ok()?);
        let mut last = None;
        for _ in 0..live.repeats {
            if self.runs >= self.max_runs || crate::live::process::stop_requested() {
                break;
            }
            self.runs += 1;
            let output = live.run_once(&scenario, 0, self.seed).ok()?;
            let broke = self.breaks_target(&output.result);
            last = Some(output);
            if broke {
                break;
            }
        }
        last
    }

    fn breaks_target(&self, result: &RunResult) -> bool {
        let broken = broken_verdicts(result, self.judges_fairness);
        self.target.iter().all(|t| broken.contains(t))
    }

    fn fails(&mut self, candidate: &Candidate) -> bool {
        self.run(candidate)
            .is_some_and(|o| self.breaks_target(&o.result))
    }

    /// Zeller's ddmin over the faults: a subset, or the complement of one, that still fails
    /// replaces the set; the granularity doubles when none does.
    fn ddmin(&mut self, candidate: Candidate) -> Candidate {
        if candidate.faults.is_empty() {
            return candidate;
        }
        let none = candidate.with_faults(Vec::new());
        if self.fails(&none) {
            return none;
        }
        let mut items = candidate.faults.clone();
        let mut n = 2;
        while items.len() >= 2 {
            let size = items.len().div_ceil(n);
            let chunks: Vec<Vec<Value>> = items.chunks(size).map(<[Value]>::to_vec).collect();
            let mut next = None;
            for chunk in &chunks {
                if self.fails(&candidate.with_faults(chunk.clone())) {
                    next = Some((chunk.clone(), 2));
                    break;
                }
            }
            if next.is_none() && chunks.len() > 2 {
                for skip in 0..chunks.len() {
                    let rest: Vec<Value> = chunks
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != skip)
                        .flat_map(|(_, c)| c.iter().cloned())
                        .collect();
                    if self.fails(&candidate.with_faults(rest.clone())) {
                        next = Some((rest, (n - 1).max(2)));
                        break;
                    }
                }
            }
            match next {
                Some((kept, granularity)) => {
                    items = kept;
                    n = granularity;
                }
                None if n >= items.len() => break,
                None => n = (2 * n).min(items.len()),
            }
            if self.runs >= self.max_runs {
                break;
            }
        }
        candidate.with_faults(items)
    }

    /// Shrinks fault `index`'s numbers: each duration or delay to the smallest value that
    /// still fails, a clock delta toward 0 (its sign kept), its time to a round instant.
    fn shrink_fault(&mut self, mut best: Candidate, index: usize) -> Candidate {
        for (field, min) in [
            ("duration_ms", 1),
            ("restart_after_ms", 0),
            ("extra_ms", 1),
            ("after_ms", 0),
            ("delta_ms", 1),
        ] {
            best = self.shrink_number(best, &format!("/faults/{index}/{field}"), min);
        }
        let pointer = format!("/faults/{index}/at_ms");
        if let Some(at_ms) = best.file().pointer(&pointer).and_then(Value::as_u64) {
            for grain in [1000, 100, 10] {
                let round = (at_ms + grain / 2) / grain * grain;
                if round == at_ms {
                    break;
                }
                let moved = set(&best, &pointer, json!(round));
                if self.fails(&moved) {
                    best = moved;
                    break;
                }
            }
        }
        best
    }

    /// Bisects the number at `pointer` (if the file has it) down to the smallest magnitude
    /// ≥ `min` that still fails; a negative number keeps its sign.
    fn shrink_number(&mut self, best: Candidate, pointer: &str, min: i64) -> Candidate {
        let current = match best.file().pointer(pointer) {
            Some(v) => v.as_i64(),
            None => defaults(pointer),
        };
        let Some(current) = current else {
            return best;
        };
        let sign = current.signum();
        self.bisect(best, min, current.abs(), |c, n| {
            set(c, pointer, json!(sign * n))
        })
    }

    /// Moves every fault with an `at_ms` earlier by the same amount (their spacing kept), as
    /// far as it still fails, so that the workload and the run can shrink after it.
    fn shift_earlier(&mut self, best: Candidate) -> Candidate {
        let times: Vec<Option<i64>> = best
            .faults
            .iter()
            .map(|f| f.get("at_ms").and_then(Value::as_i64))
            .collect();
        let Some(first) = times.iter().flatten().min().copied() else {
            return best;
        };
        self.bisect(best, 0, first, |c, earliest| {
            let mut moved = c.clone();
            for (fault, at_ms) in moved.faults.iter_mut().zip(&times) {
                if let (Some(at_ms), Value::Object(map)) = (at_ms, fault) {
                    map.insert("at_ms".into(), json!(at_ms - (first - earliest)));
                }
            }
            moved
        })
    }

    /// The smallest `n` in `lo..=hi` for which `with(best, n)` still fails, by bisection
    /// (`hi` is the value `best` has); returns that candidate.
    fn bisect(
        &mut self,
        mut best: Candidate,
        mut lo: i64,
        mut hi: i64,
        with: impl Fn(&Candidate, i64) -> Candidate,
    ) -> Candidate {
        let base = best.clone();
        while lo < hi && self.runs < self.max_runs {
            let mid = lo + (hi - lo) / 2;
            let candidate = with(&base, mid);
            if self.fails(&candidate) {
                hi = mid;
                best = candidate;
            } else {
                lo = mid + 1;
            }
        }
        best
    }
}

/// The defaults of the workload fields a file may leave out (`scenario::Clients`, the run
/// length), so that they shrink too.
fn defaults(pointer: &str) -> Option<i64> {
    let clients = crate::scenario::Clients::default();
    match pointer {
        "/clients/count" => Some(clients.count.into()),
        "/clients/acquisitions" => Some(clients.acquisitions.into()),
        "/duration_ms" => Some(crate::scenario::DEFAULT_DURATION_MS as i64),
        _ => None,
    }
}

/// The candidate with the value at `pointer` (`/faults/2/duration_ms`, `/clients/count`)
/// replaced, creating the object it sits in if the file left it out.
fn set(candidate: &Candidate, pointer: &str, value: Value) -> Candidate {
    let mut file = candidate.file();
    let (parent, key) = pointer.rsplit_once('/').expect("pointers start with /");
    if file.pointer(parent).is_none()
        && let Value::Object(map) = &mut file
    {
        map.insert(parent.trim_start_matches('/').to_string(), json!({}));
    }
    if let Some(Value::Object(map)) = file.pointer_mut(parent) {
        map.insert(key.to_string(), value);
    }
    let Value::Object(mut map) = file else {
        unreachable!("candidates are objects")
    };
    let faults = match map.remove("faults") {
        Some(Value::Array(faults)) => faults,
        _ => Vec::new(),
    };
    Candidate { base: map, faults }
}

/// `schema` (a relative path, as written in a file in `from`) as seen from `to`; URLs and
/// absolute paths, and paths that do not resolve, are kept as they are.
pub fn rebase(schema: &str, from: &Path, to: &Path) -> String {
    if schema.contains("://") || Path::new(schema).is_absolute() {
        return schema.to_string();
    }
    let (Ok(target), Ok(to)) = (
        std::fs::canonicalize(from.join(schema)),
        std::fs::canonicalize(if to.as_os_str().is_empty() {
            Path::new(".")
        } else {
            to
        }),
    ) else {
        return schema.to_string();
    };
    let target: Vec<Component> = target.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = target.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in common..to.len() {
        path.push("..");
    }
    for part in &target[common..] {
        path.push(part);
    }
    path.display().to_string()
}

/// The order a scenario file lists its fields in (the catalog's); others follow by name.
const FIELD_ORDER: &[&str] = &[
    "$schema",
    "name",
    "description",
    "source",
    "seed",
    "seeds",
    "kind",
    "node",
    "event",
    "command",
    "nth",
    "at_ms",
    "on",
    "after_ms",
    "duration_ms",
    "restart_after_ms",
    "topology",
    "network",
    "scheme",
    "schemes",
    "lease_ms",
    "clients",
    "resource",
    "faults",
    "faults_in_sequence",
    "liveness_window_ms",
    "expect",
    "mutual_exclusion",
    "resource_safety",
    "liveness",
    "fairness",
    "extension_safety",
    "release_safety",
];

/// Pretty JSON with object fields in [`FIELD_ORDER`], two-space indents, short arrays of
/// numbers or strings on one line.
pub fn ordered_json(value: &Value) -> String {
    fn write(out: &mut String, value: &Value, indent: usize) {
        let pad = "  ".repeat(indent + 1);
        match value {
            Value::Object(map) if !map.is_empty() => {
                let rank = |k: &str| {
                    FIELD_ORDER
                        .iter()
                        .position(|f| *f == k)
                        .unwrap_or(usize::MAX)
                };
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
                out.push_str("{\n");
                for (i, key) in keys.iter().enumerate() {
                    out.push_str(&format!("{pad}{}: ", Value::String((*key).clone())));
                    write(out, &map[*key], indent + 1);
                    out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push('}');
            }
            Value::Array(items) if items.iter().any(|v| v.is_object() || v.is_array()) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&pad);
                    if item.is_array() {
                        out.push_str(&item.to_string().replace(",", ", "));
                    } else {
                        write(out, item, indent + 1);
                    }
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push(']');
            }
            Value::Array(items) => {
                let parts: Vec<String> = items.iter().map(Value::to_string).collect();
                out.push_str(&format!("[{}]", parts.join(", ")));
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(&mut out, value, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::faults::{Fault, FaultKind, When};

    #[test]
    fn nemesis_faults_are_cut_at_the_heal_time() {
        let at = |at_ms, kind, duration_ms| Fault {
            kind,
            when: When::At { at_ms },
            duration_ms,
        };
        let pause = FaultKind::Pause {
            node: "client-1".into(),
        };
        assert_eq!(
            as_scripted(&at(100, pause.clone(), Some(5000)), 1000).duration_ms,
            Some(900)
        );
        assert_eq!(
            as_scripted(&at(100, pause.clone(), Some(50)), 1000).duration_ms,
            Some(50)
        );
        let jump = FaultKind::ClockJump {
            node: "redis-1".into(),
            delta_ms: 700,
        };
        assert_eq!(
            as_scripted(&at(400, jump, None), 1000).duration_ms,
            Some(600)
        );
        let crash = FaultKind::Crash {
            node: "redis-1".into(),
            restart_after_ms: Some(0),
        };
        let scripted = as_scripted(&at(400, crash, None), 1000);
        assert_eq!(
            scripted.kind,
            FaultKind::Crash {
                node: "redis-1".into(),
                restart_after_ms: Some(0)
            }
        );
        assert_eq!(scripted.duration_ms, None);
    }

    #[test]
    fn files_list_their_fields_in_the_catalog_order() {
        let file = json!({
            "faults": [{ "node": "client-1", "kind": "pause", "at_ms": 5, "duration_ms": 9 }],
            "scheme": { "name": "set-nx-px-lua", "ttl_ms": 1000 },
            "name": "n",
            "network": { "latency_ms": [1, 5] }
        });
        assert_eq!(
            ordered_json(&file),
            r#"{
  "name": "n",
  "network": {
    "latency_ms": [1, 5]
  },
  "scheme": {
    "name": "set-nx-px-lua",
    "ttl_ms": 1000
  },
  "faults": [
    {
      "kind": "pause",
      "node": "client-1",
      "at_ms": 5,
      "duration_ms": 9
    }
  ]
}"#
        );
        assert_eq!(
            serde_json::from_str::<Value>(&ordered_json(&file)).unwrap(),
            file
        );
    }

    #[test]
    fn schema_paths_are_rebased_to_the_new_folder() {
        let root = std::env::temp_dir().join(format!("locksim-rebase-{}", std::process::id()));
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::create_dir_all(root.join("scenarios/shrunk")).unwrap();
        std::fs::write(root.join("docs/s.json"), "{}").unwrap();
        assert_eq!(
            rebase(
                "../docs/s.json",
                &root.join("scenarios"),
                &root.join("scenarios/shrunk")
            ),
            "../../docs/s.json"
        );
        assert_eq!(rebase("https://x/s.json", &root, &root), "https://x/s.json");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
