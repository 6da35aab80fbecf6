//! Bucket mounts. `fs`: the filesystem over a bucket; `mount`: mounting and unmounting it
//! with FUSE. The S3 calls, signing and the credential proxy are `fsd-s3`'s.

pub mod fs;
pub mod mount;

pub use mount::{BucketMount, MountError, MountSpec};
