//! The state every handler shares: one service per domain.

use std::sync::Arc;

use fsd_api::system::Capabilities;

use crate::files::FileService;

#[derive(Clone)]
pub struct AppState {
    pub files: Arc<FileService>,
    pub capabilities: Arc<Capabilities>,
}
