//! Renders locksim results for people: a text summary of a run, its timeline picture and its
//! event log; and for many runs the aggregate numbers (`summary`), the charts, and the
//! comparison report as HTML and Markdown — which lock to use for what (`advice`), the fault
//! matrix (`matrix`) and the debate (`debate`) at its head, the incidents (`incidents`); JUnit
//! XML for CI systems (`junit`); and `audit`, which checks what a reader would see wrong.
//!
//! The analysis modules (`summary`, `matrix`, `advice`, `debate`, `incidents`) know nothing of
//! HTML; `html` and `markdown` render them.

pub mod accumulate;
pub mod advice;
pub mod audit;
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
