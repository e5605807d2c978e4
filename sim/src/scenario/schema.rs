//! The JSON Schema of scenario files (`docs/scenario.schema.json`, `locksim schema`), generated
//! from the types that load them (schemars), so that it cannot drift from the loader: the
//! structs of `scenario` derive it, and the parts the loader reads as raw JSON and validates
//! by hand — the scheme, the nemesis, seed ranges — are described here from the same tables
//! the validation uses (`model::locks::SCHEMES` and `declared_params`, `nemesis::KINDS` and
//! `kind_fields`). Editors complete and check a file that names it in `"$schema"`.

use std::borrow::Cow;

use model::locks::{ParamKind, SCHEMES, declared_params};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value, json};

use crate::scenario::faults::{FAULT_KINDS, TRIGGER_EVENTS, placeholder};
use crate::scenario::nemesis::{KINDS, NODE_GROUPS, kind_fields};
use crate::scenario::range::MsRange;

/// The schema of a scenario file, as `locksim schema` prints it.
pub fn scenario_schema() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<super::ScenarioFile>();
    schema.to_value()
}

fn enum_of(names: impl IntoIterator<Item = impl Into<String>>) -> Value {
    Value::Array(names.into_iter().map(|n| Value::String(n.into())).collect())
}

/// `scheme` (and each item of a `schemes` list): an id, or `{ "name": id, ...its parameters }`.
pub struct SchemeSchema;

impl JsonSchema for SchemeSchema {
    fn schema_name() -> Cow<'static, str> {
        "Scheme".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let ids = enum_of(SCHEMES.iter().map(|s| s.id));
        let objects: Vec<Value> = SCHEMES
            .iter()
            .map(|info| {
                let mut properties = Map::new();
                properties.insert(
                    "name".into(),
                    json!({ "const": info.id, "description": info.summary }),
                );
                for (name, kind) in declared_params(info.id).unwrap_or_default() {
                    properties.insert(name, param_schema(&kind));
                }
                json!({
                    "type": "object",
                    "description": format!("{} — {}", info.summary, info.source),
                    "properties": properties,
                    "required": ["name"],
                    "additionalProperties": false
                })
            })
            .collect();
        json_schema!({
            "description": "A lock scheme: its id, or an object with `name` (the id) and its parameters (docs/schemes.md).",
            "anyOf": [
                { "type": "string", "enum": ids },
                { "type": "object", "oneOf": objects }
            ]
        })
    }
}

/// `schemes`: a list of schemes, or `"all"` (every row of `locksim schemes` but `script`).
pub struct SchemesSchema;

impl JsonSchema for SchemesSchema {
    fn schema_name() -> Cow<'static, str> {
        "Schemes".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let scheme = generator.subschema_for::<SchemeSchema>().to_value();
        json_schema!({
            "description": "Several schemes, the scenario running once per scheme (rows of `compare`): a list, or \"all\" for every row of `locksim schemes` but `script` (a column of the comparison matrix).",
            "anyOf": [
                { "const": "all" },
                { "type": "array", "items": scheme, "minItems": 1 }
            ]
        })
    }
}

fn param_schema(kind: &ParamKind) -> Value {
    match kind {
        ParamKind::Integer { min, max, default } => {
            json!({ "type": "integer", "minimum": min, "maximum": max, "default": default })
        }
        ParamKind::Number { max, default } => {
            json!({ "type": "number", "minimum": 0, "maximum": max, "default": default })
        }
        ParamKind::Bool { default } => json!({ "type": "boolean", "default": default }),
        ParamKind::String { default } => json!({ "type": "string", "default": default }),
        ParamKind::Choice { choices, default } => {
            json!({ "type": "string", "enum": choices, "default": default })
        }
        ParamKind::Any => json!({}),
    }
}

/// `nemesis`: one object per fault kind it draws, plus `heal_at_ms` and `swarm`.
pub struct NemesisSchema;

impl JsonSchema for NemesisSchema {
    fn schema_name() -> Cow<'static, str> {
        "Nemesis".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let ms = generator.subschema_for::<MsRange>().to_value();
        let pair = |item: Value| json!({ "anyOf": [item.clone(), { "type": "array", "items": item, "minItems": 2, "maxItems": 2 }] });
        let field = |name: &str| match name {
            "every_ms" => ms.clone(),
            "duration_ms" | "extra_ms" => ms.clone(),
            "nodes" => json!({
                "type": "array",
                "items": { "anyOf": [node_name(), { "enum": enum_of(NODE_GROUPS.iter().copied()) }] }
            }),
            "delta_ms" => pair(json!({ "type": "integer" })),
            "rate" => pair(json!({ "type": "number", "exclusiveMinimum": 0, "maximum": 100 })),
            other => unreachable!("nemesis field {other}"),
        };
        let mut properties = Map::new();
        for kind in KINDS {
            let (allowed, required) = kind_fields(kind);
            let fields: Map<String, Value> =
                allowed.iter().map(|f| (f.to_string(), field(f))).collect();
            properties.insert(
                kind.to_string(),
                json!({
                    "type": "object",
                    "properties": fields,
                    "required": required,
                    "additionalProperties": false
                }),
            );
        }
        properties.insert(
            "heal_at_ms".into(),
            json!({ "type": "integer", "minimum": 0, "description": "When the nemesis heals everything and stops (default: two liveness windows before the end)." }),
        );
        properties.insert(
            "swarm".into(),
            json!({ "type": "boolean", "default": true, "description": "Each seed enables a random non-empty subset of the kinds (swarm testing)." }),
        );
        json_schema!({
            "description": "Random faults drawn from the seed: each listed kind is a process that waits `every_ms`, injects one fault on a node drawn from `nodes`, keeps it `duration_ms`.",
            "type": "object",
            "properties": properties,
            "minProperties": 1,
            "additionalProperties": false
        })
    }
}

/// `seeds`: `"A..B"` (both ends included) or one seed.
pub fn seeds_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The seeds check, sweep and compare use: \"A..B\", both ends included, or one seed.",
        "type": ["string", "null"],
        "pattern": "^\\s*[0-9]+\\s*(\\.\\.=?\\s*[0-9]+\\s*)?$"
    })
}

/// `faults[].kind`.
pub fn fault_kind_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": enum_of(FAULT_KINDS.iter().copied()) })
}

/// `faults[].on.event`.
pub fn trigger_event_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": enum_of(TRIGGER_EVENTS.iter().copied()) })
}

/// A node name as the scenario spells them (`redis-1`, `redis-1-replica-1`, `sentinel-2`,
/// `client-3`, `resource`).
fn node_name() -> Value {
    json!({ "type": "string", "pattern": "^[a-z][a-z0-9-]*$" })
}

/// `faults[].node`, `.from`, `.to`: a node, or a placeholder for one resolved when the fault
/// fires (`faults::placeholder`).
pub fn fault_node_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A node of the scenario, or a placeholder resolved when the fault fires: {holder} (the client whose event fired the trigger), {peer} (the first other client), {holder_master} (the last master holding the holder's write).",
        "anyOf": [node_name(), { "enum": enum_of(placeholder::SINGLE.iter().copied()) }]
    })
}

/// `faults[].groups`: lists of nodes or placeholders, group placeholders included.
pub fn partition_groups_schema(_: &mut SchemaGenerator) -> Schema {
    let placeholders = placeholder::SINGLE
        .iter()
        .chain(placeholder::GROUP)
        .copied();
    json_schema!({
        "description": "The sides of the partition: nodes, or placeholders: {holder}, {peer}, {holder_master}, {holder_masters} (every master holding the holder's write), {rest} (every node the other groups do not name), {masters}, {first_majority} and {last_majority} (two bare majorities sharing one master).",
        "type": "array",
        "items": {
            "type": "array",
            "items": { "anyOf": [node_name(), { "enum": enum_of(placeholders) }] }
        }
    })
}

/// `topology.appendfsync`.
pub fn appendfsync_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": ["off", "no", "everysec", "always"], "default": "off" })
}

/// `topology.ttl_propagation`.
pub fn ttl_propagation_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": ["absolute", "relative"], "default": "absolute" })
}

impl JsonSchema for MsRange {
    fn schema_name() -> Cow<'static, str> {
        "MsRange".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Milliseconds: [min, max] (inclusive), or one number for a fixed value.",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "array", "items": { "type": "integer", "minimum": 0 }, "minItems": 2, "maxItems": 2 }
            ]
        })
    }
}
