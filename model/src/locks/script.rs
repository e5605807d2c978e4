//! `script`: a user-defined lock — `acquire`, `release` and optionally `renew` Lua scripts given
//! in the scenario, with their KEYS/ARGV templates and a success test for each reply.
//!
//! Source: user-defined (the scenario's scheme object). For trying a variant of a published
//! scheme without writing Rust: everything the built-in single-instance schemes do with one
//! script per step can be written this way.
//!
//! ```json
//! { "name": "script", "ttl_ms": 10000, "retry_delay_ms": 100,
//!   "acquire": { "script": "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])",
//!                "keys": ["{key}"], "args": ["{token}", "{ttl_ms}"],
//!                "success": { "status": "OK" } },
//!   "release": { "script": "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
//!                "keys": ["{key}"], "args": ["{token}"], "success": { "equals": 1 } },
//!   "renew":   { "script": "...", "keys": ["{key}"], "args": ["{token}", "{ttl_ms}"],
//!                "success": { "equals": 1 }, "every_ms": 3333 } }
//! ```
//!
//! - Each step is `EVAL script numkeys keys... args...`. `keys` defaults to `["{key}"]`, `args`
//!   to `["{token}", "{ttl_ms}"]` (acquire, renew) or `["{token}"]` (release).
//! - Placeholders, replaced anywhere inside a key or argument: `{key}` (the `key` parameter),
//!   `{token}` (this acquisition's random 20-byte hex value), `{ttl_ms}`, `{ttl_s}` (ttl_ms / 1000,
//!   rounded up), `{now_ms}` (the client's wall clock, Unix ms, when the step runs), `{client}`
//!   (the client's node name). `{{` and `}}` are literal braces.
//! - `success` is exactly one of `{"equals": 1}` (an integer reply equal to the number, or a
//!   string/status reply equal to the string), `{"status": "OK"}`, `{"not_nil": true}`,
//!   `{"nil": true}`, `{"at_least": n}` (an integer reply ≥ n).
//! - `acquire.fence: true` makes the (integer) reply the grant's fencing token.
//! - Acquire retries every `retry_delay_ms` (default 100) until the workload's timeout; a script
//!   that runs away (stopped at the simulated `lua-time-limit` budget, or out of Lua memory:
//!   `docs/redis.md`) fails the attempt at once with its error, as retrying would do the same
//!   work again.
//! - `renew` (optional) runs every `every_ms` (default ttl/3) in the background from the grant to
//!   the release; a reply that fails its test (the lock is gone) stops it, an error does not.
//!
//! Every script is compiled when the scenario loads; every mistake is an error naming the field
//! (`scheme.acquire.args[1]: unknown placeholder {tokn} ...`).
//!
//! Parameters: `key` (`lock`), `ttl_ms` (10 000), `retry_delay_ms` (100), `acquire`, `release`,
//! `renew`.

use std::rc::Rc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    Family, Grant, Lease, LockEnv, LockScheme, Params, Release, SchemeInfo, TaskGuard, eval,
    not_acquired, random_token, try_until,
};
use crate::redis::script_limits::is_runaway_script_error;
use crate::redis::{Outcome, RedisServer, Reply, ServerConfig};

pub const INFO: SchemeInfo = SchemeInfo {
    id: "script",
    summary: "user-defined: acquire/release/renew Lua scripts from the scenario, KEYS/ARGV templates, reply tests",
    source: "user-defined (the scenario's scheme object)",
    default_ttl_ms: 10_000,
    family: Family::SetNxPx,
    lease: Lease::Ms,
    in_all: false,
    presets: &[],
    build,
};

const PLACEHOLDERS: &[&str] = &["key", "token", "ttl_ms", "ttl_s", "now_ms", "client"];

#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Var(&'static str),
}

/// A key or argument with placeholders.
#[derive(Clone, Debug, PartialEq)]
struct Template(Vec<Piece>);

impl Template {
    fn parse(text: &str, field: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if rest.starts_with("{{") || rest.starts_with("}}") {
                literal.push(c);
                rest = &rest[2..];
            } else if c == '{' {
                let end = rest.find('}').ok_or_else(|| {
                    format!("{field}: unclosed '{{' in \"{text}\" (write {{{{ for a literal brace)")
                })?;
                let name = &rest[1..end];
                let var = PLACEHOLDERS.iter().find(|p| **p == name).ok_or_else(|| {
                    format!(
                        "{field}: unknown placeholder {{{name}}} (known: {})",
                        PLACEHOLDERS
                            .iter()
                            .map(|p| format!("{{{p}}}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Var(var));
                rest = &rest[end + 1..];
            } else if c == '}' {
                return Err(format!(
                    "{field}: unmatched '}}' in \"{text}\" (write }}}} for a literal brace)"
                ));
            } else {
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Template(pieces))
    }

    fn render(&self, vars: &Vars) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Var(v) => vars.get(v),
            })
            .collect()
    }
}

struct Vars<'a> {
    key: &'a str,
    token: &'a str,
    ttl_ms: u64,
    now_ms: i64,
    client: &'a str,
}

impl Vars<'_> {
    fn get(&self, name: &str) -> String {
        match name {
            "key" => self.key.to_string(),
            "token" => self.token.to_string(),
            "ttl_ms" => self.ttl_ms.to_string(),
            "ttl_s" => self.ttl_ms.div_ceil(1000).to_string(),
            "now_ms" => self.now_ms.to_string(),
            _ => self.client.to_string(),
        }
    }
}

/// A reply test.
#[derive(Clone, Debug, PartialEq)]
enum Success {
    EqualsInt(i64),
    EqualsText(String),
    Status(String),
    NotNil,
    Nil,
    AtLeast(i64),
}

impl Success {
    fn parse(value: Option<&Value>, field: &str) -> Result<Success, String> {
        let expected = "one of {\"equals\": 1}, {\"status\": \"OK\"}, {\"not_nil\": true}, {\"nil\": true}, {\"at_least\": 1}";
        let Some(value) = value else {
            return Err(format!("{field}: missing ({expected})"));
        };
        let map = value
            .as_object()
            .filter(|m| m.len() == 1)
            .ok_or_else(|| format!("{field}: expected {expected}, got {value}"))?;
        let (name, arg) = map.iter().next().expect("one entry");
        let bad = || format!("{field}.{name}: expected {expected}, got {value}");
        Ok(match name.as_str() {
            "equals" => match arg {
                Value::Number(n) => Success::EqualsInt(n.as_i64().ok_or_else(bad)?),
                Value::String(s) => Success::EqualsText(s.clone()),
                _ => return Err(bad()),
            },
            "status" => Success::Status(arg.as_str().ok_or_else(bad)?.to_string()),
            "not_nil" if arg == &Value::Bool(true) => Success::NotNil,
            "nil" if arg == &Value::Bool(true) => Success::Nil,
            "at_least" => Success::AtLeast(arg.as_i64().ok_or_else(bad)?),
            _ => return Err(bad()),
        })
    }

    fn test(&self, reply: &Reply) -> bool {
        match (self, reply) {
            (_, Reply::Error(_)) => false,
            (Success::EqualsInt(n), Reply::Integer(i)) => i == n,
            (Success::EqualsText(t), Reply::Bulk(b)) => b == t.as_bytes(),
            (Success::EqualsText(t), Reply::Status(s)) => s == t,
            (Success::Status(t), Reply::Status(s)) => s == t,
            (Success::NotNil, r) => *r != Reply::Nil,
            (Success::Nil, r) => *r == Reply::Nil,
            (Success::AtLeast(n), Reply::Integer(i)) => i >= n,
            _ => false,
        }
    }
}

/// One step: a script, its KEYS and ARGV, its success test.
#[derive(Clone, Debug)]
struct Step {
    script: String,
    keys: Vec<Template>,
    args: Vec<Template>,
    success: Success,
    fence: bool,
    every_ms: Option<u64>,
}

impl Step {
    fn parse(
        value: &Value,
        field: &str,
        default_args: &[&str],
        extra: &[&str],
    ) -> Result<Step, String> {
        let map: &Map<String, Value> = value.as_object().ok_or_else(|| {
            format!("{field}: expected an object with script, keys, args, success; got {value}")
        })?;
        let mut known = vec!["script", "keys", "args", "success"];
        known.extend(extra);
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(format!(
                "{field}.{unknown}: unknown field (known: {})",
                known.join(", ")
            ));
        }
        let script = match map.get("script") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(other) => {
                return Err(format!(
                    "{field}.script: expected Lua source text, got {other}"
                ));
            }
            None => return Err(format!("{field}.script: missing (the Lua source)")),
        };
        compile(&script).map_err(|e| format!("{field}.script: {e}"))?;
        let templates = |name: &str, default: &[&str]| -> Result<Vec<Template>, String> {
            match map.get(name) {
                None => default
                    .iter()
                    .map(|t| Template::parse(t, &format!("{field}.{name}")))
                    .collect(),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let f = format!("{field}.{name}[{i}]");
                        match item {
                            Value::String(s) => Template::parse(s, &f),
                            Value::Number(n) => Template::parse(&n.to_string(), &f),
                            other => Err(format!("{f}: expected a string, got {other}")),
                        }
                    })
                    .collect(),
                Some(other) => Err(format!(
                    "{field}.{name}: expected a list of strings, got {other}"
                )),
            }
        };
        let fence = match map.get("fence") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(format!(
                    "{field}.fence: expected true or false, got {other}"
                ));
            }
        };
        let every_ms = match map.get("every_ms") {
            None => None,
            Some(v) => Some(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                format!("{field}.every_ms: expected a positive integer, got {v}")
            })?),
        };
        Ok(Step {
            script,
            keys: templates("keys", &["{key}"])?,
            args: templates("args", default_args)?,
            success: Success::parse(map.get("success"), &format!("{field}.success"))?,
            fence,
            every_ms,
        })
    }

    /// Runs the step: the reply, or why there is none.
    async fn run(&self, env: &Rc<dyn LockEnv>, vars: &Vars<'_>) -> Result<Reply, String> {
        let keys: Vec<String> = self.keys.iter().map(|t| t.render(vars)).collect();
        let args: Vec<String> = self.args.iter().map(|t| t.render(vars)).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        eval(env, 0, &self.script, &keys, &args)
            .await
            .map_err(|e| e.to_string())
    }
}

/// Compiles a script as Redis would on `SCRIPT LOAD`, for its error text.
fn compile(script: &str) -> Result<(), String> {
    let mut server = RedisServer::new(ServerConfig::default());
    let client = server.connect();
    let argv = vec![
        b"SCRIPT".to_vec(),
        b"LOAD".to_vec(),
        script.as_bytes().to_vec(),
    ];
    match server.execute(client, 0, &argv) {
        Outcome::Reply(Reply::Error(e)) => Err(String::from_utf8_lossy(&e).into_owned()),
        _ => Ok(()),
    }
}

fn build(params: &mut Params) -> Result<Box<dyn LockScheme>, String> {
    let field = params.field().to_string();
    let key = params.key()?;
    let ttl_ms = params.positive("ttl_ms", INFO.default_ttl_ms)?;
    let retry_delay_ms = params.positive("retry_delay_ms", 100)?;
    // All three are read before any is checked, so that every one is declared
    // (`declared_params`) even when an earlier one is missing.
    let [acquire, release, renew] = ["acquire", "release", "renew"].map(|name| params.value(name));
    let step = |value: Option<&Value>, name: &str, args: &[&str], extra: &[&str]| {
        value
            .map(|v| Step::parse(v, &format!("{field}.{name}"), args, extra))
            .transpose()
    };
    let acquire =
        step(acquire, "acquire", &["{token}", "{ttl_ms}"], &["fence"])?.ok_or_else(|| {
            format!("{field}.acquire: missing (an object with script, keys, args, success)")
        })?;
    let release = step(release, "release", &["{token}"], &[])?.ok_or_else(|| {
        format!("{field}.release: missing (an object with script, keys, args, success)")
    })?;
    let renew = step(renew, "renew", &["{token}", "{ttl_ms}"], &["every_ms"])?;
    Ok(Box::new(Script {
        key,
        ttl_ms,
        retry_delay_ms,
        acquire,
        release,
        renew,
        held: None,
    }))
}

pub struct Script {
    key: String,
    ttl_ms: u64,
    retry_delay_ms: u64,
    acquire: Step,
    release: Step,
    renew: Option<Step>,
    held: Option<(String, Option<Box<dyn TaskGuard>>)>,
}

#[async_trait(?Send)]
impl LockScheme for Script {
    async fn acquire(&mut self, env: &Rc<dyn LockEnv>, timeout_ms: u64) -> Result<Grant, String> {
        let token = random_token(env.as_ref());
        env.register_token(&token);
        let (key, ttl_ms, step) = (self.key.clone(), self.ttl_ms, self.acquire.clone());
        let grant = try_until(env, timeout_ms, self.retry_delay_ms, async || {
            let vars = Vars {
                key: &key,
                token: &token,
                ttl_ms,
                now_ms: env.wall_ms(),
                client: env.name(),
            };
            let Ok(reply) = step.run(env, &vars).await else {
                return Ok(None);
            };
            if let Reply::Error(e) = &reply
                && is_runaway_script_error(e)
            {
                return Err(format!(
                    "the acquire script runs away: {}",
                    String::from_utf8_lossy(e)
                ));
            }
            if !step.success.test(&reply) {
                return Ok(None);
            }
            let fence = if step.fence {
                let Some(fence) = reply.as_integer().filter(|f| *f >= 0) else {
                    return Ok(None);
                };
                Some(fence as u64)
            } else {
                None
            };
            Ok(Some(Grant {
                token: token.clone(),
                fence,
            }))
        })
        .await?;
        let renewal = self.renew.clone().map(|renew| {
            let every = renew.every_ms.unwrap_or((ttl_ms / 3).max(1));
            let (task_env, key, token) = (env.clone(), key.clone(), grant.token.clone());
            env.spawn(Box::pin(async move {
                loop {
                    task_env.sleep_ms(every).await;
                    let vars = Vars {
                        key: &key,
                        token: &token,
                        ttl_ms,
                        now_ms: task_env.wall_ms(),
                        client: task_env.name(),
                    };
                    if let Ok(reply) = renew.run(&task_env, &vars).await
                        && !renew.success.test(&reply)
                    {
                        return;
                    }
                }
            }))
        });
        self.held = Some((grant.token.clone(), renewal));
        Ok(grant)
    }

    async fn release(&mut self, env: &Rc<dyn LockEnv>) -> Release {
        let Some((token, renewal)) = self.held.take() else {
            return not_acquired();
        };
        if let Some(task) = renewal {
            task.cancel();
        }
        let vars = Vars {
            key: &self.key,
            token: &token,
            ttl_ms: self.ttl_ms,
            now_ms: env.wall_ms(),
            client: env.name(),
        };
        match self.release.run(env, &vars).await {
            Ok(reply) if self.release.success.test(&reply) => Release {
                ok: true,
                detail: format!("released ({})", crate::history::render_reply(&reply)),
            },
            Ok(reply) => Release {
                ok: false,
                detail: format!(
                    "release script answered {}",
                    crate::history::render_reply(&reply)
                ),
            },
            Err(e) => Release {
                ok: false,
                detail: e,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::locks::SchemeSpec;
    use crate::locks::testing::{DirectEnv, Shared, block_on, pass};
    use crate::redis::Reply;

    pub fn set_nx_px_lua_as_a_script() -> Value {
        json!({
            "name": "script", "ttl_ms": 900,
            "acquire": { "script": "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])",
                         "success": { "status": "OK" } },
            "release": { "script": "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
                         "success": { "equals": 1 } },
            "renew": { "script": "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end",
                       "success": { "equals": 1 } }
        })
    }

    #[test]
    fn a_scripted_lock_excludes_renews_and_releases() {
        let shared = Shared::new();
        let spec = SchemeSpec::from_json(&set_nx_px_lua_as_a_script(), "scheme").unwrap();
        let (a, b) = (
            DirectEnv::new(&shared, "a", 1),
            DirectEnv::new(&shared, "b", 2),
        );
        let (mut la, mut lb) = (spec.build("s").unwrap(), spec.build("s").unwrap());
        block_on(la.acquire(&a, 100)).unwrap();
        assert!(
            block_on(lb.acquire(&b, 3000)).is_err(),
            "renewed past its 900 ms"
        );
        assert!(block_on(la.release(&a)).ok);
        pass(&shared, 10);
        assert_eq!(shared.running_tasks(), 0);
        assert!(block_on(lb.acquire(&b, 100)).is_ok());
    }

    #[test]
    fn placeholders_and_fencing() {
        let shared = Shared::new();
        let spec = SchemeSpec::from_json(
            &json!({
                "name": "script", "ttl_ms": 1500, "key": "k",
                "acquire": { "script": "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then redis.call('set', KEYS[2], ARGV[3]) return redis.call('incr', 'fence') end return nil",
                             "keys": ["{key}", "{key}:at:{{x}}"], "args": ["{token}", "{ttl_s}", "{client}@{now_ms}"],
                             "success": { "not_nil": true }, "fence": true },
                "release": { "script": "return redis.call('del', KEYS[1])", "args": [],
                             "success": { "at_least": 0 } }
            }),
            "scheme",
        )
        .unwrap();
        let a = DirectEnv::new(&shared, "a", 1);
        let grant = block_on(spec.build("s").unwrap().acquire(&a, 100)).unwrap();
        assert_eq!(grant.fence, Some(1));
        assert_eq!(shared.command(&["TTL", "k"]), Reply::Integer(2));
        assert_eq!(
            shared.command(&["GET", "k:at:{x}"]),
            Reply::bulk(format!("a@{}", crate::locks::testing::EPOCH_MS))
        );
    }

    /// A script past the server's budget fails the attempt after one run: retrying it until the
    /// acquire timeout would pay the whole budget every `retry_delay_ms`.
    #[test]
    fn a_script_the_server_stopped_fails_the_attempt_at_once() {
        let shared = Shared::new();
        let mut spec = set_nx_px_lua_as_a_script();
        spec["acquire"]["script"] = json!("while true do end");
        let spec = SchemeSpec::from_json(&spec, "scheme").unwrap();
        let env = std::rc::Rc::new(DirectEnv::concrete(&shared, "a", 1));
        let dyn_env: std::rc::Rc<dyn crate::locks::LockEnv> = env.clone();
        let err = block_on(spec.build("s").unwrap().acquire(&dyn_env, 60_000)).unwrap_err();
        assert!(
            err.starts_with(
                "the acquire script runs away: ERR Script killed by user with SCRIPT KILL..."
            ),
            "{err}"
        );
        assert_eq!(env.sent.borrow().len(), 1, "{:?}", env.sent.borrow());
    }

    #[test]
    fn a_runaway_acquire_script_fails_the_attempt_with_its_error() {
        let shared = Shared::new();
        for script in [
            "while true do local s = string.rep('x', 100000) end",
            "local s = 'x' for i = 1, 40 do s = s .. s end return s",
        ] {
            let mut scheme = set_nx_px_lua_as_a_script();
            scheme["acquire"]["script"] = json!(script);
            let spec = SchemeSpec::from_json(&scheme, "scheme").unwrap();
            let a = DirectEnv::new(&shared, "a", 1);
            let error = block_on(spec.build("s").unwrap().acquire(&a, 60_000)).unwrap_err();
            assert!(
                error.starts_with("the acquire script runs away: ERR "),
                "{error}"
            );
        }
        assert_eq!(shared.command(&["PING"]), Reply::Status("PONG".into()));
    }

    #[test]
    fn mistakes_are_errors_naming_the_field() {
        let err = |v: Value| SchemeSpec::from_json(&v, "scheme").unwrap_err();
        let mut s = set_nx_px_lua_as_a_script();
        s["acquire"]["args"] = json!(["{tokn}"]);
        let e = err(s);
        assert!(
            e.starts_with("scheme.acquire.args[0]: unknown placeholder {tokn}"),
            "{e}"
        );
        let mut s = set_nx_px_lua_as_a_script();
        s["release"]["success"] = json!({"equal": 1});
        let e = err(s);
        assert!(
            e.starts_with("scheme.release.success.equal: expected one of"),
            "{e}"
        );
        let mut s = set_nx_px_lua_as_a_script();
        s["renew"]["script"] = json!("return (");
        let e = err(s);
        assert!(
            e.starts_with("scheme.renew.script: ERR Error compiling script"),
            "{e}"
        );
        let mut s = set_nx_px_lua_as_a_script();
        s.as_object_mut().unwrap().remove("release");
        assert!(err(s).starts_with("scheme.release: missing"));
        let mut s = set_nx_px_lua_as_a_script();
        s["acquire"]["sucess"] = json!({"nil": true});
        assert!(err(s).starts_with("scheme.acquire.sucess: unknown field"));
        let mut s = set_nx_px_lua_as_a_script();
        s["renew"]["every_ms"] = json!(0);
        assert!(err(s).starts_with("scheme.renew.every_ms: expected a positive integer"));
    }
}
