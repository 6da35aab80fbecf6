//! The daemon's backup routes. These move archives in the sandbox; the trusted side that
//! presigns and keeps metadata is [`crate::control::Backups`].

use fsd_api::backup::{
    BackupEvent, BranchesResponse, CreateBackupRequest, CreateBackupResponse, DiscardBranchRequest,
    DiscardBranchResponse, DownloadBackupRequest, ExtractBackupRequest, ExtractBackupResponse,
    ForkRequest, ForkResponse, MergeBranchRequest, MergeBranchResponse, RestoreBackupRequest,
    RestoreBackupResponse, RestoreMountsResponse, TreeIndexRequest, UnmountBackupRequest,
    UploadBackupRequest, UploadPart, UploadPartsRequest, UploadPartsResponse,
};
use futures_util::Stream;
use reqwest::Method;

use crate::client::{check, to_json};
use crate::{Sandbox, SdkError};

impl Sandbox {
    /// Builds an archive of a directory in the sandbox (`POST /api/backup/create`).
    pub async fn create_archive(
        &self,
        request: &CreateBackupRequest,
    ) -> Result<CreateBackupResponse, SdkError> {
        self.post_json("/api/backup/create", request).await
    }

    /// Restores an archive (and, for a layer, its parents) onto a directory.
    pub async fn restore_archive(
        &self,
        request: &RestoreBackupRequest,
    ) -> Result<RestoreBackupResponse, SdkError> {
        self.post_json("/api/backup/restore", request).await
    }

    /// Uploads parts of an archive to presigned part URLs; ETags come back sorted by part.
    pub async fn upload_parts(
        &self,
        archive_path: &str,
        parts: Vec<UploadPart>,
    ) -> Result<UploadPartsResponse, SdkError> {
        let request = UploadPartsRequest {
            archive_path: archive_path.to_string(),
            parts,
            session_id: None,
        };
        self.post_json("/api/backup/upload-parts", &request).await
    }

    /// Creates and uploads an archive in one call: progress events, then `Complete` or `Error`.
    pub async fn upload_backup(
        &self,
        request: &UploadBackupRequest,
    ) -> Result<impl Stream<Item = Result<BackupEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        self.event_stream(Method::POST, "/api/backup/upload", Some(to_json(request)?))
            .await
    }

    /// Fetches archives not already in the sandbox and restores them: progress events, then
    /// `Complete` or `Error`.
    pub async fn download_backup(
        &self,
        request: &DownloadBackupRequest,
    ) -> Result<impl Stream<Item = Result<BackupEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        self.event_stream(
            Method::POST,
            "/api/backup/download",
            Some(to_json(request)?),
        )
        .await
    }

    /// The encoded index a snapshot of a directory would record now
    /// (`POST /api/backup/index`; decode it with `fsd_backup::index::Index::decode`).
    pub async fn tree_index(&self, request: &TreeIndexRequest) -> Result<Vec<u8>, SdkError> {
        let response = self
            .request(Method::POST, "/api/backup/index")
            .json(request)
            .send()
            .await?;
        Ok(check(response).await?.bytes().await?.to_vec())
    }

    /// Writes paths of a stored snapshot back into a directory, reading the archives in
    /// place (`POST /api/backup/extract`).
    pub async fn extract_backup(
        &self,
        request: &ExtractBackupRequest,
    ) -> Result<ExtractBackupResponse, SdkError> {
        self.post_json("/api/backup/extract", request).await
    }

    /// Active restores.
    pub async fn restore_mounts(&self) -> Result<RestoreMountsResponse, SdkError> {
        self.get_json("/api/backup/mounts").await
    }

    /// Releases the restore on `dir`: its previous contents show again.
    pub async fn release_restore(&self, dir: &str) -> Result<RestoreBackupResponse, SdkError> {
        self.post_json(
            "/api/backup/unmount",
            &UnmountBackupRequest {
                dir: dir.to_string(),
            },
        )
        .await
    }
}

impl Sandbox {
    /// Forks a directory into copy-on-write branches (`POST /api/fork`, fsd's own): each
    /// `DIR@NAME` beside it, the whole tree at one instant, written on its own.
    pub async fn fork(&self, request: &ForkRequest) -> Result<ForkResponse, SdkError> {
        self.post_json("/api/fork", request).await
    }

    /// Every branch of every fork, with what each changed (`GET /api/fork`).
    pub async fn branches(&self) -> Result<BranchesResponse, SdkError> {
        self.get_json("/api/fork").await
    }

    /// Merges a branch back into the directory it was forked from, or another branch
    /// (`POST /api/fork/merge`): three ways against the fork point, each change made only
    /// where the path still holds what the merge read.
    pub async fn merge_branch(
        &self,
        request: &MergeBranchRequest,
    ) -> Result<MergeBranchResponse, SdkError> {
        self.post_json("/api/fork/merge", request).await
    }

    /// Takes a branch away with what was written in it (`POST /api/fork/discard`).
    pub async fn discard_branch(&self, path: &str) -> Result<DiscardBranchResponse, SdkError> {
        let request = DiscardBranchRequest {
            path: path.to_string(),
        };
        self.post_json("/api/fork/discard", &request).await
    }
}
