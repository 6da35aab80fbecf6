//! Sequential writers upload while they write: once a new file has grown past a part, each
//! full part goes up at once as part of a multipart upload, so closing a large file waits
//! only for its tail and the completion. Anything but appending (a seek back, a truncate)
//! abandons it, and the close uploads the whole spill as before.

use std::sync::Arc;

use bytes::Bytes;
use fsd_s3::ObjectStore;
use fuser::Errno;
use tokio::sync::{OnceCell, Semaphore};
use tokio::task::JoinHandle;

use crate::fs::kernel::errno;

/// Parts of one eager upload: all full `part_size`, numbered from 1.
pub struct EagerUpload {
    pub key: String,
    upload_id: Arc<OnceCell<Result<String, Errno>>>,
    parts: Vec<JoinHandle<Result<String, Errno>>>,
    /// Bytes handed to part uploads so far.
    pub covered: u64,
}

impl EagerUpload {
    pub fn new(key: String) -> EagerUpload {
        EagerUpload {
            key,
            upload_id: Arc::default(),
            parts: Vec::new(),
            covered: 0,
        }
    }

    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// Starts uploading the next `part_size` bytes, `covered..covered + part_size`, which
    /// `read(offset, len)` reads from the written file once a slot of `slots` is free.
    pub fn start_part(
        &mut self,
        runtime: &tokio::runtime::Handle,
        client: &impl ObjectStore,
        read: impl FnOnce(u64, u64) -> std::io::Result<Vec<u8>> + Send + 'static,
        slots: &Arc<Semaphore>,
        part_size: u64,
    ) {
        let number = self.parts.len() as u32 + 1;
        let start = self.covered;
        let (client, slots) = (client.clone(), Arc::clone(slots));
        let (key, upload_id) = (self.key.clone(), Arc::clone(&self.upload_id));
        self.parts.push(runtime.spawn(async move {
            let _slot = slots.acquire_owned().await.map_err(|_| Errno::EIO)?;
            let id = upload_id
                .get_or_init(|| async {
                    client
                        .create_multipart(&key)
                        .await
                        .map_err(|error| errno(&error))
                })
                .await
                .clone()?;
            let body = read(start, part_size).map_err(Errno::from)?;
            client
                .upload_part(&key, &id, number, Bytes::from(body))
                .await
                .map_err(|error| errno(&error))
        }));
        self.covered += part_size;
    }

    /// Waits for the parts; returns the upload id and their ETags in order.
    pub async fn parts_done(&mut self) -> Result<(String, Vec<String>), Errno> {
        let mut etags = Vec::with_capacity(self.parts.len());
        let mut failed = None;
        for part in self.parts.drain(..) {
            match part.await {
                Ok(Ok(etag)) => etags.push(etag),
                Ok(Err(error)) => failed = failed.or(Some(error)),
                Err(_) => failed = failed.or(Some(Errno::EIO)),
            }
        }
        if let Some(error) = failed {
            return Err(error);
        }
        match self.upload_id.get() {
            Some(Ok(id)) => Ok((id.clone(), etags)),
            Some(Err(error)) => Err(*error),
            None => Err(Errno::EIO),
        }
    }

    /// Gives up: waits for what is in flight, then aborts the multipart upload.
    pub async fn abandon(mut self, client: &impl ObjectStore) {
        for part in self.parts.drain(..) {
            let _ = part.await;
        }
        if let Some(Ok(id)) = self.upload_id.get() {
            client.abort_multipart(&self.key, id).await;
        }
    }
}
