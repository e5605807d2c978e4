//! The page's CSS, one stylesheet for every section, with a class per outcome colour
//! (`o-ok`, `o-corrupted`, …: the charts' colours, `charts::outcome_color`).

use std::fmt::Write;

use crate::charts::{hex, outcome_color};
use crate::summary::Outcome;

const BASE: &str = r#"
* { box-sizing: border-box; }
html { scroll-behavior: smooth; }
body { margin: 0; background: #eef0f2; color: #212121;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1220px; margin: 0 auto; padding: 22px 28px 40px; background: #fff; min-height: 100vh; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 30px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #e0e0e0; }
h3 { font-size: 15.5px; margin: 16px 0 4px; }
p { margin: 6px 0; }
.meta { color: #555; }
nav.toc { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid #e0e0e0; padding: 6px 0; margin: 8px 0 0; font-size: 13px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
nav.toc a { color: #1565c0; text-decoration: none; white-space: nowrap; }
.alert { background: #fff3e0; border: 1px solid #ffb74d; padding: 8px 12px; border-radius: 4px; margin: 10px 0; }
.alert.bad { background: #ffebee; border-color: #e57373; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 10px 0 4px; font-size: 13px; }
.legend span.sw { display: inline-block; width: 14px; height: 14px; border-radius: 3px; vertical-align: -2px; margin-right: 6px; }
figure { margin: 18px 0 8px; }
figure svg { max-width: 100%; height: auto; display: block; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; }
dl.scenarios dt { font-weight: 700; margin-top: 10px; }
dl.scenarios dd { margin: 2px 0 0 18px; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; font-size: 12.5px; overflow-wrap: anywhere; }
ul.mismatches li, ul.reproduce li { margin: 2px 0; }
.warn { color: #b71c1c; font-weight: 700; }
footer { margin-top: 30px; color: #777; font-size: 12.5px; }

/* The first screen: one block per use. */
div.uses { display: grid; grid-template-columns: repeat(3, 1fr); gap: 12px; margin: 10px 0; }
div.use { border: 1px solid #cfd8dc; border-radius: 6px; padding: 10px 12px; background: #fafbfc; }
div.use h3 { margin: 0 0 4px; }
div.use p.needs { font-size: 12.5px; color: #455a64; }
div.use p.hold { font-size: 14px; margin: 8px 0; padding: 6px 8px; border-radius: 4px; }
div.use p.hold.some { background: #e8f5e9; border-left: 4px solid #2e7d32; }
div.use p.hold.none { background: #ffebee; border-left: 4px solid #c62828; }
div.use ul.broken { margin: 6px 0 0; padding-left: 18px; font-size: 12.5px; }
div.use ul.broken li { margin: 3px 0; }
div.use p.judged { font-size: 11.5px; color: #666; margin-top: 8px; }
div.use details summary { font-size: 12.5px; color: #1565c0; cursor: pointer; margin-top: 4px; }

/* The fault matrix. */
table.fm { border-collapse: separate; border-spacing: 2px; table-layout: fixed; width: 100%; margin: 8px 0 4px; font-size: 12px; }
table.fm col.rowhead { width: 188px; }
table.fm th.fam { font-size: 11px; font-weight: 600; color: #444; border-bottom: 2px solid #90a4ae; padding: 0 2px 2px; text-align: center; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
table.fm th.col { height: 156px; vertical-align: bottom; padding: 0 0 4px; font-weight: 600; font-size: 11.5px; }
table.fm th.col span { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; display: inline-block; }
table.fm th.col.random span { font-style: italic; color: #37474f; }
table.fm th.cost span { color: #555; }
table.fm tbody th { text-align: right; font-weight: 600; padding: 1px 6px 1px 0; line-height: 1.2; }
table.fm tr.famrow th { text-align: left; padding: 8px 0 1px; font-size: 12px; color: #455a64; border-bottom: 1px solid #cfd8dc; }
td.fc { text-align: center; padding: 3px 0; border-radius: 3px; line-height: 1.15; white-space: nowrap; }
td.fc a { color: inherit; font-weight: 700; text-decoration: none; border-bottom: 1px dotted; }
td.fc small { display: block; font-size: 10px; color: #444; }
td.fc .warn { margin-left: 1px; }
td.cost { text-align: right; padding: 3px 3px; color: #333; font-size: 11px; white-space: nowrap; }
td.none { background: #f6f6f6; color: #b0b0b0; text-align: center; vertical-align: middle; border-radius: 3px; }
span.nolease { display: inline-block; font-size: 9.5px; font-weight: 600; color: #6d4c41; background: #efebe9; border-radius: 3px; padding: 0 3px; }
ul.breaks li { margin: 3px 0; }

/* The debate. */
table.debate { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 8px 0; }
table.debate th, table.debate td { border-bottom: 1px solid #e0e0e0; padding: 4px 6px; vertical-align: top; text-align: left; }
table.debate td.who { width: 150px; color: #455a64; font-weight: 600; }
table.debate td.agree { color: #1b5e20; }
table.debate td.disagree { color: #b71c1c; font-weight: 600; }
table.debate q { color: #555; }

/* Incidents: names break only where they may (after a slash or a hyphen). */
table.incidents { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 10px 0; table-layout: fixed; }
table.incidents col.case { width: 15%; } table.incidents col.lib { width: 11%; }
table.incidents col.side { width: 20%; } table.incidents col.mech { width: 34%; }
table.incidents th, table.incidents td { border-bottom: 1px solid #e0e0e0; padding: 5px 6px; text-align: left; vertical-align: top; overflow-wrap: normal; word-break: normal; }
table.incidents td span.n { font-weight: 700; }
table.incidents a.cell { font-size: 11.5px; }

/* The catalog: one row per scenario, a chip per scheme it runs. */
table.catalog { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 12.5px; table-layout: fixed; }
table.catalog col.sc { width: 300px; }
table.catalog th, table.catalog td { border-bottom: 1px solid #e0e0e0; padding: 5px 6px; text-align: left; vertical-align: top; }
table.catalog td.sc b { display: block; }
table.catalog td.sc span.meta { font-size: 11.5px; display: -webkit-box; -webkit-line-clamp: 3; -webkit-box-orient: vertical; overflow: hidden; }
span.chip { display: inline-block; margin: 2px 4px 2px 0; padding: 2px 6px; border-radius: 4px; border-left: 4px solid; line-height: 1.3; }
span.chip b { font-weight: 700; }
span.chip a { color: inherit; }
span.chip small { color: #444; }
"#;

/// The whole stylesheet.
pub fn css() -> String {
    let mut css = String::from(BASE);
    for outcome in Outcome::ALL {
        let c = outcome_color(outcome);
        let mix = |x: u8| (255.0 - (255.0 - x as f64) * 0.16).round() as u8;
        let bg = format!("#{:02x}{:02x}{:02x}", mix(c.0), mix(c.1), mix(c.2));
        let _ = writeln!(
            css,
            ".o-{name} {{ background: {bg}; border-left-color: {fg}; }}\n.sw.o-{name} {{ background: {fg}; }}",
            name = outcome.as_str(),
            fg = hex(c),
        );
    }
    css
}
