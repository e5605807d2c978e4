//! `locksim serve`: the simulated Redis on a real TCP port, on the real clock (`crate::serve`).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The port to listen on.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// The address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    let Args { port, bind } = args;
    let listener = std::net::TcpListener::bind((bind.as_str(), port))
        .map_err(|e| format!("serve: cannot listen on {bind}:{port}: {e}"))?;
    eprintln!(
        "locksim serve: the simulated Redis 7.0 listening on {bind}:{port} (Ctrl-C stops it)"
    );
    crate::serve::serve_listener(listener).map_err(|e| format!("serve: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
