//! `locksim schemes`: every lock scheme of the catalog (`model::locks::SCHEMES`).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Print a JSON array of {id, summary, source, default_ttl_ms} instead.
    #[arg(long)]
    json: bool,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    print!("{}", listing(args.json));
    Ok(ExitCode::SUCCESS)
}

/// Every scheme, one per line (`id  summary  [source]`), or with `json` a JSON array of
/// `{id, summary, source, default_ttl_ms}` (0: no TTL).
pub fn listing(json: bool) -> String {
    let schemes = model::locks::SCHEMES;
    if json {
        let list: Vec<serde_json::Value> = schemes
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "summary": s.summary,
                    "source": s.source,
                    "default_ttl_ms": s.default_ttl_ms,
                })
            })
            .collect();
        return serde_json::to_string_pretty(&list).expect("JSON values serialise") + "\n";
    }
    let width = schemes.iter().map(|s| s.id.len()).max().unwrap_or(0);
    schemes
        .iter()
        .map(|s| {
            format!(
                "{:width$}  {}\n{:width$}  source: {}\n",
                s.id, s.summary, "", s.source
            )
        })
        .collect()
}
