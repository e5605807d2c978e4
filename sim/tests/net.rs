//! The simulated network (`world::net::socket`) on its own: what a message costs the process
//! that reads it (one task poll, issue 32), and what it promises — order, latency, bytes held
//! across a cut link, a paused reader's buffer, FIN after the data, RST.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use locksim::runner::world_with_network;
use locksim::scenario::Scenario;
use locksim::world::World;
use locksim::world::net::socket::{NetConn, NetListener};
use locksim::world::procs::node_ip;
use madsim::runtime::{Handle, Runtime};

const PORT: u16 = 7000;

/// A future that counts how often it is polled.
struct Counted<F> {
    polls: Arc<AtomicU64>,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.future.as_mut().poll(cx)
    }
}

/// Runs `test` on a node `client` of a fresh world (latency `latency_ms`), with a node `server`
/// that echoes every chunk it reads, prefixed with the true time (µs) it read it.
fn with_echo_server<T: Send + 'static, F: Future<Output = T> + 'static>(
    latency_ms: (u64, u64),
    seed: u64,
    test: impl Fn(Arc<World>) -> F + Send + Sync + 'static,
) -> T {
    let json = format!(
        r#"{{ "name": "net", "scheme": "set-nx-px-lua", "network": {{ "latency_ms": [{}, {}] }} }}"#,
        latency_ms.0, latency_ms.1
    );
    let scenario = Arc::new(Scenario::parse(&json, "net.json").unwrap());
    std::thread::spawn(move || {
        let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
        runtime.block_on(async move {
            let handle = Handle::current();
            let world = world_with_network(&handle, &scenario, seed);
            let w = world.clone();
            let server = handle
                .create_node()
                .name("server")
                .ip(node_ip("redis-1"))
                .init(move || echo(w.clone()))
                .build();
            world
                .procs
                .register("server", server.id(), node_ip("redis-1"));
            let out = Arc::new(Mutex::new(None));
            let (w, slot) = (world.clone(), out.clone());
            let test = Arc::new(test);
            let client = handle
                .create_node()
                .name("client")
                .ip(node_ip("client-1"))
                .init(move || {
                    let (w, slot, test) = (w.clone(), slot.clone(), test.clone());
                    async move {
                        let value = test(w).await;
                        *slot.lock().unwrap() = Some(value);
                    }
                })
                .build();
            world
                .procs
                .register("client", client.id(), node_ip("client-1"));
            let value = loop {
                madsim::time::sleep(Duration::from_millis(100)).await;
                if let Some(value) = out.lock().unwrap().take() {
                    break value;
                }
            };
            handle.kill(client.id());
            handle.kill(server.id());
            value
        })
    })
    .join()
    .unwrap()
}

async fn echo(world: Arc<World>) {
    let listener = NetListener::bind(&world, "server", PORT);
    loop {
        let (mut conn, _) = listener.accept().await;
        let world = world.clone();
        madsim::task::spawn_local(async move {
            let mut buf = BytesMut::new();
            while let Ok(n) = conn.read_buf(&mut buf).await {
                if n == 0 {
                    return;
                }
                let request = buf.split();
                let mut reply = world.time.now_us().to_string().into_bytes();
                reply.push(b' ');
                reply.extend_from_slice(&request);
                if conn.send(reply).is_err() || request.ends_with(b"quit") {
                    return;
                }
            }
        });
    }
}

/// Reads until `buf` holds `n` bytes or the connection ends.
async fn read_at_least(conn: &mut NetConn, buf: &mut BytesMut, n: usize) -> usize {
    while buf.len() < n {
        match conn.read_buf(buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    buf.len()
}

/// A request and its reply cost the client's task one poll (the reply's arrival): no task
/// between the sockets, and a timeout that the reply beat wakes nobody later (madsim's own
/// `timeout` woke the task again at every deadline).
#[test]
fn a_reply_costs_its_reader_one_poll() {
    let round_trips = 20;
    let polls = with_echo_server((1, 5), 3, move |world| {
        let polls = Arc::new(AtomicU64::new(0));
        Counted {
            polls: polls.clone(),
            future: Box::pin(async move {
                let mut conn = NetConn::connect(&world, "client", "server", PORT)
                    .await
                    .unwrap();
                let connected = polls.load(Ordering::Relaxed);
                let mut buf = BytesMut::new();
                for i in 0..round_trips {
                    conn.send(format!("ping {i}").into_bytes()).unwrap();
                    buf.clear();
                    let reply = world
                        .time
                        .timeout(Duration::from_millis(500), conn.read_buf(&mut buf))
                        .await;
                    assert!(matches!(reply, Ok(Ok(n)) if n > 0), "{reply:?}");
                }
                // Longer than every timeout: a timer left behind would wake this task.
                madsim::time::sleep(Duration::from_secs(2)).await;
                polls.load(Ordering::Relaxed) - connected
            }),
        }
    });
    // One poll per reply, and one when the sleep ends.
    assert_eq!(polls, round_trips + 1);
}

/// Splits an echo reply into the server's read time and what it read.
fn parse(reply: &[u8]) -> (u64, &[u8]) {
    let space = reply.iter().position(|&b| b == b' ').unwrap();
    let t = std::str::from_utf8(&reply[..space])
        .unwrap()
        .parse()
        .unwrap();
    (t, &reply[space + 1..])
}

/// Each chunk arrives after a latency of the scenario's range, and chunks sent together arrive
/// in the order they were sent.
#[test]
fn bytes_arrive_in_order_after_the_links_latency() {
    let (latencies, echoed) = with_echo_server((2, 4), 5, |world| async move {
        let mut conn = NetConn::connect(&world, "client", "server", PORT)
            .await
            .unwrap();
        let mut latencies = Vec::new();
        let mut buf = BytesMut::new();
        for i in 0..30 {
            let sent = world.time.now_us();
            conn.send(format!("one {i}").into_bytes()).unwrap();
            buf.clear();
            read_at_least(&mut conn, &mut buf, 1).await;
            latencies.push(parse(&buf).0 - sent);
        }
        // Chunks of letters, so that the server's time prefixes (digits and a space) can be
        // taken out of the replies again.
        let mut sent = Vec::new();
        for i in 0..50u8 {
            let chunk = vec![b'a' + i % 26, b'a' + i / 26, b','];
            sent.extend_from_slice(&chunk);
            conn.send(chunk).unwrap();
        }
        let mut replies = Vec::new();
        while replies
            .iter()
            .filter(|b: &&u8| b.is_ascii_lowercase())
            .count()
            < 100
        {
            buf.clear();
            if conn.read_buf(&mut buf).await.unwrap() == 0 {
                break;
            }
            replies.extend_from_slice(&buf);
        }
        let echoed: Vec<u8> = replies
            .into_iter()
            .filter(|b| !b.is_ascii_digit() && *b != b' ')
            .collect();
        (latencies, echoed == sent)
    });
    assert!(
        latencies.iter().all(|l| (2000..=4001).contains(l)),
        "{latencies:?}"
    );
    assert!(echoed, "the bytes arrived in the order they were sent");
}

/// Bytes sent across a cut link wait, and arrive, in order, once it is open again: the oldest
/// is retransmitted after 1, 2, 4, ... ms, so the first retransmission after the cut heals
/// comes within as long again as the cut lasted.
#[test]
fn a_cut_link_holds_bytes_until_it_heals() {
    let (during, healed_us, arrived_us, body) = with_echo_server((1, 5), 7, |world| async move {
        let mut conn = NetConn::connect(&world, "client", "server", PORT)
            .await
            .unwrap();
        let cut_us = world.time.now_us();
        world.net.clog("client", "server");
        conn.send(b"first,".to_vec()).unwrap();
        conn.send(b"second".to_vec()).unwrap();
        let mut buf = BytesMut::new();
        let during = world
            .time
            .timeout(Duration::from_millis(300), conn.read_buf(&mut buf))
            .await
            .is_ok();
        world.net.unclog("client", "server");
        let healed_us = world.time.now_us() - cut_us;
        read_at_least(&mut conn, &mut buf, 1).await;
        let (arrived_us, body) = parse(&buf);
        (during, healed_us, arrived_us - cut_us, body.to_vec())
    });
    assert!(!during, "nothing crosses the cut link");
    assert!(arrived_us > healed_us);
    assert!(arrived_us <= 2 * healed_us + 5000, "{arrived_us} µs");
    assert_eq!(body, b"first,second");
}

/// A peer that closes its end sends its FIN after its last bytes: the reader gets the bytes,
/// then EOF. A reset (the `drop_connections` fault) fails both ends at once.
#[test]
fn a_close_reads_as_eof_after_the_data_and_a_reset_fails_both_ends() {
    let (reply, eof, reset_read, reset_send) = with_echo_server((1, 5), 11, |world| async move {
        let mut conn = NetConn::connect(&world, "client", "server", PORT)
            .await
            .unwrap();
        conn.send(b"quit".to_vec()).unwrap();
        let mut buf = BytesMut::new();
        read_at_least(&mut conn, &mut buf, 1).await;
        let reply = parse(&buf).1.to_vec();
        let eof = conn.read_buf(&mut buf).await.unwrap() == 0;

        let mut conn = NetConn::connect(&world, "client", "server", PORT)
            .await
            .unwrap();
        world.net.drop_connections("server");
        let reset_read = conn.read_buf(&mut buf).await.map_err(|e| e.kind());
        let reset_send = conn.send(b"late".to_vec()).map_err(|e| e.kind());
        (reply, eof, reset_read, reset_send)
    });
    assert_eq!(reply, b"quit");
    assert!(eof, "EOF after the data");
    assert_eq!(reset_read, Err(std::io::ErrorKind::ConnectionReset));
    assert_eq!(reset_send, Err(std::io::ErrorKind::ConnectionReset));
}

/// A FIN is a segment like data: a peer across a cut link learns of the close once it heals
/// (a partitioned replica's link closed by its master is seen as lost after the partition).
#[test]
fn a_close_waits_out_a_cut_link() {
    let (early, late) = with_echo_server((1, 5), 13, |world| async move {
        let mut conn = NetConn::connect(&world, "client", "server", PORT)
            .await
            .unwrap();
        conn.send(b"quit".to_vec()).unwrap();
        madsim::time::sleep(Duration::from_micros(500)).await;
        // The request is on its way; the reply and the FIN will find the link cut.
        world.net.clog("server", "client");
        let mut buf = BytesMut::new();
        let early = world
            .time
            .timeout(Duration::from_millis(500), conn.read_buf(&mut buf))
            .await
            .is_ok();
        world.net.unclog("server", "client");
        read_at_least(&mut conn, &mut buf, 1).await;
        let late = conn.read_buf(&mut buf).await.unwrap() == 0;
        (early, late)
    });
    assert!(!early, "neither the reply nor the FIN crosses the cut link");
    assert!(late, "the FIN follows the reply after the link heals");
}

/// A machine that loses power (`power_loss`) sends nothing more: its reply and FIN still in
/// flight are lost, so its peer's read waits (until its own timeout); once the machine is back,
/// its kernel answers the old connection with RST and the peer's read fails.
#[test]
fn a_power_loss_loses_what_is_in_flight_and_sends_no_fin() {
    let (silent, after_restart) = with_echo_server((5, 5), 17, |world| async move {
        let mut conn = NetConn::connect(&world, "client", "server", PORT)
            .await
            .unwrap();
        conn.send(b"quit".to_vec()).unwrap();
        // The request arrives after 5 ms; the reply and the FIN are sent then and would
        // arrive 5 ms later.
        madsim::time::sleep(Duration::from_millis(7)).await;
        world.net.silence_peers("server");
        let mut buf = BytesMut::new();
        let silent = world
            .time
            .timeout(Duration::from_millis(500), conn.read_buf(&mut buf))
            .await
            .is_err();
        world.net.reset_silenced("server");
        let after_restart = conn.read_buf(&mut buf).await.map_err(|e| e.kind());
        (silent, after_restart)
    });
    assert!(silent, "neither the reply nor a FIN arrives");
    assert_eq!(after_restart, Err(std::io::ErrorKind::ConnectionReset));
}
