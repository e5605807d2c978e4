//! `locksim schemes`: every lock scheme of the catalog (`model::locks::SCHEMES`) and each of
//! its named presets — every row a scenario's `"schemes": "all"` can run.

use std::process::ExitCode;

use model::locks::{Lease, Row, all_rows};

#[derive(clap::Args)]
pub struct Args {
    /// Print a JSON array of {id, summary, source, default_ttl_ms, family, lease, presets}
    /// instead.
    #[arg(long)]
    json: bool,
}

pub fn execute(args: Args) -> Result<ExitCode, String> {
    print!("{}", listing(args.json));
    Ok(ExitCode::SUCCESS)
}

fn lease_name(lease: Lease) -> &'static str {
    match lease {
        Lease::None => "none",
        Lease::Ms => "ms",
        Lease::Seconds => "seconds",
    }
}

/// What `"schemes": "all"` does with a row (for the listing).
fn role(row: &Row) -> String {
    match row.preset.and_then(|p| p.same_as) {
        Some(other) => format!("same as {other}"),
        None if row.scheme.in_all => "in \"all\"".into(),
        None => "not in \"all\"".into(),
    }
}

/// Every row (a scheme, then its named presets as `id:preset`), one entry each with its
/// summary, source and whether `"schemes": "all"` runs it; or with `json` a JSON array of the
/// schemes, `{id, summary, source, default_ttl_ms, family, lease, in_all, presets: [{name,
/// label, summary, lease, same_as}]}` (`default_ttl_ms` 0: no TTL; `lease`: none, ms or
/// seconds).
pub fn listing(json: bool) -> String {
    let schemes = model::locks::SCHEMES;
    if json {
        let list: Vec<serde_json::Value> = schemes
            .iter()
            .map(|s| {
                let presets: Vec<serde_json::Value> = s
                    .presets
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "name": p.name,
                            "label": format!("{}:{}", s.id, p.name),
                            "summary": p.summary,
                            "lease": lease_name(p.lease),
                            "same_as": p.same_as,
                        })
                    })
                    .collect();
                serde_json::json!({
                    "id": s.id,
                    "summary": s.summary,
                    "source": s.source,
                    "default_ttl_ms": s.default_ttl_ms,
                    "family": s.family.title(),
                    "lease": lease_name(s.lease),
                    "in_all": s.in_all,
                    "presets": presets,
                })
            })
            .collect();
        return serde_json::to_string_pretty(&list).expect("JSON values serialise") + "\n";
    }
    let rows = all_rows();
    let width = rows.iter().map(|r| r.label().len()).max().unwrap_or(0);
    rows.iter()
        .map(|r| {
            let lease = match r.lease() {
                Lease::None => "no lease",
                Lease::Ms => "lease in ms",
                Lease::Seconds => "lease in whole seconds",
            };
            let mut text = format!("{:width$}  {}\n", r.label(), r.summary());
            if r.preset.is_none() {
                text.push_str(&format!("{:width$}  source: {}\n", "", r.scheme.source));
            }
            text.push_str(&format!(
                "{:width$}  {lease}; {}; {}\n",
                "",
                r.scheme.family.title(),
                role(r)
            ));
            text
        })
        .collect()
}
