//! What the command tests share: the catalog's files, a fresh temporary folder, the binary.
#![allow(dead_code)] // each test crate uses some of these

use std::path::PathBuf;
use std::process::Command;

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A file of the catalog (`scenarios/NAME`).
pub fn catalog(name: &str) -> PathBuf {
    repo().join("scenarios").join(name)
}

/// A fresh temporary folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("locksim-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the `locksim` binary with `args`.
pub fn locksim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_locksim"))
        .args(args)
        .output()
        .expect("the locksim binary runs")
}

/// A `locksim serve` on a free loopback port, killed and reaped when dropped.
pub struct Serve {
    pub child: std::process::Child,
    pub port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `locksim serve --port P ARGS...` and waits until it accepts connections (another
/// process may take the port between our probe and its bind: then it tries another port).
pub fn serve(args: &[&str]) -> Serve {
    let command = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_locksim"));
        command.arg("serve");
        command
    };
    start_on_free_port(command, args).expect("locksim serve did not start")
}

/// Starts Debian's `redis-server` (no persistence) like `serve`; `None` if it is not installed
/// and `LOCKSIM_SKIP_REDIS=1` says the tests may do without it.
pub fn redis_server(args: &[&str]) -> Option<Serve> {
    let command = || {
        let mut command = Command::new("redis-server");
        command.args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]);
        command
    };
    match start_on_free_port(command, args) {
        Some(server) => Some(server),
        None if std::env::var("LOCKSIM_SKIP_REDIS").as_deref() == Ok("1") => None,
        None => panic!("redis-server did not start (LOCKSIM_SKIP_REDIS=1 skips the comparison)"),
    }
}

/// Runs `command() --port P ARGS...` on a free loopback port until it accepts connections.
fn start_on_free_port(command: impl Fn() -> Command, args: &[&str]) -> Option<Serve> {
    use std::net::{TcpListener, TcpStream};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    for _ in 0..10 {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let Ok(child) = command()
            .args(["--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        else {
            return None;
        };
        let mut server = Serve { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.child.try_wait() {
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    None
}
