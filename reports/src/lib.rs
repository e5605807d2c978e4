//! Renders locksim results for people: a text summary of a run, its timeline picture and its
//! event log; and for many runs the aggregate numbers (`summary`), the charts, and the
//! comparison report as HTML and Markdown.

pub mod charts;
pub mod events;
pub mod html;
pub mod incidents;
pub mod markdown;
pub mod summary;
pub mod text;
pub mod timeline;
