//! Renders locksim results for people: a text summary of a run and its timeline picture.

pub mod text;
pub mod timeline;
