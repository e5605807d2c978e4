//! madsim's own floor for `locksim bench --floor`: the cost of a simulated message with nothing
//! of locksim around it — `clients` nodes each ping-pong a request and a reply with one server
//! node over bare madsim `TcpStream`s, under the scenario's one-way latency. Comparing it with a
//! scenario's cost per message, in the same invocation, separates madsim's share from ours
//! (issue 15's target: the baseline within 1.5× of it). Its messages go through madsim's own
//! `TcpStream`, which the simulation itself no longer uses (`world::net::socket`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use madsim::net::{TcpListener, TcpStream};
use madsim::runtime::{Handle, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A request about the size of the baseline's lock commands (`SET lock token NX PX 10000`), and
/// a reply about the size of theirs.
const REQUEST_LEN: usize = 64;
const REPLY_LEN: usize = 8;

const SERVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 0, 1)), 6379);

/// The ping-pong to run: per seed, `clients` clients × `round_trips` round trips each.
#[derive(Clone, Copy, Debug)]
pub struct Floor {
    pub clients: usize,
    pub round_trips: u64,
    /// One-way latency range (ms, both ends included), as the scenario's `network.latency_ms`.
    pub latency_ms: (u64, u64),
}

/// What the floor measured over all its seeds.
#[derive(Clone, Copy, Debug, Default)]
pub struct FloorReport {
    pub runs: u64,
    pub messages: u64,
    pub wall_s: f64,
    pub cpu_s: f64,
}

impl FloorReport {
    pub fn us_per_message(&self) -> f64 {
        self.wall_s * 1e6 / self.messages as f64
    }

    pub fn cpu_us_per_message(&self) -> f64 {
        self.cpu_s * 1e6 / self.messages as f64
    }

    pub fn add(&mut self, other: &FloorReport) {
        self.runs += other.runs;
        self.messages += other.messages;
        self.wall_s += other.wall_s;
        self.cpu_s += other.cpu_s;
    }
}

impl Floor {
    /// Runs the ping-pong once per seed, the seeds one after another on one thread of their own,
    /// as the simulator runs a caller's seeds (`runner::on_own_thread`), so that thread
    /// start-up and runtime creation are counted alike on both sides.
    pub fn run(&self, seeds: impl Iterator<Item = u64>) -> Result<FloorReport, String> {
        let start = Instant::now();
        let cpu_start = cpu_seconds();
        let mut report = FloorReport::default();
        let (floor, seeds): (Floor, Vec<u64>) = (*self, seeds.collect());
        let runs = seeds.len() as u64;
        report.messages = std::thread::Builder::new()
            .name("floor".to_string())
            .spawn(move || {
                seeds
                    .into_iter()
                    .map(|seed| {
                        std::panic::catch_unwind(move || floor.run_seed(seed))
                            .map_err(|_| format!("the madsim floor panicked on seed {seed}"))
                    })
                    .sum::<Result<u64, String>>()
            })
            .map_err(|e| format!("cannot start the madsim floor's thread: {e}"))?
            .join()
            .map_err(|_| "the madsim floor's thread panicked".to_string())??;
        report.runs = runs;
        report.wall_s = start.elapsed().as_secs_f64();
        report.cpu_s = cpu_seconds() - cpu_start;
        Ok(report)
    }

    /// One seed; the number of messages sent.
    fn run_seed(self, seed: u64) -> u64 {
        let mut config = madsim::Config::default();
        config.net.send_latency = Duration::from_millis(self.latency_ms.0)
            ..Duration::from_millis(self.latency_ms.1) + Duration::from_micros(1);
        let runtime = Runtime::with_seed_and_config(seed, config);
        runtime.block_on(async move {
            let handle = Handle::current();
            let server = handle
                .create_node()
                .name("server")
                .ip(SERVER.ip())
                .init(serve)
                .build();
            // Let the server bind before the clients connect.
            madsim::time::sleep(Duration::from_millis(1)).await;
            let mut nodes = vec![server.id()];
            let mut tasks = Vec::new();
            for i in 0..self.clients {
                let client = handle
                    .create_node()
                    .name(format!("client-{}", i + 1))
                    .ip(IpAddr::V4(Ipv4Addr::new(10, 99, 1, 1 + i as u8)))
                    .build();
                nodes.push(client.id());
                tasks.push(client.spawn(ping(self.round_trips)));
            }
            let mut messages = 0;
            for task in tasks {
                messages += task.await.expect("a floor client never panics");
            }
            // madsim leaks the tasks of live nodes when the runtime drops.
            for id in nodes {
                handle.kill(id);
            }
            messages
        })
    }
}

/// The server: answers every request on every connection.
async fn serve() {
    let listener = TcpListener::bind(SERVER)
        .await
        .expect("bind the floor server");
    loop {
        let (mut stream, _) = listener.accept().await.expect("accept");
        madsim::task::spawn(async move {
            let mut request = [0u8; REQUEST_LEN];
            while stream.read_exact(&mut request).await.is_ok() {
                let reply = [b'+'; REPLY_LEN];
                if stream.write_all(&reply).await.is_err() || stream.flush().await.is_err() {
                    break;
                }
            }
        });
    }
}

/// One client: `round_trips` requests, each awaiting its reply; the messages sent both ways.
async fn ping(round_trips: u64) -> u64 {
    let mut stream = TcpStream::connect(SERVER).await.expect("connect");
    let request = [b'*'; REQUEST_LEN];
    let mut reply = [0u8; REPLY_LEN];
    for _ in 0..round_trips {
        stream.write_all(&request).await.expect("write");
        stream.flush().await.expect("flush");
        stream.read_exact(&mut reply).await.expect("read");
    }
    2 * round_trips
}

/// CPU seconds this process has used so far (user and system, every thread).
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
