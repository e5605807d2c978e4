//! The real client processes of a live run, one per `client-i`, and every fault realised on
//! them: the one place where `pause`, `crash`, `clock_jump` and `clock_drift` of a live client
//! become signals and libfaketime files (`ExternalProcesses` and the clock listener, which the
//! world calls after the simulated node's own fault).
//!
//! | fault | on the real process |
//! |---|---|
//! | `pause` | `killpg(SIGSTOP)`, healed by `killpg(SIGCONT)` (Jepsen's hammer-time): every thread stops, watchdogs included. The simulated node is not paused: its bridged sockets are the kernel's side, which keeps receiving for a stopped process |
//! | `crash` | `killpg(SIGKILL)`; the simulated node's restart starts a new process (a new logical process) |
//! | `clock_jump`, `clock_drift` | the client's libfaketime timestamp file (`+<offset>s [x<rate>]`), re-read at every call (`FAKETIME_NO_CACHE=1`); not applied when libfaketime is missing or the program bypasses libc's clock (static or Go binaries) |

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::Inbound;
use super::bridge::Ports;
use super::pacer::{Inbox, real_unix_us};
use super::process::{Process, Spec, Supervisor, write_line};
use crate::world::procs::ExternalProcesses;

/// Debian's libfaketime (package `libfaketime`).
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The program every client runs.
#[derive(Clone, Debug)]
pub struct ClientCommand {
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// One fault as it was realised on a real process.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Applied {
    /// Unix time (µs) when it was applied.
    pub wall_us: u64,
    pub node: String,
    pub action: String,
    pub applied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applied_because: Option<String>,
}

/// The client processes and their lines on the way to the drivers.
pub struct Clients {
    supervisor: Supervisor,
    command: ClientCommand,
    ports: Arc<Ports>,
    masters: Vec<String>,
    sentinels: Vec<String>,
    seed: u64,
    log_dir: PathBuf,
    runtime: tokio::runtime::Handle,
    inbox: Arc<Inbox<Inbound>>,
    /// libfaketime for every client, when the scenario changes a client's clock and it can be
    /// applied; else why not.
    faketime: Result<PathBuf, String>,
    procs: Mutex<BTreeMap<String, Process>>,
    /// Where each client's stdout lines go.
    routes: Mutex<BTreeMap<String, Route>>,
    applied: Mutex<Vec<Applied>>,
}

/// Where one client's stdout lines go: its incarnation, and the driver's channel (`None` = EOF).
type Route = (u32, UnboundedSender<Option<String>>);

/// What `Clients::new` needs to know of the run.
pub struct Setup {
    pub command: ClientCommand,
    pub ports: Arc<Ports>,
    pub masters: Vec<String>,
    pub sentinels: Vec<String>,
    pub seed: u64,
    pub log_dir: PathBuf,
    pub runtime: tokio::runtime::Handle,
    pub inbox: Arc<Inbox<Inbound>>,
    /// Whether any fault can change a client's clock.
    pub client_clock_faults: bool,
}

impl Clients {
    pub fn new(setup: Setup) -> Result<Clients, String> {
        std::fs::create_dir_all(&setup.log_dir)
            .map_err(|e| format!("{}: cannot create: {e}", setup.log_dir.display()))?;
        let faketime = if !setup.client_clock_faults {
            Err("no fault changes a client's clock".to_string())
        } else {
            faketime_applies(&setup.command.program)
        };
        Ok(Clients {
            supervisor: Supervisor::new().map_err(|e| format!("cannot start the guardian: {e}"))?,
            command: setup.command,
            ports: setup.ports,
            masters: setup.masters,
            sentinels: setup.sentinels,
            seed: setup.seed,
            log_dir: setup.log_dir,
            runtime: setup.runtime,
            inbox: setup.inbox,
            faketime,
            procs: Mutex::default(),
            routes: Mutex::default(),
            applied: Mutex::default(),
        })
    }

    pub fn log_path(&self, client: &str) -> PathBuf {
        self.log_dir.join(format!("{client}.log"))
    }

    fn faketime_file(&self, client: &str) -> PathBuf {
        self.log_dir.join(format!("{client}.faketime"))
    }

    /// The environment a client process gets.
    pub fn env(&self, client: &str) -> Vec<(OsString, OsString)> {
        let list = |nodes: &[String]| self.ports.addresses(client, nodes).join(",");
        let mut env: Vec<(OsString, OsString)> = vec![
            ("LOCKSIM_CLIENT".into(), client.into()),
            ("LOCKSIM_REDIS".into(), list(&self.masters).into()),
            ("LOCKSIM_SENTINELS".into(), list(&self.sentinels).into()),
            (
                "LOCKSIM_RESOURCE".into(),
                list(&["resource".to_string()]).into(),
            ),
            ("LOCKSIM_SEED".into(), self.seed.to_string().into()),
        ];
        if let Ok(lib) = &self.faketime {
            env.extend([
                ("LD_PRELOAD".into(), lib.clone().into_os_string()),
                (
                    "FAKETIME_TIMESTAMP_FILE".into(),
                    self.faketime_file(client).into_os_string(),
                ),
                ("FAKETIME_NO_CACHE".into(), "1".into()),
                ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
                ("FAKETIME_XRESET".into(), "1".into()),
            ]);
        }
        env
    }

    /// Starts `client`'s process (its `incarnation`-th start) and returns the channel of its
    /// stdout lines.
    pub fn start(
        &self,
        client: &str,
        incarnation: u32,
    ) -> Result<UnboundedReceiver<Option<String>>, String> {
        if self.faketime.is_ok() && incarnation == 1 {
            std::fs::write(self.faketime_file(client), "+0s\n")
                .map_err(|e| format!("{client}: cannot write its libfaketime file: {e}"))?;
        }
        let mut process = self.supervisor.spawn(Spec {
            label: client.to_string(),
            program: self.command.program.clone(),
            args: self.command.args.clone(),
            env: self.env(client),
            piped: true,
            stderr: Some(self.log_path(client)),
            cwd: None,
        })?;
        let stdout = process.stdout.take().expect("piped");
        let (tx, rx) = unbounded_channel();
        self.routes
            .lock()
            .expect("never poisoned")
            .insert(client.to_string(), (incarnation, tx));
        let old = self
            .procs
            .lock()
            .expect("never poisoned")
            .insert(client.to_string(), process);
        if let Some(mut old) = old {
            self.supervisor.kill(&mut old);
        }
        let (inbox, client) = (self.inbox.clone(), client.to_string());
        let _guard = self.runtime.enter();
        let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout.into())
            .map_err(|e| format!("{client}: cannot read its stdout: {e}"))?;
        self.runtime.spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                inbox.push(Inbound::Line {
                    client: client.clone(),
                    incarnation,
                    line: Some(line),
                });
            }
            inbox.push(Inbound::Line {
                client,
                incarnation,
                line: None,
            });
        });
        Ok(rx)
    }

    /// Appends a line of an observed client's stdout to its log.
    pub fn log_stdout(&self, client: &str, line: &str) {
        use std::io::Write;
        let path = self.log_path(client);
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
        {
            let _ = writeln!(file, "[stdout] {line}");
        }
    }

    /// Hands a line of `client`'s stdout to its driver (from the pacer, in the simulation).
    pub fn route(&self, client: &str, incarnation: u32, line: Option<String>) {
        if let Some((current, tx)) = self.routes.lock().expect("never poisoned").get(client)
            && *current == incarnation
        {
            let _ = tx.send(line);
        }
    }

    /// Writes one protocol line to `client`'s stdin.
    pub fn send(&self, client: &str, line: &str) -> Result<(), String> {
        let mut procs = self.procs.lock().expect("never poisoned");
        let process = procs
            .get_mut(client)
            .ok_or_else(|| format!("{client}: no process"))?;
        let stdin = process
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{client}: its stdin is closed"))?;
        write_line(stdin, line).map_err(|e| format!("{client}: cannot write to its stdin: {e}"))
    }

    /// How `client`'s process ended, if it did, and the end of its log.
    pub fn exit_report(&self, client: &str) -> String {
        // Its stdout closed: it is exiting, give it a moment to be reaped.
        let mut status = None;
        for _ in 0..100 {
            status = self
                .procs
                .lock()
                .expect("never poisoned")
                .get_mut(client)
                .and_then(Process::exited);
            if status.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let status = status.unwrap_or_else(|| "still running".into());
        let log = self.log_path(client);
        let mut text = String::new();
        let _ = std::fs::File::open(&log).and_then(|mut f| f.read_to_string(&mut text));
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        if tail.is_empty() {
            format!("{status}; its log {} is empty", log.display())
        } else {
            format!(
                "{status}; the end of its log {}:\n  {}",
                log.display(),
                tail.join("\n  ")
            )
        }
    }

    /// Holds `client` when a pause holds its node but its process missed the SIGSTOP: a pause
    /// that begins before the process exists (`at_ms: 0`: the run's clock starts before the
    /// clients do) found none to stop, yet the simulation's paused client does nothing until
    /// the resume. Stopped now, the process is continued by that pause's own resume
    /// (`ExternalProcesses::resume` sends SIGCONT). True when the node is paused.
    pub fn stop_if_paused(&self, procs: &crate::world::procs::Procs, client: &str) -> bool {
        let paused = procs.is_paused(client);
        if paused {
            self.signal(client, libc::SIGSTOP, "SIGSTOP");
        }
        paused
    }

    /// The workload is over for `client`: close its stdin (a well-behaved client exits on EOF).
    pub fn finish(&self, client: &str) {
        if let Some(process) = self.procs.lock().expect("never poisoned").get_mut(client) {
            process.stdin = None;
        }
    }

    /// Stops every process (SIGTERM, then SIGKILL after `grace`); returns a note for each that
    /// had to be killed.
    pub fn stop_all(&self, grace: std::time::Duration) -> Vec<String> {
        let processes: Vec<Process> =
            std::mem::take(&mut *self.procs.lock().expect("never poisoned"))
                .into_values()
                .collect();
        self.supervisor
            .terminate_all(processes, grace)
            .into_iter()
            .filter(|(_, how)| how.starts_with("killed"))
            .map(|(label, how)| format!("{label}: {how}"))
            .collect()
    }

    /// The faults as realised on the processes, in order.
    pub fn applied(&self) -> Vec<Applied> {
        self.applied.lock().expect("never poisoned").clone()
    }

    fn note(&self, node: &str, action: String, not_applied_because: Option<String>) {
        self.applied.lock().expect("never poisoned").push(Applied {
            wall_us: real_unix_us(),
            node: node.to_string(),
            action,
            applied: not_applied_because.is_none(),
            not_applied_because,
        });
    }

    fn signal(&self, node: &str, signal: i32, name: &str) {
        let pid = self
            .procs
            .lock()
            .expect("never poisoned")
            .get(node)
            .map(|p| p.pid);
        match pid {
            Some(pid) => {
                self.supervisor.signal(pid, signal);
                self.note(node, format!("killpg({pid}, {name})"), None);
            }
            None => self.note(
                node,
                name.to_string(),
                Some("no process is running for it".into()),
            ),
        }
    }

    /// The clock listener: writes `client`'s libfaketime file.
    pub fn clock(&self, node: &str, offset_ms: i64, rate: f64) {
        if !node.starts_with("client-") {
            return;
        }
        // libfaketime's relative format (README "Advanced time specification options"):
        // `+60s`, with ` x<rate>` only when the clock runs at another speed.
        let mut setting = format!("{:+}s", offset_ms as f64 / 1000.0);
        if rate != 1.0 {
            setting.push_str(&format!(" x{rate}"));
        }
        match &self.faketime {
            Err(why) => self.note(node, format!("clock {setting}"), Some(why.clone())),
            Ok(_) => {
                let file = self.faketime_file(node);
                match std::fs::write(&file, format!("{setting}\n")) {
                    Ok(()) => self.note(
                        node,
                        format!("libfaketime {} ← {setting}", file.display()),
                        None,
                    ),
                    Err(e) => self.note(node, format!("clock {setting}"), Some(e.to_string())),
                }
            }
        }
    }
}

impl ExternalProcesses for Clients {
    fn pause(&self, node: &str) -> bool {
        if !node.starts_with("client-") {
            return false;
        }
        self.signal(node, libc::SIGSTOP, "SIGSTOP");
        true
    }

    fn resume(&self, node: &str) -> bool {
        if !node.starts_with("client-") {
            return false;
        }
        self.signal(node, libc::SIGCONT, "SIGCONT");
        true
    }

    fn crash(&self, node: &str) {
        if !node.starts_with("client-") {
            return;
        }
        self.routes.lock().expect("never poisoned").remove(node);
        let process = self.procs.lock().expect("never poisoned").remove(node);
        match process {
            Some(mut process) => {
                let pid = process.pid;
                self.supervisor.kill(&mut process);
                self.note(node, format!("killpg({pid}, SIGKILL)"), None);
            }
            None => self.note(
                node,
                "SIGKILL".into(),
                Some("no process is running for it".into()),
            ),
        }
    }
}

/// Whether libfaketime can change `program`'s clock: it must be installed, and the program
/// must call libc's clock (not a static or Go binary: they read the vDSO themselves).
pub fn faketime_applies(program: &std::ffi::OsStr) -> Result<PathBuf, String> {
    let lib = PathBuf::from(LIBFAKETIME);
    if !lib.exists() {
        return Err(format!(
            "libfaketime is not installed ({LIBFAKETIME}; Debian package libfaketime)"
        ));
    }
    let path = resolve_program(program)
        .ok_or_else(|| format!("{} not found on PATH", program.to_string_lossy()))?;
    let mut head = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(1 << 20).read_to_end(&mut head))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if head.starts_with(b"#!") {
        return Ok(lib);
    }
    if !head.starts_with(b"\x7fELF") {
        return Ok(lib);
    }
    let mut all = head;
    let _ = std::fs::File::open(&path).and_then(|mut f| {
        all.clear();
        f.read_to_end(&mut all)
    });
    if find(&all, b"\xff Go buildinf:").is_some() {
        return Err(format!(
            "{} is a Go binary: Go reads the clock without libc, so libfaketime cannot change it",
            path.display()
        ));
    }
    if !has_interpreter(&all) {
        return Err(format!(
            "{} is a static binary: LD_PRELOAD (libfaketime) does not reach it",
            path.display()
        ));
    }
    Ok(lib)
}

fn resolve_program(program: &std::ffi::OsStr) -> Option<PathBuf> {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return path.exists().then(|| path.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether a 64-bit little-endian ELF file has a `PT_INTERP` program header (is dynamically
/// linked).
fn has_interpreter(elf: &[u8]) -> bool {
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let (Some(phoff), Some(entsize), Some(count)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return true;
    };
    (0..count as usize).any(|i| u32_at(phoff as usize + i * entsize as usize) == Some(3))
}
