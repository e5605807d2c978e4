//! `locksim live-adapter`: a built-in scheme as a live client process. It runs the scenario's
//! scheme (`model::locks`, unchanged) over real TCP with a real-time [`LockEnv`] — real tokio,
//! the process's own clocks (so libfaketime reaches it, as it reaches a user's client), pooled
//! connections, the workload's command timeout, masters found through `LOCKSIM_SENTINELS`
//! when there are Sentinels, subscriptions, background tasks — and answers the driver protocol
//! on stdin/stdout like any user's adapter. So a built-in scheme and a user's lock take the
//! same path, and SIGSTOP is a real stop-the-world for both.
//!
//! The `work` operation is the simulation's critical section: `LOCKSIM.READ [fence]`, hold,
//! `LOCKSIM.WRITE value-1 [fence]` (split by `extend`s: `read` in its first part, `write` in
//! its last).

use std::cell::RefCell;
use std::io::Write;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::BytesMut;
use model::locks::{
    CallError, LocalBoxFuture, LockEnv, LockScheme, Subscription, TaskGuard,
    is_unsubscribe_confirmation,
};
use model::redis::Reply;
use model::redis::resp::encode_command;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::clients::ClientCommand;
use crate::scenario::Scenario;
use crate::world::stream_seed;

/// The command that runs `scheme_index` of `scenario` as a live client.
pub fn command(scenario: &Scenario, scheme_index: usize) -> Result<ClientCommand, String> {
    let program = std::env::current_exe()
        .map_err(|e| format!("cannot find the locksim binary to run the built-in scheme: {e}"))?;
    command_of(program, scenario, scheme_index)
}

/// The same client, run by the given locksim binary (a test's process is not locksim: it names
/// the binary cargo built).
pub fn command_of(
    program: std::path::PathBuf,
    scenario: &Scenario,
    scheme_index: usize,
) -> Result<ClientCommand, String> {
    let path =
        std::fs::canonicalize(&scenario.path).map_err(|e| format!("{}: {e}", scenario.path))?;
    Ok(ClientCommand {
        program: program.into_os_string(),
        args: vec![
            "live-adapter".into(),
            path.into_os_string(),
            "--scheme".into(),
            scenario.schemes[scheme_index].label().into(),
        ],
    })
}

/// The adapter process's whole life: answer operations until stdin closes.
pub fn main(scenario_path: &Path, scheme: &str) -> Result<(), String> {
    let scenario = Scenario::load(scenario_path)?;
    let index = scenario
        .schemes
        .iter()
        .position(|s| s.label() == scheme)
        .ok_or_else(|| format!("{}: no scheme {scheme}", scenario_path.display()))?;
    let scenario = scenario.for_scheme(index);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, serve(scenario, index))
}

async fn serve(scenario: Scenario, index: usize) -> Result<(), String> {
    let mut scheme: Box<dyn LockScheme> = scenario.schemes[index].build("scheme")?;
    let mut lines = stdin_lines()?;
    let mut env: Option<Rc<dyn LockEnv>> = None;
    let mut resource: Option<Conn> = None;
    let mut fence: Option<u64> = None;
    // The value the critical section read, until its write (a `work` split by extensions).
    let mut read: Option<i64> = None;
    while let Some(line) = lines.recv().await {
        let request: Value =
            serde_json::from_str(&line).map_err(|e| format!("bad request {line}: {e}"))?;
        let id = request["id"].clone();
        let op = request["op"].as_str().unwrap_or_default().to_string();
        if op == "init" {
            let real = RealEnv::new(&scenario, &request);
            let timeout = real.command_timeout;
            env = Some(Rc::new(real));
            let answer = match request["resource"].as_str() {
                Some(addr) => match Conn::open(addr, timeout).await {
                    Ok(conn) => {
                        resource = Some(conn);
                        json!({"type": "ok"})
                    }
                    Err(e) => json!({"type": "fail", "error": format!("resource {addr}: {e}")}),
                },
                None => json!({"type": "ok"}),
            };
            answer_line(answer, id)?;
            continue;
        }
        let answer = match (op.as_str(), &env) {
            ("acquire", Some(env)) => {
                let wait_ms = request["wait_ms"].as_u64().unwrap_or(0);
                match scheme.acquire(env, wait_ms).await {
                    Ok(grant) => {
                        fence = grant.fence;
                        json!({"type": "ok", "token": grant.token, "fence": grant.fence})
                    }
                    Err(reason) => json!({"type": "fail", "error": reason}),
                }
            }
            ("work", Some(env)) => {
                let part = Part {
                    hold_ms: request["hold_ms"].as_u64().unwrap_or(0),
                    read: request["read"].as_bool().unwrap_or(true),
                    write: request["write"].as_bool().unwrap_or(true),
                };
                let timeout = Duration::from_millis(scenario.clients.command_timeout_ms);
                match resource.as_mut() {
                    None => json!({"type": "fail", "error": "no resource"}),
                    Some(conn) => {
                        let answer = work(conn, env, fence, &mut read, part, timeout).await;
                        if answer["type"] == "info" {
                            resource = None;
                        }
                        answer
                    }
                }
            }
            ("release", Some(env)) => {
                let release = scheme.release(env).await;
                if release.ok {
                    json!({"type": "ok"})
                } else {
                    json!({"type": "fail", "error": release.detail})
                }
            }
            ("extend", Some(env)) => {
                let extension = scheme.extend(env).await;
                if extension.ok {
                    json!({"type": "ok"})
                } else {
                    json!({"type": "fail", "error": extension.detail})
                }
            }
            (_, None) => json!({"type": "fail", "error": "the first operation must be init"}),
            (other, _) => json!({"type": "fail", "error": format!("unknown op {other}")}),
        };
        answer_line(answer, id)?;
    }
    Ok(())
}

/// Stdin's lines, read by a thread of their own (a blocking read).
fn stdin_lines() -> Result<tokio::sync::mpsc::UnboundedReceiver<String>, String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(rx)
}

/// Writes one answer line (the request's `id` as its `re`).
fn answer_line(mut answer: Value, id: Value) -> Result<(), String> {
    answer["re"] = id;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{answer}").map_err(|e| e.to_string())?;
    stdout.flush().map_err(|e| e.to_string())
}

/// One `work` operation: the whole critical section, or a part of one split by extensions
/// (`read` in the first part, `write` in the last).
struct Part {
    hold_ms: u64,
    read: bool,
    write: bool,
}

/// The critical section, as the simulated client's: read, hold, write back decremented.
async fn work(
    conn: &mut Conn,
    env: &Rc<dyn LockEnv>,
    fence: Option<u64>,
    read: &mut Option<i64>,
    part: Part,
    timeout: Duration,
) -> Value {
    let fence_arg = fence.map(|f| f.to_string().into_bytes());
    if part.read {
        let mut command = vec![b"LOCKSIM.READ".to_vec()];
        command.extend(fence_arg.clone());
        *read = match conn.call(&command, timeout).await {
            Ok(Reply::Integer(value)) => Some(value),
            Ok(other) => return json!({"type": "fail", "error": format!("read: {other:?}")}),
            Err(e) => return json!({"type": "info", "error": format!("read: {e}")}),
        };
    }
    env.sleep_ms(part.hold_ms).await;
    if !part.write {
        return json!({"type": "ok"});
    }
    let Some(value) = read.take() else {
        return json!({"type": "fail", "error": "write: nothing was read"});
    };
    let mut write = vec![
        b"LOCKSIM.WRITE".to_vec(),
        (value - 1).to_string().into_bytes(),
    ];
    write.extend(fence_arg);
    match conn.call(&write, timeout).await {
        Ok(Reply::Status(_)) => json!({"type": "ok"}),
        Ok(other) => json!({"type": "fail", "error": format!("write: {other:?}")}),
        Err(e) => json!({"type": "info", "error": format!("write: {e}")}),
    }
}

/// One RESP connection over real TCP.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
}

impl Conn {
    async fn open(addr: &str, timeout: Duration) -> Result<Conn, CallError> {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                Ok(Conn {
                    stream,
                    buf: BytesMut::with_capacity(512),
                })
            }
            Ok(Err(e)) => Err(CallError::Disconnected(e.to_string())),
            Err(_) => Err(CallError::Timeout),
        }
    }

    async fn send(&mut self, argv: &[Vec<u8>]) -> Result<(), CallError> {
        self.stream
            .write_all(&encode_command(argv))
            .await
            .map_err(|e| CallError::Disconnected(e.to_string()))
    }

    async fn read_reply(&mut self) -> Result<Reply, CallError> {
        loop {
            if let Some((reply, used)) =
                Reply::decode(&self.buf).map_err(CallError::Disconnected)?
            {
                let _ = self.buf.split_to(used);
                return Ok(reply);
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) => {
                    return Err(CallError::Disconnected("connection closed by peer".into()));
                }
                Ok(_) => {}
                Err(e) => return Err(CallError::Disconnected(e.to_string())),
            }
        }
    }

    /// One command and its reply within `timeout` (a timed-out connection is out of step with
    /// its replies: the caller drops it, as Jedis and redis-py do). When the timer has fired,
    /// a reply already in the socket's receive buffer still wins: see [`Conn::received`].
    async fn call(&mut self, argv: &[Vec<u8>], timeout: Duration) -> Result<Reply, CallError> {
        match tokio::time::timeout(timeout, async {
            self.send(argv).await?;
            self.read_reply().await
        })
        .await
        {
            Ok(result) => result,
            Err(_) => self.received().unwrap_or(Err(CallError::Timeout)),
        }
    }

    /// A reply the kernel already holds for this connection, read without waiting.
    ///
    /// After a stop-the-world pause (SIGSTOP, a GC) longer than the command timeout, the reply
    /// that arrived during the pause and the expired timer are both ready at wake-up. A
    /// blocked reader — the simulated client, a JVM thread in `SocketInputStream.read` with
    /// `SO_TIMEOUT`, redis-py's `recv` — returns the bytes in the buffer; tokio instead sees
    /// the timer first, because `epoll_wait` returns `EINTR` after SIGCONT (signal(7), "never
    /// restarted after being interrupted by a stop signal") and the socket's readiness is only
    /// recorded at the next poll. So read the buffer with a real non-blocking `recv` (tokio's
    /// `try_read` trusts the stale readiness) before calling it a timeout.
    fn received(&mut self) -> Option<Result<Reply, CallError>> {
        use std::os::fd::AsRawFd;
        loop {
            match Reply::decode(&self.buf) {
                Ok(Some((reply, used))) => {
                    let _ = self.buf.split_to(used);
                    return Some(Ok(reply));
                }
                Ok(None) => {}
                Err(e) => return Some(Err(CallError::Disconnected(e))),
            }
            let mut chunk = [0u8; 4096];
            // SAFETY: a valid open socket of ours and a buffer of `chunk.len()` bytes.
            let n = unsafe {
                libc::recv(
                    self.stream.as_raw_fd(),
                    chunk.as_mut_ptr().cast(),
                    chunk.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n as usize]);
        }
    }

    /// Whether the server closed this idle connection (or sent something unasked).
    fn is_closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        let mut probe = [0u8; 1];
        match self.stream.try_read(&mut probe) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }
}

/// The scheme's world in a real process: real sockets, the process's own clocks.
struct RealEnv {
    name: String,
    /// Each master group's name (`redis-1`), what the Sentinels monitor.
    groups: Vec<String>,
    /// Each group's master address as believed now (`LOCKSIM_REDIS`, or a Sentinel's answer).
    current: RefCell<Vec<String>>,
    sentinels: Vec<String>,
    idle: RefCell<Vec<Vec<Conn>>>,
    replicas: usize,
    command_timeout: Duration,
    rng: RefCell<ChaCha8Rng>,
    start: Instant,
}

impl RealEnv {
    fn new(scenario: &Scenario, init: &Value) -> RealEnv {
        let list = |field: &str| -> Vec<String> {
            init[field]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let name = init["client"].as_str().unwrap_or("client").to_string();
        let groups = list("masters");
        let seed = std::env::var("LOCKSIM_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        RealEnv {
            idle: RefCell::new(groups.iter().map(|_| Vec::new()).collect()),
            current: RefCell::new(list("redis")),
            sentinels: list("sentinels"),
            groups,
            replicas: scenario.topology.replicas as usize,
            command_timeout: Duration::from_millis(scenario.clients.command_timeout_ms),
            rng: RefCell::new(ChaCha8Rng::seed_from_u64(stream_seed(
                seed,
                &format!("{name}/{}/lock", std::process::id()),
            ))),
            name,
            start: Instant::now(),
        }
    }

    /// `SENTINEL get-master-addr-by-name` to each Sentinel in turn; the first answer wins.
    async fn discover(&self, server: usize, timeout: Duration) -> Result<String, CallError> {
        let argv = vec![
            b"SENTINEL".to_vec(),
            b"get-master-addr-by-name".to_vec(),
            self.groups[server].as_bytes().to_vec(),
        ];
        let mut last = CallError::Disconnected("no Sentinel".into());
        for sentinel in &self.sentinels {
            let reply = match Conn::open(sentinel, timeout).await {
                Ok(mut conn) => conn.call(&argv, timeout).await,
                Err(e) => Err(e),
            };
            match reply {
                Ok(Reply::Array(parts)) if parts.len() == 2 => {
                    let text =
                        |r: &Reply| r.as_bulk().map(|b| String::from_utf8_lossy(b).into_owned());
                    if let (Some(ip), Some(port)) = (text(&parts[0]), text(&parts[1])) {
                        return Ok(format!("{ip}:{port}"));
                    }
                }
                Ok(other) => {
                    last = CallError::Disconnected(format!(
                        "No master found for {}: {other:?}",
                        self.groups[server]
                    ))
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// A pooled connection to the group's master, or a new one (asking the Sentinels first).
    async fn connection(&self, server: usize, timeout: Duration) -> Result<Conn, CallError> {
        loop {
            let idle = self.idle.borrow_mut()[server].pop();
            match idle {
                Some(mut conn) => {
                    if !conn.is_closed() {
                        return Ok(conn);
                    }
                }
                None => break,
            }
        }
        if !self.sentinels.is_empty() {
            let master = self.discover(server, timeout).await?;
            self.current.borrow_mut()[server] = master;
        }
        let addr = self.current.borrow()[server].clone();
        Conn::open(&addr, timeout).await
    }

    async fn call_within(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Reply, CallError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut conn = self.connection(server, timeout).await?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match conn.call(&argv, left).await {
            // redis-py's SentinelManagedConnection: a master turned replica answers READONLY;
            // drop the connection so the next one asks the Sentinels again.
            Ok(Reply::Error(e)) if e.starts_with(b"READONLY") && !self.sentinels.is_empty() => Err(
                CallError::Disconnected(String::from_utf8_lossy(&e).into_owned()),
            ),
            Ok(reply) => {
                self.idle.borrow_mut()[server].push(conn);
                Ok(reply)
            }
            Err(e) => Err(e),
        }
    }
}

#[async_trait(?Send)]
impl LockEnv for RealEnv {
    fn name(&self) -> &str {
        &self.name
    }

    fn servers(&self) -> usize {
        self.groups.len()
    }

    fn replicas(&self) -> usize {
        self.replicas
    }

    fn sentinel(&self) -> bool {
        !self.sentinels.is_empty()
    }

    async fn call(&self, server: usize, argv: Vec<Vec<u8>>) -> Result<Reply, CallError> {
        self.call_within(server, argv, self.command_timeout).await
    }

    async fn call_with_timeout(
        &self,
        server: usize,
        argv: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> Result<Reply, CallError> {
        self.call_within(server, argv, Duration::from_millis(timeout_ms))
            .await
    }

    async fn subscribe(
        &self,
        server: usize,
        channel: &str,
        client_name: Option<&str>,
    ) -> Result<Box<dyn Subscription>, CallError> {
        let mut conn = self.connection(server, self.command_timeout).await?;
        if let Some(name) = client_name {
            let argv = vec![b"CLIENT".to_vec(), b"SETNAME".to_vec(), name.into()];
            match conn.call(&argv, self.command_timeout).await? {
                Reply::Status(_) => {}
                other => {
                    return Err(CallError::Disconnected(format!(
                        "CLIENT SETNAME answered {other:?}"
                    )));
                }
            }
        }
        let argv = vec![b"SUBSCRIBE".to_vec(), channel.as_bytes().to_vec()];
        match conn.call(&argv, self.command_timeout).await? {
            Reply::Array(_) | Reply::Push(_) => Ok(Box::new(PubSub {
                conn: RefCell::new(Some(conn)),
                channel: channel.as_bytes().to_vec(),
                command_timeout: self.command_timeout,
            })),
            other => Err(CallError::Disconnected(format!(
                "SUBSCRIBE answered {other:?}"
            ))),
        }
    }

    fn wall_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }

    fn mono_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    async fn sleep_ms(&self, ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await
    }

    fn random_u64(&self) -> u64 {
        self.rng.borrow_mut().r#gen()
    }

    /// The driver registers the token from the `acquire` answer.
    fn register_token(&self, _token: &str) {}

    fn spawn(&self, task: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
        Box::new(Background(tokio::task::spawn_local(task)))
    }
}

struct PubSub {
    conn: RefCell<Option<Conn>>,
    channel: Vec<u8>,
    /// How long `unsubscribe` waits for its confirmation.
    command_timeout: Duration,
}

#[async_trait(?Send)]
impl Subscription for PubSub {
    async fn next_message(&self, timeout_ms: u64) -> Option<Vec<u8>> {
        let mut conn = self.conn.borrow_mut().take()?;
        let wait = Duration::from_millis(timeout_ms);
        match tokio::time::timeout(wait, conn.read_reply()).await {
            Ok(Ok(Reply::Array(parts) | Reply::Push(parts)))
                if parts.len() == 3 && parts[0].as_bulk() == Some(b"message") =>
            {
                *self.conn.borrow_mut() = Some(conn);
                parts[2].as_bulk().map(<[u8]>::to_vec)
            }
            Ok(Ok(_)) | Err(_) => {
                *self.conn.borrow_mut() = Some(conn);
                None
            }
            Ok(Err(_)) => None,
        }
    }
    fn closed(&self) -> bool {
        self.conn.borrow().is_none()
    }
    fn close(&self) {
        self.conn.borrow_mut().take();
    }
    async fn unsubscribe(&self) {
        let Some(mut conn) = self.conn.borrow_mut().take() else {
            return;
        };
        let argv = [b"UNSUBSCRIBE".to_vec(), self.channel.clone()];
        let confirmed = tokio::time::timeout(self.command_timeout, async {
            conn.send(&argv).await?;
            loop {
                if is_unsubscribe_confirmation(&conn.read_reply().await?) {
                    return Ok::<(), CallError>(());
                }
            }
        })
        .await;
        if matches!(confirmed, Ok(Ok(()))) {
            *self.conn.borrow_mut() = Some(conn);
        }
    }
}

struct Background(tokio::task::JoinHandle<()>);

impl TaskGuard for Background {
    fn cancel(&self) {
        self.0.abort();
    }
}
