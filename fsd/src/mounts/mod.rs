//! Bucket mounts: `POST /api/mounts`, `DELETE /api/mounts`, `GET /api/mounts`, over the
//! `fsd-mounts` FUSE filesystem. `service` owns the mounts; `validate` holds the reference's
//! rules; `routes` parses and answers.

mod routes;
mod service;
mod validate;
mod wire_error;

pub use routes::router;
pub use service::MountService;
pub use validate::plan;
