//! `locksim serve` survives its clients (issue 13): a script past `lua-time-limit` makes everyone
//! else get `-BUSY` and yields to `SCRIPT KILL` (or refuses it once it wrote, until `SHUTDOWN
//! NOSAVE`), a script past the heap limit gets Lua's "not enough memory", `maxclients` answers
//! Redis's error, `requirepass` is enforced, and SIGTERM stops the server cleanly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use model::redis::Reply;
use model::redis::resp::encode_command;

mod common;
use common::{Serve, serve};

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn send(conn: &mut TcpStream, argv: &[&str]) {
    conn.write_all(&encode_command(argv)).unwrap();
}

fn read_reply(conn: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 65536];
    while !matches!(Reply::decode_resp3(&out), Ok(Some(_))) {
        match conn.read(&mut byte) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&byte[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn call(conn: &mut TcpStream, argv: &[&str]) -> String {
    send(conn, argv);
    read_reply(conn)
}

const BUSY: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

#[test]
fn a_busy_script_yields_to_script_kill_and_everyone_else_gets_busy() {
    // The limits scaled down (defaults 5 s and 1 GiB, exercised at full size by
    // scripts/serve-runaway-scripts.sh).
    let server = serve(&["--lua-time-limit", "200", "--lua-memory-limit-mb", "64"]);
    let mut runner = connect(server.port);
    let mut other = connect(server.port);
    assert_eq!(call(&mut other, &["SET", "k", "v"]), "+OK\r\n");
    send(&mut runner, &["EVAL", "while true do end", "0"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(call(&mut other, &["GET", "k"]), BUSY);
    let mut late = connect(server.port);
    assert_eq!(
        call(&mut late, &["PING"]),
        BUSY,
        "a connection made meanwhile"
    );
    assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), "+OK\r\n");
    let killed = read_reply(&mut runner);
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: ")
            && killed.ends_with(", on @user_script:1.\r\n"),
        "{killed}"
    );
    assert_eq!(call(&mut late, &["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(call(&mut runner, &["PING"]), "+PONG\r\n");

    // A long script that ends by itself: the others may get -BUSY meanwhile, it is not stopped.
    send(
        &mut runner,
        &[
            "EVAL",
            "local n = 0 for i = 1, 2e7 do n = n + 1 end return n",
            "0",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let during = call(&mut other, &["PING"]);
    assert!(during == BUSY || during == "+PONG\r\n", "{during}");
    assert_eq!(read_reply(&mut runner), ":20000000\r\n");
    assert_eq!(call(&mut other, &["PING"]), "+PONG\r\n");

    // Past the heap limit: Lua's memory error, and the server goes on.
    for script in [
        "local t = {} for i = 1, 3 do t[i] = string.rep('x', 3e7) end return #t",
        "return #string.rep('x', 1e8)",
        "local s = 'x' for i = 1, 40 do s = s .. s end return #s",
    ] {
        let reply = call(&mut runner, &["EVAL", script, "0"]);
        assert!(
            reply.starts_with("-ERR Error running script ")
                && reply.ends_with(", not enough memory\r\n"),
            "{script}: {reply}"
        );
    }
    assert_eq!(call(&mut other, &["GET", "k"]), "$1\r\nv\r\n");

    // A script that wrote cannot be killed: only SHUTDOWN NOSAVE ends it.
    send(
        &mut runner,
        &["EVAL", "redis.call('set', 'w', '1') while true do end", "0"],
    );
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        call(&mut other, &["SCRIPT", "KILL"])
            .starts_with("-UNKILLABLE Sorry the script already executed write commands")
    );
    send(&mut other, &["SHUTDOWN", "NOSAVE"]);
    exits_cleanly(server, "SHUTDOWN NOSAVE");
}

#[test]
fn maxclients_requirepass_and_sigterm() {
    let server = serve(&["--maxclients", "2", "--requirepass", "secret"]);
    // The start-up probe's connection must be gone first: it counts until the server sees it
    // closed, as in Redis.
    std::thread::sleep(Duration::from_millis(300));
    let mut a = connect(server.port);
    let mut b = connect(server.port);
    assert!(call(&mut a, &["PING"]).starts_with("-NOAUTH Authentication required."));
    assert!(call(&mut b, &["PING"]).starts_with("-NOAUTH Authentication required."));
    let mut third = connect(server.port);
    let mut got = Vec::new();
    let _ = third.read_to_end(&mut got);
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    assert_eq!(
        call(&mut a, &["AUTH", "wrong"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(call(&mut a, &["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(call(&mut a, &["PING"]), "+PONG\r\n");
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(server.child.id() as i32, libc::SIGTERM);
    }
    exits_cleanly(server, "SIGTERM");
}

/// The server process ends with status 0 within 10 s (after `what`).
fn exits_cleanly(mut server: Serve, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = server.child.try_wait() {
            assert!(status.success(), "{what}: {status}");
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} did not stop the server");
}
