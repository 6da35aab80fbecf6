//! Tunnels: `POST /api/tunnels` starts (or joins) a cloudflared tunnel run to a sandbox
//! port, `GET /api/tunnels` lists them, `POST /api/tunnels/stop` stops one, and
//! `GET /api/tunnels/events` streams their exits. The reference serves tunnels over RPC
//! only; these routes are fsd's own. `fsd-tunnels` supervises the processes.

mod error;
pub mod ops;
mod requests;
mod routes;
mod wire_error;

pub use requests::{run_spec, tunnel_run};
pub use routes::router;
