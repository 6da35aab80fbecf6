//! `fsd-tunnels`: public tunnels to sandbox ports through cloudflared, as the reference
//! runs them (docs/api.md, Tunnels).
//!
//! `process` runs one cloudflared (the reference's argv, readiness from its metrics
//! server, SIGTERM then SIGKILL); `output` reads its lines and masks tokens; `runs` keeps
//! tunnel runs by run id with the reference's idempotency and conflict rules and announces
//! exits. No HTTP routes here: the daemon serves them.

mod error;
mod output;
mod process;
mod runs;

pub use error::TunnelError;
pub use output::masked;
pub use process::{Config, Mode, argv};
pub use runs::{RunInfo, RunSpec, Runs, TunnelExit};
