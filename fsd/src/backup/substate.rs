//! What the backup domain works with.

use std::sync::Arc;

use fsd_api::system::Capabilities;

use super::BackupService;
use crate::files::FileService;
use crate::paths::Paths;
use crate::watch::WatchService;

/// The backup service, and the paths, watches and workspace its calls are checked and
/// tokened against: what a backup handler or operation takes (the server's state gives it).
#[derive(Clone)]
pub struct BackupState {
    pub service: Arc<BackupService>,
    pub paths: Paths,
    pub watches: Arc<WatchService>,
    pub capabilities: Arc<Capabilities>,
    /// A merged branch's changes are made through the files domain's checked apply.
    pub files: Arc<FileService>,
}
