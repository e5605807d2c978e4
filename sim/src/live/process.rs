//! Process hygiene for everything a live run starts (client processes, redis-server,
//! redis-sentinel): nothing outlives locksim, whatever way it ends.
//!
//! Three layers, because each alone has a hole:
//! - every child is the leader of its own process group (`setpgid(0, 0)`), so one `killpg`
//!   reaches whatever it forked (a shell's `exec`-less children, a JVM's helpers), and so a
//!   terminal's Ctrl-C (sent to locksim's foreground group) does not hit it before locksim
//!   decides to stop it;
//! - `PR_SET_PDEATHSIG` = SIGKILL: the kernel kills the child when the thread that forked it
//!   dies. That is a *thread*, not the process (prctl(2)), so every spawn happens on one
//!   spawner thread the [`Supervisor`] owns for its whole life;
//! - the guardian: a tiny process forked when the supervisor starts that holds the read end of
//!   a pipe of which only locksim holds the write end (`O_CLOEXEC`, so no child inherits it).
//!   locksim tells it each group it starts and reaps; when the pipe reads EOF — locksim exited
//!   or was killed, even by SIGKILL — it SIGKILLs every group still registered and exits. It
//!   covers what PDEATHSIG cannot: grandchildren, and children that reset their death signal.
//!
//! Stopping a child ([`Supervisor::terminate`]): SIGCONT (a paused group must be able to act on
//! SIGTERM) and SIGTERM to the group, up to a grace period, then SIGKILL, then `waitpid`.
//! SIGINT/SIGTERM of locksim itself set a flag ([`stop_requested`]) that the live run polls: it
//! stops and reaps as on any other end.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The environment variable every child of a supervisor carries: `<locksim pid>-<n>`. Tests
/// (and a worried user) find a run's processes by it in `/proc/*/environ`.
pub const MARKER_ENV: &str = "LOCKSIM_LIVE_RUN";

/// What to start.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Who it is, for every message about it (`client-1`, `redis-2`).
    pub label: String,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// A pipe to its stdin and from its stdout (the driver protocol); else /dev/null.
    pub piped: bool,
    /// Its stderr goes to this file (appended: a respawn adds to the same log); else inherited.
    pub stderr: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
}

/// A started process: the leader of its own group (pid = pgid).
pub struct Process {
    pub label: String,
    pub pid: i32,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    child: Child,
}

impl Process {
    /// Whether it has exited; reaps it if so (its exit status, as text).
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot wait for it: {e}")),
        }
    }
}

type SpawnRequest = (Spec, Sender<Result<Process, String>>);

/// Starts and stops the processes of one live run; dropping it kills and reaps every process
/// it started that is still registered, and ends its guardian.
pub struct Supervisor {
    marker: String,
    spawner: Option<(Sender<SpawnRequest>, JoinHandle<()>)>,
    guardian: Guardian,
    /// Groups started and not yet reaped.
    groups: Arc<Mutex<Vec<i32>>>,
}

impl Supervisor {
    /// Forks the guardian and starts the spawner thread. Call it before any madsim runtime
    /// exists on this thread: madsim refuses to start OS threads inside a simulation.
    pub fn new() -> io::Result<Supervisor> {
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let marker = format!(
            "{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        let guardian = Guardian::fork()?;
        let groups: Arc<Mutex<Vec<i32>>> = Arc::default();
        let (tx, rx) = channel::<SpawnRequest>();
        let thread_groups = groups.clone();
        let thread_marker = marker.clone();
        let guardian_fd = guardian.fd();
        let thread = std::thread::Builder::new()
            .name("live-spawner".into())
            .spawn(move || {
                for (spec, reply) in rx {
                    let started = start(&spec, &thread_marker);
                    if let Ok(process) = &started {
                        thread_groups
                            .lock()
                            .expect("never poisoned")
                            .push(process.pid);
                        guardian_send(guardian_fd, process.pid);
                    }
                    let _ = reply.send(started);
                }
            })?;
        Ok(Supervisor {
            marker,
            spawner: Some((tx, thread)),
            guardian,
            groups,
        })
    }

    /// The value of [`MARKER_ENV`] in this supervisor's children.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Starts `spec` in its own process group, on the spawner thread.
    pub fn spawn(&self, spec: Spec) -> Result<Process, String> {
        let label = spec.label.clone();
        let (reply, answer) = channel();
        let (requests, _) = self.spawner.as_ref().expect("until dropped");
        requests
            .send((spec, reply))
            .map_err(|_| format!("{label}: the spawner thread is gone"))?;
        answer
            .recv()
            .map_err(|_| format!("{label}: the spawner thread is gone"))?
    }

    /// Sends `signal` to the whole group of `pid`.
    pub fn signal(&self, pid: i32, signal: i32) {
        // SAFETY: killpg with a group this supervisor started; at worst ESRCH.
        unsafe {
            libc::killpg(pid, signal);
        }
    }

    /// Stops `process` and its group: SIGCONT + SIGTERM, `grace` to exit, then SIGKILL; reaps
    /// it. Returns how it ended ("exited after SIGTERM", "killed (SIGKILL) after ignoring
    /// SIGTERM for 500 ms", or that it had already exited).
    pub fn terminate(&self, process: &mut Process, grace: Duration) -> String {
        let mut ended = self.stop(&mut [process], grace);
        ended.pop().map(|(_, how)| how).unwrap_or_default()
    }

    /// Stops many processes at once, as [`Supervisor::terminate`] (one grace period for all);
    /// returns each one's label and how it ended.
    pub fn terminate_all(
        &self,
        mut processes: Vec<Process>,
        grace: Duration,
    ) -> Vec<(String, String)> {
        let mut all: Vec<&mut Process> = processes.iter_mut().collect();
        self.stop(&mut all, grace)
    }

    /// SIGCONT + SIGTERM to every group, one grace period, SIGKILL, reap. Which processes had
    /// already exited is read before any signal is sent: read after, a child that SIGTERM ends
    /// at once would pass for one that had exited on its own.
    fn stop(&self, processes: &mut [&mut Process], grace: Duration) -> Vec<(String, String)> {
        let mut ended: Vec<Option<String>> = processes
            .iter_mut()
            .map(|p| {
                p.exited()
                    .map(|status| format!("had already exited ({status})"))
            })
            .collect();
        for (process, end) in processes.iter().zip(&ended) {
            if end.is_none() {
                self.signal(process.pid, libc::SIGCONT);
                self.signal(process.pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && ended.iter().any(Option::is_none) {
            std::thread::sleep(Duration::from_millis(5));
            for (process, end) in processes.iter_mut().zip(ended.iter_mut()) {
                if end.is_none() {
                    *end = process.exited().map(|_| "exited after SIGTERM".to_string());
                }
            }
        }
        processes
            .iter_mut()
            .zip(ended)
            .map(|(process, end)| {
                self.signal(process.pid, libc::SIGKILL);
                let how = end.unwrap_or_else(|| {
                    let _ = process.child.wait();
                    format!(
                        "killed (SIGKILL) after ignoring SIGTERM for {} ms",
                        grace.as_millis()
                    )
                });
                self.forget(process.pid);
                (process.label.clone(), how)
            })
            .collect()
    }

    /// Kills `process`'s group at once (a `crash` fault) and reaps it.
    pub fn kill(&self, process: &mut Process) {
        self.signal(process.pid, libc::SIGKILL);
        let _ = process.child.wait();
        self.forget(process.pid);
    }

    fn forget(&self, pid: i32) {
        self.groups
            .lock()
            .expect("never poisoned")
            .retain(|&p| p != pid);
        guardian_send(self.guardian.fd(), -pid);
    }

    /// Test hook: closes the guardian's pipe without killing anything, as locksim's death does.
    #[cfg(test)]
    fn abandon(mut self) {
        self.groups.lock().expect("never poisoned").clear();
        let (requests, thread) = self.spawner.take().expect("until dropped");
        drop(requests);
        let _ = thread.join();
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let groups = std::mem::take(&mut *self.groups.lock().expect("never poisoned"));
        for pid in groups {
            // SAFETY: as `signal`; then reap the leader (not our child any more: ECHILD).
            unsafe {
                libc::killpg(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            guardian_send(self.guardian.fd(), -pid);
        }
        if let Some((requests, thread)) = self.spawner.take() {
            drop(requests);
            let _ = thread.join();
        }
    }
}

/// Starts one process (on the spawner thread): own group, death signal, marker, pipes.
fn start(spec: &Spec, marker: &str) -> Result<Process, String> {
    let label = &spec.label;
    let mut command = Command::new(&spec.program);
    command.args(&spec.args);
    command.envs(spec.env.iter().map(|(k, v)| (k, v)));
    command.env(MARKER_ENV, marker);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    if spec.piped {
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
    } else {
        command.stdin(Stdio::null()).stdout(Stdio::null());
    }
    if let Some(path) = &spec.stderr {
        let log = File::options()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("{label}: cannot open its log {}: {e}", path.display()))?;
        command.stderr(log);
    }
    command.process_group(0);
    // SAFETY: the closure calls only async-signal-safe functions (prctl, getppid, kill).
    let parent = unsafe { libc::getpid() };
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died between fork and prctl: nobody would kill us later.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| {
        format!(
            "{label}: cannot start {}: {e}",
            spec.program.to_string_lossy()
        )
    })?;
    Ok(Process {
        label: label.clone(),
        pid: child.id() as i32,
        stdin: child.stdin.take(),
        stdout: child.stdout.take(),
        child,
    })
}

/// The forked watcher (see the module comment). `writer` is locksim's end of its pipe.
struct Guardian {
    pid: i32,
    writer: Option<File>,
}

/// The most groups the guardian tracks at once; more are still killed by PDEATHSIG.
const GUARDED_MAX: usize = 4096;

impl Guardian {
    fn fork() -> io::Result<Guardian> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 with a valid array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here alone.
        let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        // SAFETY: the child runs only async-signal-safe calls and `_exit`s; it never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            unsafe { guard(reader.as_raw_fd(), writer.as_raw_fd()) }
        }
        drop(reader);
        Ok(Guardian {
            pid,
            writer: Some(writer),
        })
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // Closing the pipe is the guardian's signal to end.
        drop(self.writer.take());
        // SAFETY: our own child.
        unsafe {
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

impl Guardian {
    fn fd(&self) -> i32 {
        self.writer.as_ref().map_or(-1, |w| w.as_raw_fd())
    }
}

/// Registers (`pid` > 0) or unregisters (`-pid`) a group with the guardian. A 4-byte write
/// to a pipe is atomic (PIPE_BUF), so threads need no lock.
fn guardian_send(fd: i32, pid: i32) {
    let bytes = pid.to_le_bytes();
    // SAFETY: writing 4 bytes from a local array to our pipe.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    }
}

/// The guardian's whole life, in the forked child: only async-signal-safe calls, no
/// allocation (the parent may have had other threads holding the allocator's locks).
unsafe fn guard(reader: i32, writer: i32) -> ! {
    unsafe {
        libc::close(writer);
        // Keep nothing of the parent's open: its sockets and pipes must close when it dies.
        libc::dup2(reader, 3);
        let closed = libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
        if closed != 0 {
            for fd in 4..65536 {
                libc::close(fd);
            }
        }
        if reader != 3 {
            libc::close(reader);
        }
        // A terminal's Ctrl-C reaches the whole foreground group, the guardian included: it
        // must outlive locksim to do its work, so only EOF ends it.
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_IGN);
        }
        libc::prctl(libc::PR_SET_NAME, c"locksim-guard".as_ptr(), 0, 0, 0);
        let mut groups = [0i32; GUARDED_MAX];
        let mut count = 0usize;
        let mut buf = [0u8; 4];
        let mut have = 0usize;
        loop {
            let n = libc::read(3, buf.as_mut_ptr().add(have).cast(), 4 - have);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            have += n as usize;
            if have < 4 {
                continue;
            }
            have = 0;
            let pid = i32::from_le_bytes(buf);
            if pid > 0 && count < GUARDED_MAX {
                groups[count] = pid;
                count += 1;
            } else if pid < 0 {
                let mut i = 0;
                while i < count {
                    if groups[i] == -pid {
                        count -= 1;
                        groups[i] = groups[count];
                    } else {
                        i += 1;
                    }
                }
            }
        }
        for &pid in &groups[..count] {
            libc::kill(-pid, libc::SIGKILL);
        }
        libc::_exit(0)
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

/// Makes SIGINT and SIGTERM of locksim set the stop flag instead of killing it at once, so a
/// live run can stop its processes and reap them. Idempotent.
pub fn install_stop_signals() {
    extern "C" fn on_signal(_: i32) {
        STOP.store(true, Ordering::SeqCst);
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(i32) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Whether SIGINT or SIGTERM arrived since [`install_stop_signals`].
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Blocks SIGPIPE on the calling thread: a write to the stdin of a client that died then fails
/// with EPIPE (reported with the client's exit status) instead of killing locksim (`main`
/// restores SIGPIPE's default). SIGPIPE is sent to the writing thread, so the rest of the
/// process keeps the default.
pub fn block_sigpipe_on_this_thread() {
    // SAFETY: a signal set on the stack, then this thread's own mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Writes a line to a child's stdin; a broken pipe is the child's death, reported by the
/// caller from its exit status.
pub fn write_line(stdin: &mut ChildStdin, line: &str) -> io::Result<()> {
    stdin.write_all(line.as_bytes())?;
    stdin.write_all(b"\n")?;
    stdin.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(label: &str, script: &str) -> Spec {
        Spec {
            label: label.into(),
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            piped: false,
            stderr: None,
            cwd: None,
        }
    }

    fn alive(pid: i32) -> bool {
        // SAFETY: signal 0 only checks that the group exists.
        unsafe { libc::killpg(pid, 0) == 0 }
    }

    /// Whether the group is gone within 4 s (its leader, our child, reaped as it ends: a
    /// zombie still counts as a member of its group).
    fn wait_gone(pid: i32) -> bool {
        for _ in 0..400 {
            // SAFETY: reaping our own child if it ended; ECHILD once reaped.
            unsafe {
                libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
            }
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_child_that_ignores_sigterm_is_killed_after_the_grace_period() {
        let supervisor = Supervisor::new().unwrap();
        let mut process = supervisor
            .spawn(sh("stubborn", "trap '' TERM; while :; do sleep 1; done"))
            .unwrap();
        let pid = process.pid;
        std::thread::sleep(Duration::from_millis(100));
        let how = supervisor.terminate(&mut process, Duration::from_millis(200));
        assert!(how.starts_with("killed (SIGKILL)"), "{how}");
        assert!(wait_gone(pid));
    }

    #[test]
    fn a_polite_child_exits_on_sigterm_even_when_stopped() {
        let supervisor = Supervisor::new().unwrap();
        let mut process = supervisor.spawn(sh("polite", "sleep 30")).unwrap();
        supervisor.signal(process.pid, libc::SIGSTOP);
        let how = supervisor.terminate(&mut process, Duration::from_secs(5));
        assert_eq!(how, "exited after SIGTERM");
    }

    #[test]
    fn dropping_the_supervisor_kills_every_group_grandchildren_included() {
        let supervisor = Supervisor::new().unwrap();
        // The shell forks a sleep that is not the group leader.
        let process = supervisor.spawn(sh("parent", "sleep 30 & wait")).unwrap();
        let pid = process.pid;
        drop(process);
        drop(supervisor);
        assert!(wait_gone(pid));
    }

    #[test]
    fn the_guardian_kills_the_groups_when_the_pipe_closes() {
        let supervisor = Supervisor::new().unwrap();
        let process = supervisor.spawn(sh("orphan", "sleep 30 & wait")).unwrap();
        let pid = process.pid;
        std::mem::forget(process);
        // As if locksim died: the groups are still registered with the guardian only.
        supervisor.abandon();
        assert!(wait_gone(pid), "the guardian did not kill group {pid}");
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let supervisor = Supervisor::new().unwrap();
        let spec = Spec {
            program: "/nonexistent/locksim-client".into(),
            ..sh("client-1", "")
        };
        let error = supervisor.spawn(spec).err().unwrap();
        assert!(error.starts_with("client-1: cannot start /nonexistent/locksim-client"));
    }
}
