//! The files of the conformance suite: a library (`conformance/libraries/<id>.json`: how to run
//! it, which scheme models it, what its transcript looks like) and a situation
//! (`conformance/situations/<library>/<name>.json`: the masters' initial state, the library's
//! configuration, the steps). Every mistake is an error naming the file and the field.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// How a library runs here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// `conformance/drivers/driver.py` with the Python of this venv under the suites folder.
    Python { venv: String },
    /// `conformance/drivers/driver.mjs` beside the suites folder's `node/node_modules`, which
    /// holds the package under this name (npm aliases keep two versions apart).
    Node { package: String },
    /// Not runnable here (no registry for its ecosystem): each situation carries the transcript
    /// expected from the library's source.
    Source,
}

#[derive(Clone, Debug)]
pub struct Library {
    /// The file's stem: `redis-py@8.1.0`.
    pub id: String,
    pub runtime: Runtime,
    /// The driver's adapter (`redis-py`, `redbeat`, `redlock`, ...).
    pub driver: String,
    /// The modelled scheme: a scheme object (`{"name": ..., "preset": ...}`).
    pub scheme: Map<String, Value>,
    /// The lock's key, as the library is told it.
    pub key: String,
    /// Every name the lock's commands carry (the key, a signal list, a channel; one ending in
    /// `:` stands for every name it starts): a command naming none of them is the client's own
    /// business (HELLO, CLIENT SETINFO, a scheduler's reads) and is not compared.
    pub keys: Vec<String>,
    /// How an acquire attempt's first command starts once abstracted (`SET lock`).
    pub attempt: Vec<String>,
    /// How lines whose order is a race start (several processes answering one ping): each
    /// run of them is compared in sorted order.
    pub any_order: Vec<String>,
    /// How a poll whose count follows the machine's timing starts: three or more in a row
    /// compare as one line marked `(polled)`.
    pub polls: Vec<String>,
    /// The library's delay between two attempts, ms (`[min, max]`).
    pub delay_ms: Option<(u64, u64)>,
    /// How a background refresh's (a watchdog's renewal's) first command starts once
    /// abstracted; empty for a library that does not refresh on its own.
    pub refresh: Vec<String>,
    /// The library's delay between two refreshes, ms (`[min, max]`).
    pub refresh_ms: Option<(u64, u64)>,
    /// The client's own command timeout (a socket timeout), ms; `None`: it waits for ever.
    pub command_timeout_ms: Option<u64>,
    /// Where the behaviour comes from: repository@tag and file:lines.
    pub source: String,
    /// The scripts a library not runnable here sends, as its source spells them: every
    /// script an expected transcript names (`EVALSHA <sha1>`, `<script sha1-prefix>`) must be
    /// one of these, so the expectation is the source's text, not the model's.
    pub scripts: Vec<SourceScript>,
}

/// One script of a library's source, byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceScript {
    /// `file:lines` at the library's tag.
    pub source: String,
    pub text: String,
    /// The sha1 of `text`, in hex.
    pub sha1: String,
}

/// One operation of the library, or something the harness does to a master.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// `acquire`, `release` or `extend` on lock object `lock`.
    Op {
        op: Op,
        lock: usize,
        /// The model's acquire timeout, ms (the library's own blocking timeout).
        timeout_ms: u64,
        /// Stop waiting for the call after this long (a lock that blocks for ever): its
        /// outcome is then `pending` and it goes on until the situation ends.
        until_ms: Option<u64>,
    },
    /// A command on master `master` through the harness's own connection (not compared).
    Admin { master: usize, command: Vec<String> },
    /// Time passes.
    Sleep { ms: u64 },
    /// A harness connection to master `master` named `name` subscribes to `channel` and never
    /// reads again: a holder that stopped answering while its connection stayed open
    /// (portalocker's crashed holder, `portalocker/redis.py:2173-2245`). Not compared.
    SilentSubscriber {
        master: usize,
        name: String,
        channel: String,
    },
    /// Wait until the library's calls in flight have returned: a library that answers its
    /// caller on a quorum (node-redlock v5, `redlock.ts` `_attemptOperation`) leaves its calls to
    /// the other masters running, and a real run's next step would otherwise race them. The
    /// model's calls take no virtual time, so they have returned already unless a pause holds
    /// them.
    Quiet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Acquire,
    Release,
    Extend,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Release => "release",
            Op::Extend => "extend",
        }
    }
}

/// What a library not runnable here does, read from its source: per master the abstracted
/// commands, each with the `file:line` it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub masters: Vec<Vec<String>>,
    pub outcomes: Vec<String>,
    pub attempts: usize,
}

#[derive(Clone, Debug)]
pub struct Situation {
    pub path: PathBuf,
    /// `library/name`.
    pub name: String,
    pub description: String,
    pub library: Library,
    pub masters: usize,
    /// Per master, the commands that set it up before anything else.
    pub initial: Vec<Vec<Vec<String>>>,
    /// The library's configuration, as its driver takes it.
    pub config: Map<String, Value>,
    /// The modelled scheme with this situation's parameters.
    pub scheme: Value,
    pub steps: Vec<Step>,
    /// The library's delay between attempts in this configuration, ms.
    pub delay_ms: Option<(u64, u64)>,
    /// The library's delay between refreshes in this configuration, ms.
    pub refresh_ms: Option<(u64, u64)>,
    pub command_timeout_ms: Option<u64>,
    /// How long both sides go on after the last step (in-flight commands, held ones).
    pub settle_ms: u64,
    pub expected: Option<Expected>,
}

fn field_error(path: &Path, field: &str, problem: impl std::fmt::Display) -> String {
    format!("{}: {field}: {problem}", path.display())
}

fn read_json(path: &Path) -> Result<Map<String, Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("{}: not a JSON object", path.display())),
        Err(e) => Err(format!("{}: not JSON: {e}", path.display())),
    }
}

/// Fields read off a JSON object, refusing unknown ones.
struct Fields<'a> {
    path: &'a Path,
    prefix: String,
    map: Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn new(path: &'a Path, prefix: &str, map: Map<String, Value>) -> Self {
        Fields {
            path,
            prefix: prefix.to_string(),
            map,
        }
    }

    fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn error(&self, key: &str, problem: impl std::fmt::Display) -> String {
        field_error(self.path, &self.name(key), problem)
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key)
    }

    fn string(&mut self, key: &str) -> Result<String, String> {
        match self.take(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s),
            Some(other) => {
                Err(self.error(key, format!("expected a non-empty string, got {other}")))
            }
            None => Err(self.error(key, "missing")),
        }
    }

    fn opt_u64(&mut self, key: &str) -> Result<Option<u64>, String> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
            Some(other) => Err(self.error(key, format!("expected a whole number, got {other}"))),
        }
    }

    fn object(&mut self, key: &str) -> Result<Map<String, Value>, String> {
        match self.take(key) {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m),
            Some(other) => Err(self.error(key, format!("expected an object, got {other}"))),
        }
    }

    fn strings(&mut self, key: &str) -> Result<Vec<String>, String> {
        match self.take(key) {
            None => Ok(Vec::new()),
            Some(value) => strings(&value)
                .ok_or_else(|| self.error(key, format!("expected a list of strings, got {value}"))),
        }
    }

    fn delay(&mut self, key: &str) -> Result<Option<(u64, u64)>, String> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(pair))
                if pair.len() == 2
                    && pair[0].as_u64().is_some()
                    && pair[1].as_u64() >= pair[0].as_u64() =>
            {
                Ok(Some((
                    pair[0].as_u64().unwrap_or(0),
                    pair[1].as_u64().unwrap_or(0),
                )))
            }
            Some(other) => Err(self.error(key, format!("expected [min, max] in ms, got {other}"))),
        }
    }

    /// Fails on any field not read.
    fn done(self) -> Result<(), String> {
        match self.map.keys().next() {
            Some(key) => Err(field_error(self.path, &self.name(key), "unknown field")),
            None => Ok(()),
        }
    }
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// `conformance/libraries/<id>.json`.
pub fn load_library(path: &Path) -> Result<Library, String> {
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut f = Fields::new(path, "", read_json(path)?);
    let runtime = match f.string("runtime")?.as_str() {
        "python" => Runtime::Python {
            venv: f.string("venv")?,
        },
        "node" => Runtime::Node {
            package: f.string("package")?,
        },
        "source" => Runtime::Source,
        other => {
            return Err(f.error(
                "runtime",
                format!("{other:?}: expected python, node or source"),
            ));
        }
    };
    let driver = if runtime == Runtime::Source {
        String::new()
    } else {
        f.string("driver")?
    };
    let scheme = f.object("scheme")?;
    if !scheme.contains_key("name") {
        return Err(f.error("scheme.name", "missing"));
    }
    let key = f.string("key")?;
    let mut keys = f.strings("keys")?;
    if keys.is_empty() {
        keys.push(key.clone());
    }
    let library = Library {
        id,
        runtime,
        driver,
        scheme,
        key,
        keys,
        attempt: f.strings("attempt")?,
        any_order: f.strings("any_order")?,
        polls: f.strings("polls")?,
        delay_ms: f.delay("delay_ms")?,
        refresh: f.strings("refresh")?,
        refresh_ms: f.delay("refresh_ms")?,
        command_timeout_ms: f.opt_u64("command_timeout_ms")?,
        source: f.string("source")?,
        scripts: source_scripts(&mut f)?,
    };
    if library.attempt.is_empty() {
        return Err(f.error("attempt", "missing"));
    }
    f.done()?;
    Ok(library)
}

/// `scripts`: a list of `{"source": "file:lines", "text": "..."}`.
fn source_scripts(f: &mut Fields<'_>) -> Result<Vec<SourceScript>, String> {
    let list = match f.take("scripts") {
        None => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(f.error("scripts", format!("expected a list, got {other}"))),
    };
    list.into_iter()
        .enumerate()
        .map(|(i, item)| {
            let name = format!("scripts[{i}]");
            let Value::Object(map) = item else {
                return Err(f.error(&name, "expected {\"source\": ..., \"text\": ...}"));
            };
            let mut g = Fields::new(f.path, &f.name(&name), map);
            let (source, text) = (g.string("source")?, g.string("text")?);
            g.done()?;
            let sha1 = model::redis::lua::sha1_hex(text.as_bytes());
            Ok(SourceScript { source, text, sha1 })
        })
        .collect()
}

/// The scripts an expected line names: the digest of an `EVALSHA` and every `<script
/// sha1-prefix>` (a script text sent by `EVAL` or `SCRIPT LOAD`).
fn named_scripts(line: &str) -> Vec<&str> {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 && words[i - 1].eq_ignore_ascii_case("EVALSHA") {
            out.push(*word);
        } else if word.starts_with("<script") {
            let next = words.get(i + 1).copied().unwrap_or("");
            if let Some(prefix) = next.strip_suffix('>') {
                out.push(prefix);
            }
        }
    }
    out
}

/// Every script `expected` names is one of the library's source `scripts`.
fn check_named_scripts(path: &Path, library: &Library, expected: &Expected) -> Result<(), String> {
    if library.scripts.is_empty() {
        return Ok(());
    }
    for (m, lines) in expected.masters.iter().enumerate() {
        for (l, line) in lines.iter().enumerate() {
            let command = line.split("  # ").next().unwrap_or("");
            for sha in named_scripts(command) {
                if !library.scripts.iter().any(|s| s.sha1.starts_with(sha)) {
                    return Err(field_error(
                        path,
                        &format!("expected.masters[{m}][{l}]"),
                        format!(
                            "script {sha} is none of {}'s source `scripts` ({})",
                            library.id,
                            library
                                .scripts
                                .iter()
                                .map(|s| format!("{} {}", &s.sha1[..8], s.source))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `conformance/situations/<library>/<name>.json`; its library is the folder's name.
pub fn load_situation(path: &Path, libraries_dir: &Path) -> Result<Situation, String> {
    let library_id = path
        .parent()
        .and_then(Path::file_name)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let library = load_library(&libraries_dir.join(format!("{library_id}.json")))
        .map_err(|e| format!("{}: its library: {e}", path.display()))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut f = Fields::new(path, "", read_json(path)?);
    let description = f.string("description")?;
    let masters = f.opt_u64("masters")?.unwrap_or(1) as usize;
    if !(1..=9).contains(&masters) {
        return Err(f.error("masters", format!("{masters}: expected 1 to 9")));
    }
    let initial = match f.take("initial") {
        None => vec![Vec::new(); masters],
        Some(Value::Array(per_master)) if per_master.len() == masters => per_master
            .iter()
            .enumerate()
            .map(|(i, commands)| {
                commands
                    .as_array()
                    .and_then(|list| list.iter().map(strings).collect::<Option<Vec<_>>>())
                    .filter(|list| list.iter().all(|c| !c.is_empty()))
                    .ok_or_else(|| {
                        f.error(
                            &format!("initial[{i}]"),
                            "expected a list of commands, each a list of strings",
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => {
            return Err(f.error(
                "initial",
                format!("expected one list of commands per master ({masters})"),
            ));
        }
    };
    let config = f.object("config")?;
    let mut scheme = library.scheme.clone();
    scheme.extend(f.object("scheme")?);
    let acquire_timeout_ms = f.opt_u64("acquire_timeout_ms")?.unwrap_or(10_000);
    let steps = match f.take("steps") {
        Some(Value::Array(steps)) if !steps.is_empty() => steps
            .into_iter()
            .enumerate()
            .map(|(i, step)| parse_step(path, i, step, masters, acquire_timeout_ms))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(f.error("steps", "expected a non-empty list")),
    };
    let delay_ms = match f.delay("delay_ms")? {
        Some(d) => Some(d),
        None => library.delay_ms,
    };
    let refresh_ms = match f.delay("refresh_ms")? {
        Some(d) => Some(d),
        None => library.refresh_ms,
    };
    if refresh_ms.is_some() && library.refresh.is_empty() {
        return Err(f.error(
            "refresh_ms",
            format!("{} has no `refresh`: it does not refresh", library.id),
        ));
    }
    let command_timeout_ms = match f.take("command_timeout_ms") {
        None => library.command_timeout_ms,
        Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
        Some(other) => {
            return Err(f.error(
                "command_timeout_ms",
                format!("expected ms or null, got {other}"),
            ));
        }
    };
    let settle_ms = f.opt_u64("settle_ms")?.unwrap_or(300);
    let expected = match f.take("expected") {
        None => None,
        Some(value) => Some(parse_expected(path, value, masters)?),
    };
    if let Some(expected) = &expected {
        check_named_scripts(path, &library, expected)?;
    }
    f.done()?;
    if (library.runtime == Runtime::Source) != expected.is_some() {
        return Err(field_error(
            path,
            "expected",
            "a library that runs here has no expected transcript; one that does not needs it",
        ));
    }
    Ok(Situation {
        path: path.to_path_buf(),
        name: format!("{library_id}/{stem}"),
        description,
        library,
        masters,
        initial,
        config,
        scheme: Value::Object(scheme),
        steps,
        delay_ms,
        refresh_ms,
        command_timeout_ms,
        settle_ms,
        expected,
    })
}

fn parse_step(
    path: &Path,
    i: usize,
    step: Value,
    masters: usize,
    acquire_timeout_ms: u64,
) -> Result<Step, String> {
    let Value::Object(map) = step else {
        return Err(field_error(
            path,
            &format!("steps[{i}]"),
            "expected an object",
        ));
    };
    let mut f = Fields::new(path, &format!("steps[{i}]"), map);
    let step = if let Some(op) = f.take("op") {
        let op = match op.as_str() {
            Some("acquire") => Op::Acquire,
            Some("release") => Op::Release,
            Some("extend") => Op::Extend,
            _ => {
                return Err(f.error("op", format!("{op}: expected acquire, release or extend")));
            }
        };
        Step::Op {
            op,
            lock: f.opt_u64("lock")?.unwrap_or(0) as usize,
            timeout_ms: f.opt_u64("timeout_ms")?.unwrap_or(acquire_timeout_ms),
            until_ms: f.opt_u64("until_ms")?,
        }
    } else if let Some(master) = f.take("admin") {
        let master = master.as_u64().map(|m| m as usize).filter(|m| *m < masters);
        let Some(master) = master else {
            return Err(f.error("admin", format!("expected a master index below {masters}")));
        };
        let command = f.strings("command")?;
        if command.is_empty() {
            return Err(f.error("command", "missing"));
        }
        Step::Admin { master, command }
    } else if let Some(ms) = f.opt_u64("sleep_ms")? {
        Step::Sleep { ms }
    } else if let Some(master) = f.take("silent_subscriber") {
        let master = master.as_u64().map(|m| m as usize).filter(|m| *m < masters);
        let Some(master) = master else {
            return Err(f.error(
                "silent_subscriber",
                format!("expected a master index below {masters}"),
            ));
        };
        Step::SilentSubscriber {
            master,
            name: f.string("name")?,
            channel: f.string("channel")?,
        }
    } else if let Some(quiet) = f.take("quiet") {
        if quiet != Value::Bool(true) {
            return Err(f.error("quiet", "expected true"));
        }
        Step::Quiet
    } else {
        return Err(f.error(
            "op",
            "a step is an op, an admin command, a sleep_ms, a silent_subscriber or quiet",
        ));
    };
    f.done()?;
    Ok(step)
}

/// Every expected line carries its source: `SET lock <V1> NX PX 8000  # mutex.go:269`.
fn parse_expected(path: &Path, value: Value, masters: usize) -> Result<Expected, String> {
    let Value::Object(map) = value else {
        return Err(field_error(path, "expected", "expected an object"));
    };
    let mut f = Fields::new(path, "expected", map);
    let per_master = match f.take("masters") {
        Some(Value::Array(list)) if list.len() == masters => list,
        _ => {
            return Err(f.error(
                "masters",
                format!("expected one list of lines per master ({masters})"),
            ));
        }
    };
    let mut out = Vec::new();
    for (m, lines) in per_master.iter().enumerate() {
        let lines = strings(lines)
            .ok_or_else(|| f.error(&format!("masters[{m}]"), "expected a list of strings"))?;
        for (l, line) in lines.iter().enumerate() {
            if !line.contains("  # ") {
                return Err(f.error(
                    &format!("masters[{m}][{l}]"),
                    "each line ends with `  # file:line` of the source it comes from",
                ));
            }
        }
        out.push(lines);
    }
    let outcomes = f.strings("outcomes")?;
    let attempts = f.opt_u64("attempts")?.unwrap_or(0) as usize;
    f.done()?;
    Ok(Expected {
        masters: out,
        outcomes,
        attempts,
    })
}

/// Every situation file under `dir` (sorted), or the files given.
pub fn situation_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            collect(path, &mut found)
                .map_err(|e| format!("{}: cannot list: {e}", path.display()))?;
            found.sort();
            out.extend(found);
        } else if path.is_file() {
            out.push(path.clone());
        } else {
            return Err(format!("{}: no such file or folder", path.display()));
        }
    }
    Ok(out)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    Ok(())
}
