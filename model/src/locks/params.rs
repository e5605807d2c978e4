//! A scheme as a scenario names it — `"set-nx-px-lua"` or
//! `{ "name": "redlock", "ttl_ms": 10000, "preset": "redsync" }` — and its parameter checking:
//! every parameter a scheme reads is declared with its source's default, and anything left over
//! is an error naming the field.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::{Lease, LockScheme, SchemeInfo, scheme_info};

/// The longest string parameter: lock keys and values are names, and every command, trace
/// event and key-owner record repeats them (a 50 MB `value` would be copied into each).
pub const MAX_STRING_PARAM_BYTES: usize = 1024;

/// The largest `*_ms` integer parameter: one year, as for every `*_ms` field of a scenario
/// (times are added, doubled and turned into microseconds, and must stay far from overflowing).
pub const MAX_MS_PARAM: u64 = 365 * 24 * 3_600_000;

/// The largest other integer parameter (a count: `retry_count`, `retry_attempts`, `permits`):
/// counts are multiplied by times (Redisson's unlock latch lives `(timeout + delay) × attempts`).
pub const MAX_COUNT_PARAM: u64 = 1_000_000;

/// The largest number parameter (`drift_factor`: a factor of the lease; Redlock's is 0.01, and
/// from 1 on no grant is ever valid).
pub const MAX_NUMBER_PARAM: f64 = 100.0;

/// The scheme part of a scenario, validated against the catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeSpec {
    pub name: String,
    pub params: Map<String, Value>,
}

impl SchemeSpec {
    /// Parses `"id"` or `{ "name": "id", ...params }`. `field` names the place in the scenario
    /// for error messages (`scheme`, `schemes[2]`).
    pub fn from_json(value: &Value, field: &str) -> Result<SchemeSpec, String> {
        let spec = match value {
            Value::String(name) => SchemeSpec {
                name: name.clone(),
                params: Map::new(),
            },
            Value::Object(map) => {
                let mut params = map.clone();
                let name = match params.remove("name") {
                    Some(Value::String(name)) => name,
                    Some(other) => {
                        return Err(format!(
                            "{field}.name: expected a scheme id string, got {other}"
                        ));
                    }
                    None => {
                        return Err(format!(
                            "{field}.name: missing (the scheme id, e.g. \"set-nx-px-lua\")"
                        ));
                    }
                };
                SchemeSpec { name, params }
            }
            other => {
                return Err(format!(
                    "{field}: expected a scheme id or an object with \"name\", got {other}"
                ));
            }
        };
        // Build once so every parameter error surfaces at load time, not mid-run.
        spec.build(field)?;
        Ok(spec)
    }

    pub fn info(&self) -> Option<&'static SchemeInfo> {
        scheme_info(&self.name)
    }

    /// A fresh client instance of this scheme.
    pub fn build(&self, field: &str) -> Result<Box<dyn LockScheme>, String> {
        let info = self.info().ok_or_else(|| {
            let known: Vec<&str> = super::SCHEMES.iter().map(|s| s.id).collect();
            format!(
                "{field}.name: unknown scheme \"{}\" (known: {})",
                self.name,
                known.join(", ")
            )
        })?;
        let mut params = Params::new(field, &self.name, &self.params);
        let scheme = (info.build)(&mut params)?;
        params.finish()?;
        Ok(scheme)
    }

    /// The lock key the scheme uses (parameter `key`, default `lock`).
    pub fn key(&self) -> String {
        match self.params.get("key") {
            Some(Value::String(key)) => key.clone(),
            _ => "lock".to_string(),
        }
    }

    /// The lease: parameter `ttl_ms`, or the source's default.
    pub fn ttl_ms(&self) -> u64 {
        self.params
            .get("ttl_ms")
            .and_then(Value::as_u64)
            .or_else(|| self.info().map(|i| i.default_ttl_ms))
            .unwrap_or(30_000)
    }

    /// What this scheme's `ttl_ms` is: its preset's lease, else its scheme's; redis-py given a
    /// `ttl_ms` has one.
    pub fn lease(&self) -> Lease {
        let Some(info) = self.info() else {
            return Lease::None;
        };
        let preset = self
            .params
            .get("preset")
            .and_then(Value::as_str)
            .and_then(|name| info.presets.iter().find(|p| p.name == name));
        match preset.map_or(info.lease, |p| p.lease) {
            Lease::None if self.params.contains_key("ttl_ms") => Lease::Ms,
            lease => lease,
        }
    }

    /// This scheme with `ttl_ms` = a scenario's `lease_ms`, unless it has no lease or sets its
    /// own `ttl_ms`. A scheme whose source counts seconds needs a whole number of them (an
    /// error naming `lease_ms`, rather than a lease silently rounded).
    pub fn with_lease(mut self, lease_ms: u64, field: &str) -> Result<SchemeSpec, String> {
        if self.params.contains_key("ttl_ms") {
            return Ok(self);
        }
        match self.lease() {
            Lease::None => return Ok(self),
            Lease::Seconds if !lease_ms.is_multiple_of(1000) => {
                return Err(format!(
                    "lease_ms: {lease_ms} ms is not a whole number of seconds, which {} needs (its source sets the TTL in seconds): give a multiple of 1000",
                    self.label()
                ));
            }
            Lease::Ms | Lease::Seconds => {}
        }
        self.params.insert("ttl_ms".into(), Value::from(lease_ms));
        self.build(field)?;
        Ok(self)
    }

    /// A short label for reports: the id, plus the preset when one is chosen.
    pub fn label(&self) -> String {
        match self.params.get("preset").and_then(Value::as_str) {
            Some(preset) => format!("{}:{}", self.name, preset),
            None => self.name.clone(),
        }
    }
}

/// What a parameter takes, as its accessor declares it: what the scenario JSON Schema offers
/// an editor (`locksim schema`).
#[derive(Clone, Debug, PartialEq)]
pub enum ParamKind {
    Integer {
        min: u64,
        max: u64,
        default: u64,
    },
    Number {
        max: f64,
        default: f64,
    },
    Bool {
        default: bool,
    },
    String {
        default: String,
    },
    Choice {
        choices: Vec<String>,
        default: String,
    },
    /// Structured JSON (the `script` scheme's scripts).
    Any,
}

/// The parameters scheme `id` declares, by name: what its build reads when given none, and,
/// for a scheme with a `preset` choice, with each preset. `None` for an unknown id.
pub fn declared_params(id: &str) -> Option<BTreeMap<String, ParamKind>> {
    let info = scheme_info(id)?;
    let mut declared = BTreeMap::new();
    let mut given = vec![Map::new()];
    let mut seen_presets = false;
    while let Some(map) = given.pop() {
        let mut params = Params::new("scheme", id, &map);
        // A scheme that requires a parameter fails here, after declaring what it read.
        let _ = (info.build)(&mut params);
        if let (false, Some(ParamKind::Choice { choices, .. })) =
            (seen_presets, params.kinds.get("preset"))
        {
            seen_presets = true;
            for preset in choices {
                let mut map = Map::new();
                map.insert("preset".into(), Value::String(preset.clone()));
                given.push(map);
            }
        }
        for name in params.read {
            let kind = params.kinds.get(&name).cloned().unwrap_or(ParamKind::Any);
            declared.entry(name).or_insert(kind);
        }
    }
    Some(declared)
}

/// Typed, declared access to a scheme's parameters.
pub struct Params<'a> {
    field: &'a str,
    scheme: &'a str,
    map: &'a Map<String, Value>,
    read: BTreeSet<String>,
    /// What each typed accessor declared (`declared_params`).
    kinds: BTreeMap<String, ParamKind>,
}

impl<'a> Params<'a> {
    pub fn new(field: &'a str, scheme: &'a str, map: &'a Map<String, Value>) -> Params<'a> {
        Params {
            field,
            scheme,
            map,
            read: BTreeSet::new(),
            kinds: BTreeMap::new(),
        }
    }

    fn declare(&mut self, name: &str, kind: ParamKind) {
        self.kinds.insert(name.to_string(), kind);
    }

    /// Where these parameters sit in the scenario (`scheme`, `schemes[2]`), for messages.
    pub fn field(&self) -> &str {
        self.field
    }

    /// A parameter as raw JSON, for structured parameters (the `script` scheme's scripts).
    pub fn value(&mut self, name: &str) -> Option<&'a Value> {
        self.take(name)
    }

    /// Whether the scenario gave this parameter (marks it as read).
    pub fn given(&mut self, name: &str) -> bool {
        self.take(name).is_some()
    }

    fn take(&mut self, name: &str) -> Option<&'a Value> {
        self.read.insert(name.to_string());
        self.map.get(name)
    }

    fn bad(&self, name: &str, expected: &str, got: &Value) -> String {
        format!("{}.{name}: expected {expected}, got {got}", self.field)
    }

    /// A non-negative integer parameter.
    pub fn u64(&mut self, name: &str, default: u64) -> Result<u64, String> {
        self.integer(name, 0, default)
    }

    /// A positive integer parameter.
    pub fn positive(&mut self, name: &str, default: u64) -> Result<u64, String> {
        self.integer(name, 1, default)
    }

    /// An integer parameter from `min` to its largest: [`MAX_MS_PARAM`] for a time (`*_ms`),
    /// else [`MAX_COUNT_PARAM`].
    fn integer(&mut self, name: &str, min: u64, default: u64) -> Result<u64, String> {
        let max = if name.ends_with("_ms") {
            MAX_MS_PARAM
        } else {
            MAX_COUNT_PARAM
        };
        self.declare(name, ParamKind::Integer { min, max, default });
        match self.take(name) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|x| (min..=max).contains(x))
                .ok_or_else(|| self.bad(name, &format!("an integer from {min} to {max}"), v)),
        }
    }

    /// A number parameter from 0 to [`MAX_NUMBER_PARAM`].
    pub fn f64(&mut self, name: &str, default: f64) -> Result<f64, String> {
        let max = MAX_NUMBER_PARAM;
        self.declare(name, ParamKind::Number { max, default });
        match self.take(name) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| (0.0..=max).contains(x))
                .ok_or_else(|| self.bad(name, &format!("a number from 0 to {max}"), v)),
        }
    }

    pub fn bool(&mut self, name: &str, default: bool) -> Result<bool, String> {
        self.declare(name, ParamKind::Bool { default });
        match self.take(name) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.bad(name, "true or false", v)),
        }
    }

    /// A string parameter (a key, a value, a preset): at most [`MAX_STRING_PARAM_BYTES`].
    pub fn string(&mut self, name: &str, default: &str) -> Result<String, String> {
        self.declare(
            name,
            ParamKind::String {
                default: default.to_string(),
            },
        );
        match self.take(name) {
            None => Ok(default.to_string()),
            Some(Value::String(s)) if s.len() > MAX_STRING_PARAM_BYTES => Err(format!(
                "{}.{name}: {} bytes is too long for a lock key or value (limit {MAX_STRING_PARAM_BYTES} bytes)",
                self.field,
                s.len()
            )),
            Some(v) => v
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| self.bad(name, "a string", v)),
        }
    }

    /// A string parameter restricted to `choices`.
    pub fn choice(
        &mut self,
        name: &str,
        choices: &[&str],
        default: &str,
    ) -> Result<String, String> {
        let value = self.string(name, default);
        self.declare(
            name,
            ParamKind::Choice {
                choices: choices.iter().map(|c| c.to_string()).collect(),
                default: default.to_string(),
            },
        );
        let value = value?;
        if choices.contains(&value.as_str()) {
            Ok(value)
        } else {
            Err(format!(
                "{}.{name}: \"{value}\" is not one of {} for scheme {}",
                self.field,
                choices.join(", "),
                self.scheme
            ))
        }
    }

    /// The lock key (`key`, default `lock`).
    pub fn key(&mut self) -> Result<String, String> {
        let key = self.string("key", "lock")?;
        if key.is_empty() {
            return Err(format!("{}.key: must not be empty", self.field));
        }
        Ok(key)
    }

    /// Errors on any parameter the scheme did not read.
    pub fn finish(self) -> Result<(), String> {
        let unknown: Vec<&String> = self
            .map
            .keys()
            .filter(|k| !self.read.contains(*k))
            .collect();
        match unknown.first() {
            None => Ok(()),
            Some(name) => Err(format!(
                "{}.{name}: unknown parameter for scheme {} (it takes: {})",
                self.field,
                self.scheme,
                self.read.iter().cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every scheme's parameters are declared with their kind, presets included.
    #[test]
    fn schemes_declare_their_parameters() {
        let redlock = declared_params("redlock").unwrap();
        assert!(matches!(
            redlock.get("ttl_ms"),
            Some(ParamKind::Integer { .. })
        ));
        let Some(ParamKind::Choice { choices, .. }) = redlock.get("preset") else {
            panic!("redlock has presets: {redlock:?}");
        };
        assert!(choices.iter().any(|c| c == "redsync"), "{choices:?}");
        assert!(declared_params("fair").unwrap().contains_key("preset"));
        assert!(declared_params("script").unwrap().contains_key("acquire"));
        assert!(declared_params("nope").is_none());
        for info in super::super::SCHEMES {
            assert!(
                declared_params(info.id).unwrap().contains_key("key"),
                "{} takes a key",
                info.id
            );
        }
    }

    #[test]
    fn accepts_an_id_or_an_object() {
        let a = SchemeSpec::from_json(&json!("set-nx-px-lua"), "scheme").unwrap();
        assert_eq!(a.name, "set-nx-px-lua");
        let b =
            SchemeSpec::from_json(&json!({"name": "fencing", "ttl_ms": 1000}), "scheme").unwrap();
        assert_eq!(b.ttl_ms(), 1000);
        assert_eq!(b.key(), "lock");
    }

    #[test]
    fn a_scenario_lease_sets_ttl_ms_where_there_is_a_lease() {
        let lease = |v: serde_json::Value, ms| {
            SchemeSpec::from_json(&v, "schemes[0]")
                .unwrap()
                .with_lease(ms, "schemes[0]")
        };
        assert_eq!(lease(json!("fencing"), 1500).unwrap().ttl_ms(), 1500);
        let own = lease(json!({"name": "fencing", "ttl_ms": 900}), 1500).unwrap();
        assert_eq!(own.ttl_ms(), 900, "a scheme's own ttl_ms wins");
        let none = lease(json!("setnx-del"), 1500).unwrap();
        assert!(!none.params.contains_key("ttl_ms"));
        assert_eq!(none.lease(), Lease::None);
        let redis_py = lease(json!({"name": "set-nx-px-lua", "preset": "redis-py"}), 1500).unwrap();
        assert_eq!(
            redis_py.lease(),
            Lease::None,
            "redis-py's default timeout=None"
        );
        assert_eq!(lease(json!("setex"), 2000).unwrap().ttl_ms(), 2000);
        let err = lease(json!("setex"), 1500).unwrap_err();
        assert!(
            err.starts_with(
                "lease_ms: 1500 ms is not a whole number of seconds, which setex needs"
            ),
            "{err}"
        );
    }

    #[test]
    fn errors_name_the_field() {
        let err = SchemeSpec::from_json(&json!({"name": "nope"}), "scheme").unwrap_err();
        assert!(
            err.starts_with("scheme.name: unknown scheme \"nope\""),
            "{err}"
        );
        let err = SchemeSpec::from_json(
            &json!({"name": "set-nx-px-lua", "ttl_ms": "x"}),
            "schemes[1]",
        )
        .unwrap_err();
        assert_eq!(
            err,
            "schemes[1].ttl_ms: expected an integer from 1 to 31536000000, got \"x\""
        );
        // Counts and factors have a largest value too: times are multiplied by them.
        for (param, value, expected) in [
            (
                "ttl_ms",
                json!(31_536_000_001u64),
                "an integer from 1 to 31536000000",
            ),
            (
                "retry_count",
                json!(u64::MAX),
                "an integer from 0 to 1000000",
            ),
            ("drift_factor", json!(1e300), "a number from 0 to 100"),
            ("drift_factor", json!(-0.5), "a number from 0 to 100"),
        ] {
            let err = SchemeSpec::from_json(&json!({"name": "redlock", param: value}), "scheme")
                .unwrap_err();
            assert_eq!(
                err,
                format!("scheme.{param}: expected {expected}, got {value}")
            );
        }
        let err = SchemeSpec::from_json(&json!({"name": "set-nx-px-lua", "tll_ms": 5}), "scheme")
            .unwrap_err();
        assert!(
            err.starts_with("scheme.tll_ms: unknown parameter for scheme set-nx-px-lua"),
            "{err}"
        );
    }
}
