//! `fsctl gateway`: preview URLs for sandbox ports. Requests whose `Host` is a preview host
//! (`<port>-<sandboxId>-<token>.<hostname>`) are checked against the exposures (404
//! `INVALID_TOKEN` without contacting the sandbox, 410 `STALE_PREVIEW_URL` when the sandbox
//! restarted since the port was exposed) and proxied to the port, streaming both ways;
//! `/sandboxes/<id>/…` is that sandbox's route API, sent to its daemon with the trusted
//! side's token; other requests are its admin API (`POST /expose`, `POST /unexpose`,
//! `GET /exposed`). The rules are `fsd-control::preview`'s; `state` keeps the exposures,
//! `serve` accepts and dispatches, `proxy` checks and forwards preview requests, `admin`
//! is the admin API, `api` forwards the route API, `relay` streams one HTTP exchange, and
//! `bridge` carries WebSocket upgrades frame by frame; `start` starts one. With a sandbox
//! token key, each daemon is reached with its own token (`sandbox_token`), never one
//! shared by every sandbox.

mod admin;
mod api;
mod bridge;
mod headers;
mod proxy;
mod relay;
pub mod sandbox_token;
mod serve;
mod start;
mod state;

pub use proxy::Tokens;
pub use start::{GatewayArgs, run, start};
