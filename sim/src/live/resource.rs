//! The resource as a RESP service for real clients: `LOCKSIM.READ [fence]` answers the counter,
//! `LOCKSIM.WRITE value [fence]` answers `OK` or the resource's error (`STALE token …` when
//! fenced), so a critical section is two calls on any Redis client (`execute_command`,
//! `sendCommand`, `Do`, `call`).
//!
//! Each real connection is a simulated connection from the client's node to the simulated
//! resource (`nodes::resource`), translated call by call: `READ client fence` and `WRITE
//! client value based_on_version fence`, the version being the one this client last read. So
//! lost updates and stale fences are judged exactly as in the simulation, in the order the
//! resource saw them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;
use model::redis::{HelloFields, Protocol, Reply, RequestParser, hello_reply};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::nodes::resource::RESOURCE_PORT;
use crate::nodes::resp::RespConn;
use crate::world::World;

/// The simulated side of one real connection to the resource, on the client's node.
pub async fn relay(
    world: Arc<World>,
    client: String,
    last_version: Arc<AtomicU64>,
    mut from_real: UnboundedReceiver<Vec<u8>>,
    to_real: UnboundedSender<Vec<u8>>,
) {
    let Ok(mut conn) = RespConn::connect(&world, &client, "resource", RESOURCE_PORT).await else {
        return;
    };
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut protocol = Protocol::Resp2;
    while let Some(bytes) = from_real.recv().await {
        buf.extend_from_slice(&bytes);
        loop {
            let argv = match parser.parse(&mut buf) {
                Ok(Some(argv)) => argv,
                Ok(None) => break,
                Err(_) => {
                    let _ = to_real.send(Reply::error("ERR Protocol error").encode());
                    return;
                }
            };
            let Some(reply) = answer(&mut conn, &client, &last_version, &argv).await else {
                return;
            };
            if argv[0].eq_ignore_ascii_case(b"HELLO")
                && argv.get(1).map(Vec::as_slice) == Some(b"3")
            {
                protocol = Protocol::Resp3;
            }
            if to_real.send(reply.encode_for(protocol)).is_err() {
                return;
            }
        }
    }
}

/// One request of a real client; `None` when the simulated connection broke.
async fn answer(
    conn: &mut RespConn,
    client: &str,
    last_version: &AtomicU64,
    argv: &[Vec<u8>],
) -> Option<Reply> {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
    let arg = |i: usize| argv.get(i).map(|a| String::from_utf8_lossy(a).into_owned());
    match (name.as_str(), argv.len()) {
        ("LOCKSIM.READ", 1 | 2) => {
            let fence = arg(1).unwrap_or_else(|| "-".into());
            let words = ["READ".to_string(), client.to_string(), fence];
            match call(conn, &words).await? {
                Reply::Array(fields) => {
                    let value = fields.first().and_then(Reply::as_integer)?;
                    let version = fields.get(1).and_then(Reply::as_integer)?;
                    last_version.store(version as u64, Ordering::Relaxed);
                    Some(Reply::Integer(value))
                }
                other => Some(other),
            }
        }
        ("LOCKSIM.WRITE", 2 | 3) => {
            let value = arg(1).unwrap_or_default();
            if value.parse::<i64>().is_err() {
                return Some(Reply::error(
                    "ERR LOCKSIM.WRITE value is not an integer or out of range",
                ));
            }
            let fence = arg(2).unwrap_or_else(|| "-".into());
            let words = [
                "WRITE".to_string(),
                client.to_string(),
                value,
                last_version.load(Ordering::Relaxed).to_string(),
                fence,
            ];
            match call(conn, &words).await? {
                Reply::Integer(_) => Some(Reply::ok()),
                other => Some(other),
            }
        }
        ("LOCKSIM.READ" | "LOCKSIM.WRITE", _) => Some(Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            name.to_ascii_lowercase()
        ))),
        // What client libraries send on connecting or to check a connection (redis-py 8 opens
        // with HELLO 3).
        ("HELLO", _) => Some(hello(arg(1).as_deref())),
        ("PING", _) => Some(Reply::Status("PONG".into())),
        ("CLIENT" | "SELECT" | "AUTH", _) => Some(Reply::ok()),
        // ioredis's ready check reads `loading:0` from INFO.
        ("INFO", _) => Some(Reply::bulk("# Server\r\nloading:0\r\n")),
        _ => Some(Reply::error(format!(
            "ERR unknown command '{}': the resource knows LOCKSIM.READ [fence] and LOCKSIM.WRITE value [fence]",
            String::from_utf8_lossy(&argv[0])
        ))),
    }
}

/// `HELLO [protover]` as Redis 7.0 answers it (`helloCommand`): the server's fields as a map,
/// which the caller encodes in the protocol asked for. The resource's own replies (integers,
/// status, errors, bulk strings) are the same in RESP2 and RESP3.
fn hello(protover: Option<&str>) -> Reply {
    let proto = match protover {
        None => 2,
        Some("2") => 2,
        Some("3") => 3,
        Some(_) => return Reply::error("NOPROTO unsupported protocol version"),
    };
    hello_reply(&HelloFields {
        server: "locksim-resource",
        proto,
        id: 1,
        mode: "standalone",
        role: "master",
    })
}

async fn call(conn: &mut RespConn, words: &[String]) -> Option<Reply> {
    let argv: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    conn.call(&argv).await.ok()
}
