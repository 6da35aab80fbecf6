//! The FUSE filesystem over a bucket. The kernel's requests arrive on fuser's threads;
//! whatever needs the store runs as a task on the tokio runtime and replies when done, so
//! a slow GET never holds up a `stat` of a cached name.

mod bucket;
mod eager;
mod files;
mod filesystem;
mod kernel;
pub mod keys;
mod lock;
mod names;
mod reader;
mod spill;
pub mod tree;

#[cfg(test)]
mod tests;

pub use bucket::{BucketFs, FsOptions};
