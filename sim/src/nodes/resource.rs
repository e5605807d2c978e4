//! The protected resource: a counter on its own node (the seeds' `goods:001` stock).
//!
//! It speaks RESP with two commands: `READ client fence` → `[value, version]` and
//! `WRITE client value based_on_version fence` → `version`. It records every access in the
//! history, marking a write computed from an out-of-date read as a lost update. With
//! `resource.fencing` it is Kleppmann's fencing storage: any access with a token lower than the
//! highest it has seen is refused.

use model::marks::{Mark, mark};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;
use model::history::EventKind;
use model::redis::{Reply, RequestParser};

use crate::world::World;
use crate::world::net::socket::{NetConn, NetListener};

pub const RESOURCE_PORT: u16 = 7000;
/// The stock the counter starts with.
pub const INITIAL_VALUE: i64 = 1_000_000;

struct Counter {
    value: i64,
    version: u64,
    max_fence: u64,
}

pub async fn resource_node(world: Arc<World>) {
    let counter = Rc::new(RefCell::new(Counter {
        value: INITIAL_VALUE,
        version: 0,
        max_fence: 0,
    }));
    let listener = NetListener::bind(&world, "resource", RESOURCE_PORT);
    loop {
        let (conn, client) = listener.accept().await;
        madsim::task::spawn_local(serve(world.clone(), counter.clone(), conn, client));
    }
}

async fn serve(
    world: Arc<World>,
    counter: Rc<RefCell<Counter>>,
    mut conn: NetConn,
    client: String,
) {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(256);
    loop {
        match conn.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut out = Vec::new();
        while let Ok(Some(argv)) = parser.parse(&mut buf) {
            handle(&world, &mut counter.borrow_mut(), &client, &argv).encode_into(&mut out);
        }
        if conn.send(out).is_err() {
            return;
        }
    }
}

fn parse_fence(arg: &[u8]) -> Option<u64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

fn handle(world: &World, c: &mut Counter, connection: &str, argv: &[Vec<u8>]) -> Reply {
    // The accessor names itself (`READ client-1 ...`): a worker thread of a client running
    // several says `client-1/t2`, which its connection's node alone cannot tell.
    let named = argv.get(1).map(|a| String::from_utf8_lossy(a).into_owned());
    let client = named.as_deref().unwrap_or(connection);
    let fence = argv.last().and_then(|a| parse_fence(a));
    let op = if argv[0] == b"READ" { "read" } else { "write" };
    if world.scenario.resource.fencing
        && let Some(fence) = fence
    {
        if fence < c.max_fence {
            mark(Mark::ResourceStaleFenceRejected);
            world.record(
                "resource",
                EventKind::ResourceRejected {
                    client: client.into(),
                    op: op.into(),
                    fence,
                    max_fence: c.max_fence,
                },
            );
            return Reply::error(format!("STALE token {fence} < {}", c.max_fence));
        }
        c.max_fence = fence;
    }
    match (op, argv.len()) {
        ("read", 3) => {
            world.record(
                "resource",
                EventKind::ResourceRead {
                    client: client.into(),
                    value: c.value,
                    version: c.version,
                    fence,
                },
            );
            Reply::Array(vec![
                Reply::Integer(c.value),
                Reply::Integer(c.version as i64),
            ])
        }
        ("write", 5) => {
            let value = std::str::from_utf8(&argv[2])
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(c.value);
            let based_on_version = std::str::from_utf8(&argv[3])
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let lost_update = based_on_version != c.version;
            if lost_update {
                mark(Mark::ResourceLostUpdate);
            }
            c.value = value;
            c.version += 1;
            world.record(
                "resource",
                EventKind::ResourceWrite {
                    client: client.into(),
                    value,
                    based_on_version,
                    version: c.version,
                    fence,
                    lost_update,
                },
            );
            Reply::Integer(c.version as i64)
        }
        _ => Reply::error("ERR unknown resource command"),
    }
}
