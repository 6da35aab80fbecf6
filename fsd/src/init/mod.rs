//! fsd as a container's entry point: the first process's duties (`reaper`), the image's
//! own command run beside the API (`command`), and trust in an egress-intercepting CA
//! (`ca`), as the reference's container runtime does.

pub mod ca;
pub mod command;
pub mod descriptors;
pub mod reaper;
