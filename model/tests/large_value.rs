//! A large SET through the model (issue 31): with nothing reading the propagated effects
//! (`locksim serve`: no replicas, no AOF) a value given to the server is stored as it is, not
//! copied, so a 500 MB SET costs 500 MB as in redis-server; WATCH and MONITOR still see the
//! command. Memory is counted by this test binary's allocator (one test per binary keeps other
//! threads' allocations out of the count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use model::redis::{Outcome, RedisServer, Reply, ServerConfig};

/// The system allocator, counting the bytes in use and their peak.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to `System`, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = IN_USE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(now, Ordering::SeqCst);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const NOW_US: i64 = 1_700_000_000_000_000;
const VALUE_BYTES: usize = 64 << 20;

fn args(list: &[&[u8]]) -> Vec<Vec<u8>> {
    list.iter().map(|a| a.to_vec()).collect()
}

fn reply(outcome: Outcome) -> Reply {
    outcome.into_reply().expect("a reply")
}

fn serve_like() -> RedisServer {
    RedisServer::new(ServerConfig {
        propagates_effects: false,
        ..ServerConfig::default()
    })
}

/// The most memory in use while `run` ran, above what was in use when it started.
fn peak_during(run: impl FnOnce()) -> usize {
    let start = IN_USE.load(Ordering::SeqCst);
    PEAK.store(start, Ordering::SeqCst);
    run();
    PEAK.load(Ordering::SeqCst) - start
}

#[test]
fn a_large_set_is_stored_without_a_copy_and_still_seen_by_watch_and_monitor() {
    // Nothing reads the command afterwards: the value moves into the keyspace.
    let mut server = serve_like();
    let client = server.connect();
    let value = vec![b'v'; VALUE_BYTES];
    let argv = vec![b"SET".to_vec(), b"big".to_vec(), value];
    let peak = peak_during(|| {
        let outcome = server.execute_owned_at_us(client, NOW_US, argv);
        assert_eq!(reply(outcome), Reply::ok());
    });
    assert!(
        peak < VALUE_BYTES / 4,
        "a SET of {VALUE_BYTES} bytes allocated {peak} bytes more (a copy of the value)"
    );
    let strlen = server.execute_at_us(client, NOW_US, &args(&[b"STRLEN", b"big"]));
    assert_eq!(reply(strlen), Reply::Integer(VALUE_BYTES as i64));
    assert!(server.take_propagated().is_empty(), "nothing is propagated");

    // The same with EX and GET (the effect would be `SET key value PXAT ms`).
    let argv = vec![
        b"SET".to_vec(),
        b"big".to_vec(),
        vec![b'w'; VALUE_BYTES],
        b"EX".to_vec(),
        b"100".to_vec(),
    ];
    let peak = peak_during(|| {
        let outcome = server.execute_owned_at_us(client, NOW_US, argv);
        assert_eq!(reply(outcome), Reply::ok());
    });
    assert!(
        peak < VALUE_BYTES / 4,
        "SET ... EX allocated {peak} bytes more"
    );

    // A WATCHer of the key still sees it written.
    let watcher = server.connect();
    reply(server.execute_at_us(watcher, NOW_US, &args(&[b"WATCH", b"big"])));
    reply(server.execute_at_us(watcher, NOW_US, &args(&[b"MULTI"])));
    reply(server.execute_at_us(watcher, NOW_US, &args(&[b"GET", b"big"])));
    let argv = args(&[b"SET", b"big", b"small"]);
    assert_eq!(
        reply(server.execute_owned_at_us(client, NOW_US, argv)),
        Reply::ok()
    );
    let exec = server.execute_at_us(watcher, NOW_US, &args(&[b"EXEC"]));
    assert_eq!(reply(exec), Reply::NilArray, "the watched key was written");

    // A MONITOR client reads the command after it ran: it gets the whole value.
    let monitor = server.connect();
    reply(server.execute_at_us(monitor, NOW_US, &args(&[b"MONITOR"])));
    let argv = args(&[b"SET", b"k", b"seen by monitor"]);
    assert_eq!(
        reply(server.execute_owned_at_us(client, NOW_US, argv)),
        Reply::ok()
    );
    let lines: Vec<Reply> = server
        .take_pushes()
        .into_iter()
        .filter(|(to, _)| *to == monitor)
        .map(|(_, line)| line)
        .collect();
    assert!(
        matches!(lines.as_slice(), [Reply::Status(line)] if line.ends_with("\"SET\" \"k\" \"seen by monitor\"")),
        "{lines:?}"
    );
    let get = server.execute_at_us(client, NOW_US, &args(&[b"GET", b"k"]));
    assert_eq!(reply(get), Reply::Bulk(b"seen by monitor".to_vec()));

    // With replicas (the simulation), the value is stored and propagated whole.
    let mut replicated = RedisServer::new(ServerConfig::default());
    let client = replicated.connect();
    let argv = args(&[b"SET", b"k", b"v", b"PX", b"1000"]);
    assert_eq!(
        reply(replicated.execute_owned_at_us(client, NOW_US, argv)),
        Reply::ok()
    );
    let propagated = replicated.take_propagated();
    let expected_at = (NOW_US / 1000 + 1000).to_string();
    assert_eq!(
        propagated.last(),
        Some(&args(&[
            b"SET",
            b"k",
            b"v",
            b"PXAT",
            expected_at.as_bytes()
        ]))
    );
}
