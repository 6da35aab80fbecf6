//! The next line's domains (docs/api.md, RPC: the SDK's next line), called on the services
//! and engines with typed arguments (no request through the router, unlike the 0.12
//! methods in `api.rs`). `call` routes a `[domain, method]`; `args` reads the object's arguments and
//! shapes results and errors; each domain file serves one domain.

mod args;
mod backup;
mod call;
mod extensions;
mod files;
mod logs;
mod mounts;
mod processes;
mod readiness;
mod terminals;
mod tunnels;
mod workspace;

pub use call::call;
