//! COMMAND INFO and COMMAND DOCS of the implemented commands, recorded from redis-server 7.0.15
//! by `scripts/gen-command-docs.py` into `docs.json` (RESP3 replies as tagged trees). A
//! container's subcommands are the implemented ones, in this server's table order (Redis: its
//! dict's order, which changes from process to process).

use std::sync::OnceLock;

use serde_json::Value;

use crate::redis::reply::Reply;

fn recorded() -> &'static Value {
    static DOCS: OnceLock<Value> = OnceLock::new();
    DOCS.get_or_init(|| serde_json::from_str(include_str!("docs.json")).unwrap_or(Value::Null))
}

/// A recorded tree as a reply.
fn to_reply(tree: &Value) -> Reply {
    let items = |v: &Value| -> Vec<Reply> {
        v.as_array()
            .map(|a| a.iter().map(to_reply).collect())
            .unwrap_or_default()
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().as_bytes().to_vec();
    match tree["t"].as_str() {
        Some("status") => Reply::Status(tree["v"].as_str().unwrap_or_default().to_string()),
        Some("int") => Reply::Integer(tree["v"].as_i64().unwrap_or(0)),
        Some("bulk") => Reply::Bulk(text(&tree["v"])),
        Some("arr") => Reply::Array(items(&tree["v"])),
        Some("set") => Reply::Set(items(&tree["v"])),
        Some("map") => Reply::Map(
            tree["v"]
                .as_array()
                .map(|pairs| {
                    pairs
                        .iter()
                        .map(|p| (to_reply(&p[0]), to_reply(&p[1])))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => Reply::Nil,
    }
}

/// The implemented subcommands of a container, in table order.
fn subcommands(name: &str) -> Vec<&'static str> {
    super::all()
        .find(|c| c.full_name == name)
        .map(|c| c.subcommands.iter().map(|s| s.full_name).collect())
        .unwrap_or_default()
}

/// `addReplyCommandInfo` of an implemented command (`get`, `client`, `client|list`).
pub fn command_info(name: &str) -> Option<Reply> {
    let tree = recorded()["info"].get(name)?;
    let mut reply = to_reply(tree);
    let subs = subcommands(name);
    if let Reply::Array(fields) = &mut reply
        && let Some(Reply::Array(_)) = fields.get(9)
    {
        fields[9] = Reply::Array(subs.iter().filter_map(|s| command_info(s)).collect());
    }
    Some(reply)
}

/// `addReplyCommandDocs` of an implemented command.
pub fn command_docs(name: &str) -> Option<Reply> {
    let tree = recorded()["docs"].get(name)?;
    let mut reply = to_reply(tree);
    let subs = subcommands(name);
    if let Reply::Map(fields) = &mut reply {
        for (key, value) in fields.iter_mut() {
            if key.as_bulk() == Some(b"subcommands") {
                *value = Reply::Map(
                    subs.iter()
                        .filter_map(|s| command_docs(s).map(|d| (Reply::bulk(s), d)))
                        .collect(),
                );
            }
        }
    }
    Some(reply)
}

/// Whether COMMAND INFO lists `flag` (`readonly`, `write`, ...) among a command's flags.
pub fn has_flag(name: &str, flag: &str) -> bool {
    let Some(tree) = recorded()["info"].get(name) else {
        return false;
    };
    tree["v"][2]["v"]
        .as_array()
        .is_some_and(|flags| flags.iter().any(|f| f["v"].as_str() == Some(flag)))
}

/// Whether a command belongs to an ACL category (`@read` style name without the `@`).
pub fn in_category(name: &str, category: &str) -> bool {
    let Some(Reply::Array(fields)) = command_info(name) else {
        return false;
    };
    let wanted = format!("@{category}");
    match fields.get(6) {
        Some(Reply::Set(cats) | Reply::Array(cats)) => cats
            .iter()
            .any(|c| matches!(c, Reply::Status(s) if *s == wanted)),
        _ => false,
    }
}
