//! `locksim schema`: prints the JSON Schema of scenario files, generated from the loader's
//! types (`scenario::schema`). `docs/scenario.schema.json` is its output
//! (`locksim schema > docs/scenario.schema.json`; a test keeps the two equal).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn execute(_: Args) -> Result<ExitCode, String> {
    print!("{}", schema_text());
    Ok(ExitCode::SUCCESS)
}

/// The schema as the committed file holds it: pretty JSON and a final newline.
pub fn schema_text() -> String {
    serde_json::to_string_pretty(&crate::scenario::schema::scenario_schema())
        .expect("schemas serialise")
        + "\n"
}
