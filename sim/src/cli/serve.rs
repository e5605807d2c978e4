//! `locksim serve`: the simulated Redis on a real TCP port, on the real clock (`crate::serve`).

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The port to listen on.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// The address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// The default user's password (`requirepass`): clients must AUTH.
    #[arg(long)]
    requirepass: Option<String>,
    /// The most clients connected at once (`maxclients`).
    #[arg(long, default_value_t = 10_000)]
    maxclients: u64,
    /// After this long a running script makes other clients get -BUSY and can be stopped with
    /// SCRIPT KILL (`lua-time-limit`, ms).
    #[arg(long, default_value_t = 5000)]
    lua_time_limit: u64,
    /// The most memory Lua may use, in MB; a script that wants more fails with Lua's
    /// "not enough memory" error.
    #[arg(long, default_value_t = 1024)]
    lua_memory_limit_mb: usize,
    /// Also listen on this Unix socket path (`unixsocket`).
    #[arg(long)]
    unixsocket: Option<PathBuf>,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let Args {
        port,
        bind,
        requirepass,
        maxclients,
        lua_time_limit,
        lua_memory_limit_mb,
        unixsocket,
    } = args;
    let listener = std::net::TcpListener::bind((bind.as_str(), port))
        .map_err(|e| format!("serve: cannot listen on {bind}:{port}: {e}"))?;
    let port = listener.local_addr().map_or(port, |a| a.port());
    eprintln!(
        "locksim serve: the simulated Redis 7.0 listening on {bind}:{port} (Ctrl-C stops it)"
    );
    let options = crate::serve::ServeOptions {
        bind,
        port,
        requirepass,
        maxclients,
        lua_time_limit_ms: lua_time_limit,
        lua_memory_limit_bytes: lua_memory_limit_mb.saturating_mul(1 << 20),
        unixsocket,
    };
    crate::serve::serve(listener, options).map_err(|e| format!("serve: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
