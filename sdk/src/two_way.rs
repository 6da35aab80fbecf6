//! Two-way sync.

pub mod ops;
