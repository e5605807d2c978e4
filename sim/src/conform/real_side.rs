//! Side (a) of a situation: the real library, unmodified, against one `locksim serve` process
//! per master, each watched by a MONITOR connection. The library runs in its driver
//! (`conformance/drivers/`), one operation per JSON line, one driver process per lock object
//! (a lock object is a client process, as in the simulation: what a library keeps per process,
//! such as redis-py 2.10's script objects, is not shared between them); the harness's own
//! connection sets the masters up and does the situation's admin steps. Every process started here is killed
//! and reaped when the run ends, whatever way it ends (`Children`'s drop).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use model::redis::Reply;
use model::redis::resp::encode_command;
use serde_json::{Value, json};

use super::situation::{Runtime, Situation, Step};
use super::transcript::{Line, parse_line};

/// Where the real side finds its programs.
#[derive(Clone, Debug)]
pub struct RealSetup {
    /// The `locksim` binary (its `serve` command).
    pub locksim: PathBuf,
    /// The repository (for `conformance/drivers/`).
    pub repo: PathBuf,
    /// `target/client-suites`: the venvs and `node/node_modules` `scripts/client-suites.sh
    /// setup` installs.
    pub suites: PathBuf,
}

impl RealSetup {
    /// The program and arguments that run a library's driver, or why it cannot run here.
    fn driver(&self, runtime: &Runtime) -> Result<(PathBuf, Vec<String>, PathBuf), String> {
        match runtime {
            Runtime::Python { venv } => {
                let python = self.suites.join(venv).join("bin/python");
                if !python.is_file() {
                    return Err(format!(
                        "{} is not installed: run `bash scripts/client-suites.sh setup`",
                        python.display()
                    ));
                }
                let driver = self.repo.join("conformance/drivers/driver.py");
                Ok((
                    python,
                    vec![driver.to_string_lossy().into_owned()],
                    self.repo.clone(),
                ))
            }
            Runtime::Node { package } => {
                let work = self.suites.join("node");
                if !work.join("node_modules").join(package).is_dir() {
                    return Err(format!(
                        "the npm package {package} is not installed under {}: run `bash scripts/client-suites.sh setup`",
                        work.display()
                    ));
                }
                // ES modules resolve their imports beside the importing file.
                let driver = work.join("conformance-driver.mjs");
                std::fs::copy(self.repo.join("conformance/drivers/driver.mjs"), &driver)
                    .map_err(|e| format!("cannot copy the node driver: {e}"))?;
                Ok((
                    PathBuf::from("node"),
                    vec![driver.to_string_lossy().into_owned()],
                    work,
                ))
            }
            Runtime::Source => Err("this library does not run here".to_string()),
        }
    }

    /// Whether a library's runtime is installed.
    pub fn available(&self, runtime: &Runtime) -> Result<(), String> {
        self.driver(runtime).map(|_| ())
    }
}

/// The processes of one run; dropping it kills and reaps them.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// Starts `locksim serve` on a free port; the port.
fn start_server(setup: &RealSetup, children: &mut Children) -> Result<u16, String> {
    let mut last = String::new();
    for _ in 0..5 {
        let port = free_port()?;
        let child = Command::new(&setup.locksim)
            .args(["serve", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {} serve: {e}", setup.locksim.display()))?;
        children.0.push(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = children.0.last_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                last = format!("locksim serve exited with {status} (port {port} taken?)");
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Err(last)
}

/// A plain RESP connection of the harness.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(port: u16) -> Result<Conn, String> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| format!("cannot connect to locksim serve on {port}: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    fn peer_name(&self) -> String {
        self.stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    }

    fn command(&mut self, argv: &[String]) -> Result<Reply, String> {
        self.stream
            .write_all(&encode_command(argv))
            .map_err(|e| format!("cannot send {argv:?}: {e}"))?;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Ok(Some((reply, used))) = Reply::decode_resp3(&self.buf) {
                self.buf.drain(..used);
                return Ok(reply);
            }
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("no reply to {argv:?}: {e}"))?;
            if n == 0 {
                return Err(format!("the server closed the connection after {argv:?}"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A MONITOR connection and the thread collecting its lines.
struct Monitor {
    stream: TcpStream,
    lines: Arc<Mutex<Vec<Line>>>,
    reader: Option<JoinHandle<()>>,
    /// Where the harness's end marker is among `lines`, once seen.
    end: std::cell::Cell<Option<usize>>,
}

impl Monitor {
    fn start(port: u16) -> Result<Monitor, String> {
        let mut conn = Conn::open(port)?;
        match conn.command(&["MONITOR".to_string()])? {
            Reply::Status(ok) if ok == "OK" => {}
            other => return Err(format!("MONITOR answered {other:?}")),
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stream = conn.stream.try_clone().map_err(|e| e.to_string())?;
        let (collected, mut pending) = (lines.clone(), conn.buf);
        let mut reader = conn.stream;
        let handle = std::thread::spawn(move || {
            let mut chunk = [0u8; 16 * 1024];
            loop {
                while let Some(end) = pending.windows(2).position(|w| w == b"\r\n") {
                    let text = String::from_utf8_lossy(&pending[..end]).into_owned();
                    pending.drain(..end + 2);
                    if let Some(line) = parse_line(&text) {
                        collected
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(line);
                    }
                }
                match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => pending.extend_from_slice(&chunk[..n]),
                }
            }
        });
        Ok(Monitor {
            stream,
            lines,
            reader: Some(handle),
            end: std::cell::Cell::new(None),
        })
    }

    /// Waits until this monitor has collected `ECHO marker` from connection `who`: every
    /// command that reached the master before it has then been collected too.
    fn wait_for_marker(&self, who: &str, marker: &str, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let seen = self
                .lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .position(|l| {
                    l.who.as_deref() == Some(who)
                        && l.argv.len() == 2
                        && l.argv[0].eq_ignore_ascii_case(b"ECHO")
                        && l.argv[1] == marker.as_bytes()
                });
            if let Some(at) = seen {
                self.end.set(Some(at));
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "MONITOR did not show the harness's ECHO {marker} within {} s",
                    limit.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The lines up to the end marker: what a driver's process sends while it exits (a
    /// library's finalizer, such as sherlock's `BaseLock.__del__` releasing,
    /// `sherlock/lock.py:229-233` at v0.4.0) comes after the situation ended.
    fn finish(mut self) -> Vec<Line> {
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(handle) = self.reader.take() {
            let _ = handle.join();
        }
        let mut lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(end) = self.end.get() {
            lines.truncate(end);
        }
        lines
    }
}

/// The library's driver process.
struct Driver {
    stdin: Option<ChildStdin>,
    answers: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Driver {
    fn send(&mut self, request: &Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("the driver's input is closed")?;
        writeln!(stdin, "{request}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("the driver stopped listening: {e}; {}", self.stderr()))
    }

    fn answer(&self, within: Duration) -> Result<Value, String> {
        match self.answers.recv_timeout(within) {
            Ok(line) => serde_json::from_str(&line)
                .map_err(|e| format!("the driver answered {line:?}: {e}")),
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "the driver did not answer within {} s; {}",
                within.as_secs(),
                self.stderr()
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Err(format!("the driver exited; {}", self.stderr()))
            }
        }
    }

    fn stderr(&self) -> String {
        let text = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("its stderr ends:\n{}", tail.join("\n"))
    }
}

fn start_driver(
    setup: &RealSetup,
    situation: &Situation,
    ports: &[u16],
    children: &mut Children,
) -> Result<Driver, String> {
    let (program, args, dir) = setup.driver(&situation.library.runtime)?;
    let mut child = Command::new(&program)
        .args(&args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr_pipe = child.stderr.take();
    children.0.push(child);
    let (send, answers) = channel();
    if let Some(stdout) = stdout {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
    }
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(mut pipe) = stderr_pipe {
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    return;
                }
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
    }
    let mut driver = Driver {
        stdin,
        answers,
        stderr,
    };
    driver.send(&json!({
        "library": situation.library.driver,
        "ports": ports,
        "key": situation.library.key,
        "config": situation.config,
    }))?;
    let ready = driver.answer(Duration::from_secs(120))?;
    if ready["ready"] != json!(true) {
        return Err(format!("the driver did not get ready: {ready}"));
    }
    Ok(driver)
}

/// How long a library's background calls may still run after the situation's last step
/// (pottery's calls left to its executor's threads, node-redlock's calls after its quorum): far
/// above the few milliseconds they take on loopback, so that a loaded machine only waits.
const BACKGROUND_LIMIT: Duration = Duration::from_secs(20);

/// Waits until every driver's library has no call in flight (its background calls returned).
fn drain(drivers: &mut std::collections::BTreeMap<usize, Driver>) -> Result<(), String> {
    for (lock, driver) in drivers.iter_mut() {
        driver.send(&json!({"op": "drain", "limit_ms": BACKGROUND_LIMIT.as_millis() as u64}))?;
        let answer = driver.answer(BACKGROUND_LIMIT + Duration::from_secs(10))?;
        if answer["drained"] != json!(true) {
            return Err(format!(
                "lock {lock}: the library's background calls had not returned after {} s: {}",
                BACKGROUND_LIMIT.as_secs(),
                answer["detail"]
            ));
        }
    }
    Ok(())
}

/// Ends a situation only when its transcript is complete, whatever the machine's load: each
/// driver first waits until its library's background calls have returned (so they reached
/// their master), then an `ECHO` of the harness on every master marks the end of what MONITOR
/// must have shown (commands are fed to MONITOR in arrival order, replication.c:562-601).
/// Waits, never sleeps a guessed time; bounded by `BACKGROUND_LIMIT`, past which the run is an
/// error rather than a short transcript.
fn settle(
    drivers: &mut std::collections::BTreeMap<usize, Driver>,
    admins: &mut [Conn],
    monitors: &[Monitor],
) -> Result<(), String> {
    drain(drivers)?;
    let marker = format!("locksim-conform-end-{}", std::process::id());
    for (admin, monitor) in admins.iter_mut().zip(monitors) {
        let who = admin.peer_name();
        admin.command(&["ECHO".to_string(), marker.clone()])?;
        monitor.wait_for_marker(&who, &marker, BACKGROUND_LIMIT)?;
    }
    Ok(())
}

/// What the real library did in a situation.
pub struct RealRun {
    pub lines: Vec<Vec<Line>>,
    pub outcomes: Vec<(String, String)>,
    /// Each operation's start and end (µs of the wall clock, MONITOR's; a pending one never
    /// ends).
    pub windows: Vec<(i64, i64)>,
    /// The harness's own connections on each master (their client addresses), whose commands
    /// are not the lock's. Per master: the kernel gives a connection to another master the
    /// same local port now and then (4 of 2,000 rounds of this harness's pattern on loopback),
    /// and one list for all masters then hid a driver's every line on one master.
    pub skip: Vec<Vec<String>>,
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Runs a situation with the real library.
pub fn run(setup: &RealSetup, situation: &Situation) -> Result<RealRun, String> {
    let mut children = Children(Vec::new());
    let mut ports = Vec::new();
    for _ in 0..situation.masters {
        ports.push(start_server(setup, &mut children)?);
    }
    let mut monitors = Vec::new();
    let mut admins = Vec::new();
    let mut skip = Vec::new();
    for &port in &ports {
        let monitor = Monitor::start(port)?;
        let admin = Conn::open(port)?;
        skip.push(vec![
            monitor
                .stream
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            admin.peer_name(),
        ]);
        monitors.push(monitor);
        admins.push(admin);
    }
    for (master, commands) in situation.initial.iter().enumerate() {
        for command in commands {
            admins[master].command(command)?;
        }
    }
    // One driver per lock object, each set up and connected before the first step.
    let mut drivers = std::collections::BTreeMap::new();
    for step in &situation.steps {
        if let Step::Op { lock, .. } = step
            && !drivers.contains_key(lock)
        {
            drivers.insert(
                *lock,
                start_driver(setup, situation, &ports, &mut children)?,
            );
        }
    }
    let mut outcomes = Vec::new();
    let mut windows = Vec::new();
    let mut silent = Vec::new();
    for step in &situation.steps {
        match step {
            Step::Admin { master, command } => {
                // A pause of ALL holds the harness's next commands too: they are sent now and
                // answered when it ends.
                admins[*master].command(command)?;
            }
            Step::Sleep { ms } => std::thread::sleep(Duration::from_millis(*ms)),
            Step::Quiet => drain(&mut drivers)?,
            Step::SilentSubscriber {
                master,
                name,
                channel,
            } => {
                let mut conn = Conn::open(ports[*master])?;
                skip[*master].push(conn.peer_name());
                conn.command(&["CLIENT".to_string(), "SETNAME".to_string(), name.clone()])?;
                conn.command(&["SUBSCRIBE".to_string(), channel.clone()])?;
                // Open until the run ends, never read again.
                silent.push(conn);
            }
            Step::Op {
                op, lock, until_ms, ..
            } => {
                let mut request = json!({"op": op.name(), "lock": lock});
                if let Some(until) = until_ms {
                    request["until_ms"] = json!(until);
                }
                let driver = drivers.get_mut(lock).ok_or("no driver")?;
                let start_us = now_us();
                driver.send(&request)?;
                let answer = driver.answer(Duration::from_secs(120))?;
                let kind = answer["outcome"].as_str().unwrap_or("?").to_string();
                let end_us = if kind == "pending" {
                    i64::MAX
                } else {
                    now_us()
                };
                windows.push((start_us, end_us));
                let detail = answer["detail"].as_str().unwrap_or_default().to_string();
                outcomes.push((kind, detail));
            }
        }
    }
    std::thread::sleep(Duration::from_millis(situation.settle_ms));
    settle(&mut drivers, &mut admins, &monitors)?;
    drop(drivers);
    drop(silent);
    drop(children);
    let lines = monitors.into_iter().map(Monitor::finish).collect();
    Ok(RealRun {
        lines,
        outcomes,
        windows,
        skip,
    })
}

/// The repository root from the `sim` crate's manifest folder.
pub fn repo_root(manifest_dir: &Path) -> PathBuf {
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.to_path_buf(), Path::to_path_buf)
}
