//! The fsd wire contract.
//!
//! Request and response bodies, SSE event types, error codes and the HTTP status each code
//! maps to. The daemon (`fsd`) serializes these; the SDK (`fsd-sdk`) deserializes them. Field
//! names follow the reference route API (camelCase JSON), so its own clients can drive fsd.
//!
//! This crate does no I/O, but for the umask `scratch` reads and the day `seeds` reads
//! (the clock, or an environment variable).

pub mod backup;
pub mod error;
pub mod exec;
pub mod files;
pub mod git;
pub mod hex;
pub mod interpreter;
pub mod metrics;
/// Linux's mount table: the daemon's side only (the Worker, built for wasm32, has none).
#[cfg(unix)]
pub mod mountinfo;
pub mod mounts;
pub mod ports;
pub mod process;
pub mod scratch;
pub mod search;
/// The seeded simulations' day: the daemon's side and the tests only.
#[cfg(unix)]
pub mod seeds;
pub mod system;
pub mod tunnels;
pub mod watch;
pub mod ws;

pub use error::{ErrorBody, ErrorCode, Operation, ValidationIssue};

/// The session id that asks for a fresh shell per call instead of a persistent session.
pub const DISABLE_SESSION_TOKEN: &str = "__DISABLE_SESSION__";

/// Largest file the JSON read route returns (base64 or UTF-8); larger files use the raw route.
pub const MAX_ENCODED_READ_BYTES: u64 = 32 * 1024 * 1024;

/// Raw bytes carried by one `chunk` event of `/api/read/stream`.
pub const READ_STREAM_CHUNK_BYTES: usize = 65_535;

/// Longest path accepted anywhere, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
