//! The daemon itself: whether it lives, its version, and what it can do here.

pub mod capabilities;
pub mod ops;
mod routes;

pub use routes::router;
