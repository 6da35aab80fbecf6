//! File operations: the reference's JSON routes, the SSE read stream, and fsd's raw transfers.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use fsd_api::files::{
    ChmodRequest, ChownRequest, Encoding, ExistsResponse, FileInfo, FileStat, FileStreamEvent,
    ListFilesOptions, ListFilesRequest, ListFilesResponse, ManifestRequest, ManifestResponse,
    MkdirRequest, MkdirResponse, MoveRequest, PathRequest, PathResponse, PermissionsResponse,
    RawWriteResponse, ReadRequest, ReadResponse, RenameRequest, RenameResponse, StatRequest,
    StatResponse, WriteRequest, WriteResponse,
};
use futures_util::{Stream, StreamExt, TryStreamExt};
use reqwest::Method;
use tokio::io::AsyncWriteExt;

use crate::client::{check, decode, to_json};
use crate::{Sandbox, SdkError};

/// What `list_files` returns.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListOptions {
    pub recursive: bool,
    pub include_hidden: bool,
}

impl Sandbox {
    /// Reads a file through the JSON route (32 MiB at most; see [`Sandbox::download`]).
    pub async fn read_file(&self, path: &str) -> Result<ReadResponse, SdkError> {
        self.read_file_as(path, None).await
    }

    /// Reads a file with an explicit encoding.
    pub async fn read_file_as(
        &self,
        path: &str,
        encoding: Option<Encoding>,
    ) -> Result<ReadResponse, SdkError> {
        let request = ReadRequest {
            path: path.into(),
            encoding,
            session_id: None,
        };
        self.post_json("/api/read", &request).await
    }

    /// Reads a file's exact bytes through the JSON route (decoding base64 when used).
    pub async fn read_file_bytes(&self, path: &str) -> Result<Vec<u8>, SdkError> {
        let reply = self.read_file_as(path, Some(Encoding::Base64)).await?;
        BASE64
            .decode(reply.content)
            .map_err(|err| SdkError::Decode {
                status: 200,
                message: format!("content is not base64: {err}"),
            })
    }

    /// Writes UTF-8 text, replacing the file atomically and creating parent directories.
    pub async fn write_file(&self, path: &str, content: &str) -> Result<WriteResponse, SdkError> {
        let request = WriteRequest {
            path: path.into(),
            content: content.into(),
            encoding: None,
            session_id: None,
            mode: None,
        };
        self.post_json("/api/write", &request).await
    }

    /// Writes as `request` says: any field of the route, `mode` included (the file appears
    /// with it).
    pub async fn write_file_with(&self, request: &WriteRequest) -> Result<WriteResponse, SdkError> {
        self.post_json("/api/write", request).await
    }

    /// Writes bytes through the JSON route, base64-encoded.
    pub async fn write_file_bytes(
        &self,
        path: &str,
        content: &[u8],
    ) -> Result<WriteResponse, SdkError> {
        let request = WriteRequest {
            path: path.into(),
            content: BASE64.encode(content),
            encoding: Some(Encoding::Base64),
            session_id: None,
            mode: None,
        };
        self.post_json("/api/write", &request).await
    }

    pub async fn delete_file(&self, path: &str) -> Result<PathResponse, SdkError> {
        self.post_json("/api/delete", &path_request(path)).await
    }

    pub async fn rename_file(
        &self,
        old_path: &str,
        new_path: &str,
    ) -> Result<RenameResponse, SdkError> {
        let request = RenameRequest {
            old_path: old_path.into(),
            new_path: new_path.into(),
            session_id: None,
        };
        self.post_json("/api/rename", &request).await
    }

    pub async fn move_file(
        &self,
        source: &str,
        destination: &str,
    ) -> Result<RenameResponse, SdkError> {
        let request = MoveRequest {
            source_path: source.into(),
            destination_path: destination.into(),
            session_id: None,
        };
        self.post_json("/api/move", &request).await
    }

    pub async fn mkdir(&self, path: &str, recursive: bool) -> Result<MkdirResponse, SdkError> {
        let request = MkdirRequest {
            path: path.into(),
            recursive: Some(recursive),
            session_id: None,
            mode: None,
        };
        self.post_json("/api/mkdir", &request).await
    }

    /// Makes a directory as `request` says, `mode` included (as `mkdir -m`).
    pub async fn mkdir_with(&self, request: &MkdirRequest) -> Result<MkdirResponse, SdkError> {
        self.post_json("/api/mkdir", request).await
    }

    pub async fn list_files(
        &self,
        path: &str,
        options: ListOptions,
    ) -> Result<Vec<FileInfo>, SdkError> {
        let request = ListFilesRequest {
            path: path.into(),
            options: Some(ListFilesOptions {
                recursive: Some(options.recursive),
                include_hidden: Some(options.include_hidden),
            }),
            session_id: None,
        };
        let reply: ListFilesResponse = self.post_json("/api/list-files", &request).await?;
        Ok(reply.files)
    }

    pub async fn exists(&self, path: &str) -> Result<bool, SdkError> {
        let reply: ExistsResponse = self.post_json("/api/exists", &path_request(path)).await?;
        Ok(reply.exists)
    }

    /// Changes `path`'s mode (octal such as `755`, or symbolic such as `u+x,go-w`), and
    /// everything below it when `recursive`; answers the resulting mode and owner.
    pub async fn chmod(
        &self,
        path: &str,
        mode: &str,
        recursive: bool,
    ) -> Result<PermissionsResponse, SdkError> {
        let request = ChmodRequest {
            path: path.into(),
            mode: mode.into(),
            recursive: Some(recursive),
            session_id: None,
        };
        self.post_json("/api/chmod", &request).await
    }

    /// Gives `path` (and everything below it when `recursive`) to `owner` and/or `group`,
    /// each a name or a numeric id.
    pub async fn chown(
        &self,
        path: &str,
        owner: Option<&str>,
        group: Option<&str>,
        recursive: bool,
    ) -> Result<PermissionsResponse, SdkError> {
        let request = ChownRequest {
            path: path.into(),
            owner: owner.map(str::to_string),
            group: group.map(str::to_string),
            recursive: Some(recursive),
            session_id: None,
        };
        self.post_json("/api/chown", &request).await
    }

    /// Stats a path; symlinks are described, not followed, unless `follow_symlinks`.
    pub async fn stat(&self, path: &str, follow_symlinks: bool) -> Result<FileStat, SdkError> {
        let request = StatRequest {
            path: path.into(),
            follow_symlinks: Some(follow_symlinks),
            session_id: None,
        };
        let reply: StatResponse = self.post_json("/api/stat", &request).await?;
        Ok(reply.stat)
    }

    /// Every entry below the directory `path` with its kind, mode, size, mtime, a file's
    /// SHA-256 and a link's target, read in the sandbox (no content crosses the wire),
    /// leaving out what the `.gitignore`-style lines of `exclude` match.
    pub async fn manifest(
        &self,
        path: &str,
        exclude: &[String],
    ) -> Result<ManifestResponse, SdkError> {
        let request = ManifestRequest {
            path: path.into(),
            exclude: exclude.to_vec(),
            paths: None,
            session_id: None,
        };
        self.post_json("/api/files/manifest", &request).await
    }

    /// [`Sandbox::manifest`] of only the entries at `paths` (relative to `path`) and below
    /// them: what a sync reads again where a change list named something. A path not there
    /// has no entry.
    pub async fn manifest_of(
        &self,
        path: &str,
        exclude: &[String],
        paths: Vec<String>,
    ) -> Result<ManifestResponse, SdkError> {
        let request = ManifestRequest {
            path: path.into(),
            exclude: exclude.to_vec(),
            paths: Some(paths),
            session_id: None,
        };
        self.post_json("/api/files/manifest", &request).await
    }

    /// The `/api/read/stream` events: `Metadata`, `Chunk`s, then `Complete` or `Error`.
    pub async fn read_file_stream(
        &self,
        path: &str,
    ) -> Result<
        impl Stream<Item = Result<FileStreamEvent, SdkError>> + Send + Unpin + use<>,
        SdkError,
    > {
        self.event_stream(
            Method::POST,
            "/api/read/stream",
            Some(to_json(&path_request(path))?),
        )
        .await
    }

    /// Streams a file's raw bytes (no size limit, no base64).
    pub async fn download(
        &self,
        path: &str,
    ) -> Result<impl Stream<Item = Result<Bytes, SdkError>> + Send + use<>, SdkError> {
        self.download_range(path, None).await
    }

    /// Streams `length` bytes from `offset` (to the end when `length` is `None`); `None`
    /// range for the whole file.
    pub async fn download_range(
        &self,
        path: &str,
        range: Option<(u64, Option<u64>)>,
    ) -> Result<impl Stream<Item = Result<Bytes, SdkError>> + Send + use<>, SdkError> {
        let mut request = self
            .request(Method::GET, "/api/files/raw")
            .query(&[("path", path)]);
        if let Some((offset, length)) = range {
            let header = match length {
                Some(0) => return Err(SdkError::Io(std::io::Error::other("empty range"))),
                Some(length) => format!("bytes={offset}-{}", offset + length - 1),
                None => format!("bytes={offset}-"),
            };
            request = request.header(reqwest::header::RANGE, header);
        }
        let response = check(request.send().await?).await?;
        Ok(response.bytes_stream().map_err(SdkError::Transport))
    }

    /// A directory's tree as one tar stream (`POST /api/files/archive`): directories,
    /// files and symlinks with their permission bits; names in `exclude` left out wherever
    /// they occur.
    pub async fn download_archive(
        &self,
        path: &str,
        exclude: &[&str],
    ) -> Result<impl Stream<Item = Result<Bytes, SdkError>> + Send + use<>, SdkError> {
        self.archive_request(fsd_api::files::ArchiveRequest {
            path: path.into(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            files: Vec::new(),
            session_id: None,
        })
        .await
    }

    /// Some regular files under a directory as one tar stream, in the order given (paths
    /// relative to `path`); one gone or no longer a file is left out.
    pub async fn download_files(
        &self,
        path: &str,
        files: Vec<String>,
    ) -> Result<impl Stream<Item = Result<Bytes, SdkError>> + Send + use<>, SdkError> {
        self.archive_request(fsd_api::files::ArchiveRequest {
            path: path.into(),
            exclude: Vec::new(),
            files,
            session_id: None,
        })
        .await
    }

    async fn archive_request(
        &self,
        request: fsd_api::files::ArchiveRequest,
    ) -> Result<impl Stream<Item = Result<Bytes, SdkError>> + Send + use<>, SdkError> {
        let response = check(
            self.request(Method::POST, "/api/files/archive")
                .json(&request)
                .send()
                .await?,
        )
        .await?;
        Ok(response.bytes_stream().map_err(SdkError::Transport))
    }

    /// Downloads a file into `local`, written through a temp file and renamed when complete.
    pub async fn download_to(&self, path: &str, local: &Path) -> Result<u64, SdkError> {
        let mut stream = Box::pin(self.download(path).await?);
        let file_name = local
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = local.with_file_name(format!(".{file_name}.fsctl-{}.tmp", std::process::id()));
        let result = async {
            let mut file = tokio::fs::File::create(&temp)
                .await
                .map_err(|err| local_error(local, err))?;
            let mut written = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                written += chunk.len() as u64;
                file.write_all(&chunk).await?;
            }
            file.sync_all().await?;
            tokio::fs::rename(&temp, local)
                .await
                .map_err(|err| local_error(local, err))?;
            Ok::<u64, SdkError>(written)
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&temp).await;
        }
        result
    }

    /// Uploads a byte stream as the file's new content, replaced atomically.
    pub async fn upload<S>(&self, path: &str, body: S) -> Result<RawWriteResponse, SdkError>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send + Sync + 'static,
    {
        let response = self
            .request(Method::PUT, "/api/files/raw")
            .query(&[("path", path)])
            .body(reqwest::Body::wrap_stream(body))
            .send()
            .await?;
        decode(response).await
    }

    /// Uploads a local file as the file's new content, streaming it from disk.
    pub async fn upload_file(
        &self,
        path: &str,
        local: &Path,
    ) -> Result<RawWriteResponse, SdkError> {
        let file = tokio::fs::File::open(local)
            .await
            .map_err(|err| local_error(local, err))?;
        let length = file.metadata().await?.len();
        let response = self
            .request(Method::PUT, "/api/files/raw")
            .query(&[("path", path)])
            .header(reqwest::header::CONTENT_LENGTH, length)
            .body(reqwest::Body::wrap_stream(
                tokio_util::io::ReaderStream::with_capacity(file, 1 << 20),
            ))
            .send()
            .await?;
        decode(response).await
    }
}

fn path_request(path: &str) -> PathRequest {
    PathRequest {
        path: path.into(),
        session_id: None,
    }
}

/// An error of a local file, naming it (`No such file or directory` alone does not say
/// which side is missing what).
fn local_error(local: &Path, err: std::io::Error) -> SdkError {
    SdkError::Io(std::io::Error::new(
        err.kind(),
        format!("{}: {err}", local.display()),
    ))
}
