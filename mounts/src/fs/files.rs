//! Operations on file contents: open, create, read, write, truncate, and the upload that
//! flush, fsync and the last close make.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use fsd_s3::ObjectStore;
use fuser::{Errno, FileAttr};
use futures_util::StreamExt;

use crate::fs::bucket::{Handle, Inner};
use crate::fs::eager::EagerUpload;
use crate::fs::kernel::errno;
use crate::fs::keys::file_key;
use crate::fs::lock::lock;
use crate::fs::reader::Reader;
use crate::fs::spill::{Pending, Spill};
use crate::fs::tree::{Entry, Ino, Kind};

/// Objects up to this size go up in one PUT; larger ones in parts of at least this size.
const PART_SIZE: u64 = 16 << 20;
/// S3's limit on parts per upload.
const MAX_PARTS: u64 = 10_000;
/// Bytes per GET when an existing object is copied into a spill file.
const FILL_CHUNK: u64 = 16 << 20;

/// What a file handle holds.
struct OpenFile<S: ObjectStore> {
    ino: Ino,
    spill: Option<Arc<Spill>>,
    reader: Arc<Reader<S>>,
}

/// Where a read is served from.
pub(crate) enum Content<S: ObjectStore> {
    Local(Arc<Spill>),
    Remote(Arc<Reader<S>>),
}

impl<S: ObjectStore> Inner<S> {
    fn key_of(&self, ino: Ino) -> Result<String, Errno> {
        let path = lock(&self.tree).path(ino).ok_or(Errno::ENOENT)?;
        Ok(file_key(&self.options.prefix, &path))
    }

    fn file_size(&self, ino: Ino) -> Result<u64, Errno> {
        let tree = lock(&self.tree);
        let node = tree.get(ino).ok_or(Errno::ENOENT)?;
        if node.kind == Kind::Dir {
            return Err(Errno::EISDIR);
        }
        Ok(node.size)
    }

    fn set_local(&self, ino: Ino, local: bool) {
        let mut tree = lock(&self.tree);
        if let Some(node) = tree.get_mut(ino) {
            node.local = local;
            node.checked = Instant::now();
            if local {
                node.mtime = SystemTime::now();
            }
        }
    }

    /// The spill of `ino`, made on first use: empty when `truncate`, else holding the
    /// object's current bytes.
    async fn spill_for(&self, ino: Ino, truncate: bool) -> Result<Arc<Spill>, Errno> {
        if let Some(spill) = lock(&self.spills).get(&ino).cloned() {
            if truncate {
                spill.set_len(0).map_err(Errno::from)?;
            }
            return Ok(spill);
        }
        let size = if truncate { 0 } else { self.file_size(ino)? };
        let spill = Spill::new(&self.options.spill_dir, truncate).map_err(Errno::from)?;
        if size > 0 {
            let key = self.key_of(ino)?;
            let mut offset = 0;
            while offset < size {
                let end = size.min(offset + FILL_CHUNK);
                let bytes = self
                    .client
                    .get_range(&key, offset, end)
                    .await
                    .map_err(|error| errno(&error))?;
                spill.fill_at(offset, &bytes).map_err(Errno::from)?;
                offset = end;
            }
        }
        let spill = Arc::new(spill);
        let mut spills = lock(&self.spills);
        // Another open may have won the race; both must share one spill.
        Ok(spills.entry(ino).or_insert(spill).clone())
    }

    /// A handle for `ino`, and whether the kernel may keep the pages it cached earlier.
    pub(crate) async fn open(
        &self,
        ino: Ino,
        write: bool,
        truncate: bool,
    ) -> Result<(u64, bool), Errno> {
        let size = self.file_size(ino)?;
        let key = self.key_of(ino)?;
        let spill = if write {
            self.writable()?;
            let spill = self.spill_for(ino, truncate).await?;
            spill.opened();
            self.set_local(ino, true);
            Some(spill)
        } else {
            None
        };
        let keep_cache = spill.is_none() && lock(&self.tree).reopen_keeps_cache(ino);
        let reader = Arc::new(Reader::new(self.client.clone(), key, size));
        Ok((
            self.add_handle(Handle::File { ino, spill, reader }),
            keep_cache,
        ))
    }

    /// A new, empty file; it reaches the store on its first flush.
    pub(crate) fn create(&self, parent: Ino, name: &str) -> Result<(Ino, FileAttr, u64), Errno> {
        self.writable()?;
        let spill = Arc::new(Spill::new(&self.options.spill_dir, true).map_err(Errno::from)?);
        spill.opened();
        let entry = Entry {
            name: name.to_string(),
            kind: Kind::File,
            size: 0,
            mtime: SystemTime::now(),
            etag: String::new(),
        };
        let ino = {
            let mut tree = lock(&self.tree);
            let ino = tree.upsert(parent, &entry, Instant::now());
            if let Some(node) = tree.get_mut(ino) {
                node.local = true;
            }
            ino
        };
        lock(&self.spills).insert(ino, Arc::clone(&spill));
        let attr = self.cached_attr(ino).ok_or(Errno::ENOENT)?;
        let key = self.key_of(ino)?;
        let reader = Arc::new(Reader::new(self.client.clone(), key, 0));
        let fh = self.add_handle(Handle::File {
            ino,
            spill: Some(spill),
            reader,
        });
        Ok((ino, attr, fh))
    }

    fn file_handle(&self, fh: u64) -> Result<OpenFile<S>, Errno> {
        match lock(&self.handles).get(&fh) {
            Some(Handle::File { ino, spill, reader }) => Ok(OpenFile {
                ino: *ino,
                spill: spill.clone(),
                reader: Arc::clone(reader),
            }),
            _ => Err(Errno::EBADF),
        }
    }

    /// The bytes written here if the file has any, else the object's.
    pub(crate) fn content(&self, fh: u64) -> Result<Content<S>, Errno> {
        let open = self.file_handle(fh)?;
        Ok(match lock(&self.spills).get(&open.ino).cloned() {
            Some(spill) => Content::Local(spill),
            None => Content::Remote(open.reader),
        })
    }

    pub(crate) fn read_spill(spill: &Spill, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        spill.read_at(offset, u64::from(size)).map_err(Errno::from)
    }

    pub(crate) fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let OpenFile { ino, spill, .. } = self.file_handle(fh)?;
        let spill = spill.ok_or(Errno::EBADF)?;
        let size = spill.write_at(offset, data).map_err(Errno::from)?;
        {
            let mut tree = lock(&self.tree);
            if let Some(node) = tree.get_mut(ino) {
                node.size = size;
                node.mtime = SystemTime::now();
            }
        }
        self.upload_while_writing(ino, &spill, size);
        Ok(data.len() as u32)
    }

    /// Starts uploads of the full parts an appending file has grown past (keeping the
    /// first until there is more, so a file of one part still goes up in one PUT).
    fn upload_while_writing(&self, ino: Ino, spill: &Arc<Spill>, size: u64) {
        if size <= PART_SIZE || !spill.appending() {
            return;
        }
        let mut eager = spill.eager();
        if eager.is_none() {
            let Ok(key) = self.key_of(ino) else {
                return;
            };
            *eager = Some(EagerUpload::new(key));
        }
        let Some(upload) = eager.as_mut() else {
            return;
        };
        while upload.covered + PART_SIZE <= size && (upload.part_count() as u64) < MAX_PARTS - 1 {
            let spill = Arc::clone(spill);
            upload.start_part(
                &self.runtime,
                &self.client,
                move |offset, len| spill.read_at(offset, len),
                &self.part_slots,
                PART_SIZE,
            );
        }
    }

    /// Flush and fsync: whatever is only local goes to the store now; a failure is the
    /// writer's `EIO` from `close` or `fsync`.
    pub(crate) async fn flush(&self, fh: u64) -> Result<(), Errno> {
        let OpenFile { ino, spill, .. } = self.file_handle(fh)?;
        match spill {
            Some(spill) => self.upload(ino, &spill).await,
            None => Ok(()),
        }
    }

    /// The last handle of a spill takes it away, uploading first if a flush failed or none
    /// came. If that upload fails too, the spill stays: the file keeps its data in the
    /// mount, and the next close or fsync of it tries again.
    pub(crate) async fn release(&self, fh: u64) -> Result<(), Errno> {
        let Some(handle) = lock(&self.handles).remove(&fh) else {
            return Ok(());
        };
        let Handle::File {
            ino,
            spill: Some(spill),
            ..
        } = handle
        else {
            return Ok(());
        };
        if spill.closed() > 0 {
            return Ok(());
        }
        let result = self.upload(ino, &spill).await;
        if let Err(error) = result {
            tracing::error!(
                ino,
                ?error,
                "upload at close failed; kept in the mount for the next try"
            );
            return result;
        }
        {
            let mut spills = lock(&self.spills);
            if spills
                .get(&ino)
                .is_some_and(|held| Arc::ptr_eq(held, &spill))
            {
                spills.remove(&ino);
            }
        }
        self.set_local(ino, false);
        Ok(())
    }

    /// `truncate(2)`: through a spill, so the object changes only by a whole upload.
    pub(crate) async fn truncate(&self, ino: Ino, fh: Option<u64>, size: u64) -> Result<(), Errno> {
        self.writable()?;
        let held = lock(&self.spills).get(&ino).cloned();
        let spill = match held {
            Some(spill) => spill,
            None => self.spill_for(ino, size == 0).await?,
        };
        spill.set_len(size).map_err(Errno::from)?;
        if let Some(node) = lock(&self.tree).get_mut(ino) {
            node.size = size;
            node.mtime = SystemTime::now();
        }
        // Without an open handle nobody will flush: upload now.
        let open_handle =
            fh.is_some_and(|fh| self.file_handle(fh).is_ok_and(|open| open.spill.is_some()));
        if !open_handle {
            let result = self.upload(ino, &spill).await;
            let mut spills = lock(&self.spills);
            if spill.opens() == 0
                && spills
                    .get(&ino)
                    .is_some_and(|held| Arc::ptr_eq(held, &spill))
            {
                spills.remove(&ino);
            }
            return result;
        }
        Ok(())
    }

    pub(crate) async fn upload(&self, ino: Ino, spill: &Spill) -> Result<(), Errno> {
        let _one_at_a_time = spill.upload_lock.lock().await;
        let eager = spill.eager().take();
        let Some(pending) = spill.pending() else {
            if let Some(eager) = eager {
                eager.abandon(&self.client).await;
            }
            return Ok(());
        };
        let key = self.key_of(ino)?;
        // Parts uploaded while writing count only if the file was appended to throughout
        // and still has the name they were uploaded under.
        let eager = match eager {
            Some(eager) if spill.appending() && eager.key == key && pending.size > PART_SIZE => {
                Some(eager)
            }
            Some(eager) => {
                eager.abandon(&self.client).await;
                None
            }
            None => None,
        };
        let result = if let Some(eager) = eager {
            match self.finish_eager(eager, spill, pending).await {
                Ok(etag) => Ok(etag),
                // Whatever went wrong with the early parts, the whole file gets one more try.
                Err(error) => {
                    tracing::debug!(key, ?error, "parts uploaded while writing failed");
                    self.upload_parts(&key, spill, pending).await
                }
            }
        } else if pending.size <= PART_SIZE {
            let body = spill.read_at(0, pending.size).map_err(Errno::from)?;
            self.client
                .put(&key, Bytes::from(body))
                .await
                .map_err(|error| errno(&error))
        } else {
            self.upload_parts(&key, spill, pending).await
        };
        let etag = match result {
            Ok(etag) => etag,
            Err(error) => {
                tracing::warn!(key, ?error, "upload failed");
                return Err(if error == Errno::ENOENT {
                    Errno::EIO
                } else {
                    error
                });
            }
        };
        spill.mark_uploaded(pending);
        spill.stop_appending();
        let mut tree = lock(&self.tree);
        if let Some(node) = tree.get_mut(ino) {
            node.size = pending.size;
            node.etag = etag;
            node.checked = Instant::now();
        }
        Ok(())
    }

    /// Completes an upload begun while writing: the tail goes up, then the completion.
    async fn finish_eager(
        &self,
        mut eager: EagerUpload,
        spill: &Spill,
        pending: Pending,
    ) -> Result<String, Errno> {
        let (upload_id, mut etags) = match eager.parts_done().await {
            Ok(done) => done,
            Err(error) => {
                eager.abandon(&self.client).await;
                return Err(error);
            }
        };
        let key = eager.key.as_str();
        let tail = self
            .upload_range(
                key,
                &upload_id,
                spill,
                eager.covered,
                pending.size,
                PART_SIZE,
                etags.len() as u32 + 1,
            )
            .await;
        let tail = tail.map(|tail| {
            etags.extend(tail);
            etags
        });
        self.complete_or_abort(key, &upload_id, tail).await
    }

    /// A multipart upload of the spill; returns the object's ETag.
    async fn upload_parts(
        &self,
        key: &str,
        spill: &Spill,
        pending: Pending,
    ) -> Result<String, Errno> {
        let part_size = PART_SIZE.max(pending.size.div_ceil(MAX_PARTS));
        let upload_id = self
            .client
            .create_multipart(key)
            .await
            .map_err(|error| errno(&error))?;
        let etags = self
            .upload_range(key, &upload_id, spill, 0, pending.size, part_size, 1)
            .await;
        self.complete_or_abort(key, &upload_id, etags).await
    }

    /// Uploads `start..end` of the spill as parts of `part_size` (the last may be shorter),
    /// numbered from `first_number`, 8 at a time; their ETags in order.
    #[allow(clippy::too_many_arguments)]
    async fn upload_range(
        &self,
        key: &str,
        upload_id: &str,
        spill: &Spill,
        start: u64,
        end: u64,
        part_size: u64,
        first_number: u32,
    ) -> Result<Vec<String>, Errno> {
        let started = std::time::Instant::now();
        let parts = (end - start).div_ceil(part_size);
        let etags = futures_util::stream::iter(0..parts)
            .map(|index| async move {
                let offset = start + index * part_size;
                let body = spill
                    .read_at(offset, part_size.min(end - offset))
                    .map_err(Errno::from)?;
                self.client
                    .upload_part(
                        key,
                        upload_id,
                        first_number + index as u32,
                        Bytes::from(body),
                    )
                    .await
                    .map_err(|error| errno(&error))
            })
            .buffered(crate::fs::bucket::PARTS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect();
        tracing::debug!(key, parts, elapsed = ?started.elapsed(), "parts uploaded");
        etags
    }

    /// Completes the upload from `etags`, or aborts it when anything failed.
    async fn complete_or_abort(
        &self,
        key: &str,
        upload_id: &str,
        etags: Result<Vec<String>, Errno>,
    ) -> Result<String, Errno> {
        let completed = match etags {
            Ok(etags) => self
                .client
                .complete_multipart(key, upload_id, &etags)
                .await
                .map_err(|error| errno(&error)),
            Err(error) => Err(error),
        };
        if completed.is_err() {
            self.client.abort_multipart(key, upload_id).await;
        }
        tracing::debug!(key, ok = completed.is_ok(), "multipart upload done");
        completed
    }
}
