//! Renders locksim results for people: a text summary of a run, its timeline picture and its
//! event log; and for many runs the aggregate numbers (`summary`), the charts, and the
//! comparison report as HTML and Markdown — the fault matrix (`matrix`) and the debate
//! (`debate`) at its head; JUnit XML for CI systems (`junit`).

pub mod charts;
pub mod debate;
pub mod events;
pub mod html;
pub mod incidents;
pub mod junit;
pub mod markdown;
pub mod matrix;
pub mod summary;
pub mod text;
pub mod timeline;
