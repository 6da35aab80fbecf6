//! The embedded object store of `fsctl up`: an S3-compatible server on loopback over a
//! local directory (s3s + s3s-fs), which checks SigV4 signatures and presign expiry like a
//! real one. Backups work on one machine with no cloud account.

use std::net::SocketAddr;
use std::path::Path;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;
use tokio_util::task::AbortOnDropHandle;

use super::access::BucketAccess;
use fsd_sdk::SdkError;

/// A running embedded store; stops when dropped.
pub struct EmbeddedStore {
    pub address: SocketAddr,
    pub store: BucketAccess,
    _task: AbortOnDropHandle<()>,
}

impl EmbeddedStore {
    /// Serves `root` on `listen` (port 0 picks one) with one key pair, and creates `bucket`
    /// (a directory under `root`) if it is missing.
    pub async fn start(
        root: &Path,
        listen: SocketAddr,
        bucket: &str,
        access_key: &str,
        secret_key: &str,
    ) -> Result<EmbeddedStore, SdkError> {
        std::fs::create_dir_all(root.join(bucket))?;
        let fs = s3s_fs::FileSystem::new(root)
            .map_err(|e| SdkError::Storage(format!("{}: {e:?}", root.display())))?;
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(access_key, secret_key));
        let service = builder.build();
        let listener = TcpListener::bind(listen).await?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let http = ConnBuilder::new(TokioExecutor::new());
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                // A response's head and body go out as two writes: with Nagle's algorithm
                // the body waited for the client's delayed ACK (40 ms a request).
                let _ = socket.set_nodelay(true);
                let connection = http
                    .serve_connection(TokioIo::new(socket), service.clone())
                    .into_owned();
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
        });
        let store = BucketAccess::new(&format!("http://{address}"), bucket, access_key, secret_key);
        Ok(EmbeddedStore {
            address,
            store,
            _task: AbortOnDropHandle::new(task),
        })
    }
}
