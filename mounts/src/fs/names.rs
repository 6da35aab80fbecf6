//! Operations on names: lookup, attributes, listings, mkdir, rmdir, unlink, rename.

use std::time::{Instant, SystemTime};

use fsd_s3::{Listing, ObjectStore};
use fuser::{Errno, FileAttr};

use crate::fs::bucket::{DirEntry, Inner};
use crate::fs::keys::{self, dir_key, file_key};
use crate::fs::lock::lock;
use crate::fs::tree::{Cached, Entry, Ino, Kind};

impl<S: ObjectStore> Inner<S> {
    fn path_of(&self, ino: Ino) -> Result<String, Errno> {
        lock(&self.tree).path(ino).ok_or(Errno::ENOENT)
    }

    fn child_path(&self, parent: Ino, name: &str) -> Result<String, Errno> {
        let parent_path = self.path_of(parent)?;
        Ok(if parent_path.is_empty() {
            name.to_string()
        } else {
            format!("{parent_path}/{name}")
        })
    }

    /// `name` under `parent`: from the cache while it is fresh, else a HEAD of the object
    /// and a one-key LIST under the directory prefix, side by side.
    pub(crate) async fn lookup(&self, parent: Ino, name: &str) -> Result<(Ino, FileAttr), Errno> {
        let cached = lock(&self.tree).lookup_cached(parent, name, Instant::now());
        match cached {
            Cached::Present(ino) => {
                return self.cached_attr(ino).map(|a| (ino, a)).ok_or(Errno::ENOENT);
            }
            Cached::Absent => return Err(Errno::ENOENT),
            Cached::Unknown => {}
        }
        self.lookup_fresh(parent, name).await
    }

    /// `name` under `parent`, not trusting the node's own attributes: asked of the store
    /// unless a fresh listing of `parent` vouches for it, or it was made here and is not in
    /// the store yet (or never will be, like an empty directory on a store that drops
    /// markers).
    async fn lookup_fresh(&self, parent: Ino, name: &str) -> Result<(Ino, FileAttr), Errno> {
        {
            let tree = lock(&self.tree);
            if let Some(ino) = tree.child(parent, name)
                && let Some(node) = tree.get(ino)
                && (node.local || tree.is_listed(parent, Instant::now()))
            {
                return Ok((ino, self.attr(ino, node)));
            }
        }

        let path = self.child_path(parent, name)?;

        let prefix = &self.options.prefix;
        let (object_key, dir_prefix) = (file_key(prefix, &path), dir_key(prefix, &path));
        // A name removed here while the store is asked (an unlink racing a lookup the
        // kernel or the daemon's own reads made) stays removed whatever the store said.
        let asked = Instant::now();
        let (object, is_dir) = tokio::join!(
            self.client.head(&object_key),
            self.client.has_keys_under(&dir_prefix),
        );
        let is_dir = is_dir.map_err(|error| super::kernel::errno(&error))?;
        let entry = if is_dir {
            Some(Entry {
                name: name.to_string(),
                kind: Kind::Dir,
                size: 0,
                mtime: SystemTime::now(),
                etag: String::new(),
            })
        } else {
            object
                .map_err(|error| super::kernel::errno(&error))?
                .map(|object| keys::file_entry(name, &object))
        };
        let mut tree = lock(&self.tree);
        let now = Instant::now();
        if entry.is_some() && tree.removed_since(parent, name, asked) {
            return Err(Errno::ENOENT);
        }
        let Some(entry) = entry else {
            // A file written here and not uploaded yet is not in the store.
            if let Some(ino) = tree.child(parent, name)
                && tree.get(ino).is_some_and(|node| node.local)
            {
                return tree
                    .get(ino)
                    .map(|node| (ino, self.attr(ino, node)))
                    .ok_or(Errno::ENOENT);
            }
            tree.remove(parent, name, now);
            return Err(Errno::ENOENT);
        };
        let ino = tree.upsert(parent, &entry, now);
        let node = tree.get(ino).ok_or(Errno::ENOENT)?;
        Ok((ino, self.attr(ino, node)))
    }

    /// Attributes of `ino`, re-read from the store once they are older than the TTL.
    pub(crate) async fn getattr(&self, ino: Ino) -> Result<FileAttr, Errno> {
        let (parent, name) = {
            let tree = lock(&self.tree);
            let node = tree.get(ino).ok_or(Errno::ENOENT)?;
            // One the kernel still holds after its name went: what it was.
            if tree.is_fresh(ino, Instant::now())
                || lock(&self.spills).contains_key(&ino)
                || !tree.is_attached(ino)
            {
                return Ok(self.attr(ino, node));
            }
            (node.parent, node.name.clone())
        };
        let (found, attr) = self.lookup_fresh(parent, &name).await?;
        if found != ino {
            // The name now stands for something else; this inode is gone.
            return Err(Errno::ENOENT);
        }
        Ok(attr)
    }

    /// What the store holds directly under directory `dir`, and the key prefix listed.
    async fn list_store(&self, dir: Ino) -> Result<(String, Listing), Errno> {
        let prefix = dir_key(&self.options.prefix, &self.path_of(dir)?);
        let listing = self
            .client
            .list(&prefix)
            .await
            .map_err(|error| super::kernel::errno(&error))?;
        Ok((prefix, listing))
    }

    /// The entries of directory `dir`, listing the store if the cached listing is stale.
    pub(crate) async fn list_dir(&self, dir: Ino) -> Result<Vec<DirEntry>, Errno> {
        let listed = lock(&self.tree).is_listed(dir, Instant::now());
        if !listed {
            let asked = Instant::now();
            let (prefix, listing) = self.list_store(dir).await?;
            let entries = keys::entries(&listing, &prefix);
            lock(&self.tree).apply_listing(dir, &entries, asked);
        }
        let tree = lock(&self.tree);
        Ok(tree
            .list(dir)
            .into_iter()
            .filter_map(|(name, ino, _)| {
                tree.get(ino).map(|node| DirEntry {
                    name,
                    ino,
                    attr: self.attr(ino, node),
                })
            })
            .collect())
    }

    pub(crate) async fn mkdir(&self, parent: Ino, name: &str) -> Result<(Ino, FileAttr), Errno> {
        self.writable()?;
        match self.lookup(parent, name).await {
            Ok(_) => return Err(Errno::EEXIST),
            Err(error) if error != Errno::ENOENT => return Err(error),
            Err(_) => {}
        }
        let path = self.child_path(parent, name)?;
        self.client
            .put(&dir_key(&self.options.prefix, &path), bytes::Bytes::new())
            .await
            .map_err(|error| super::kernel::errno(&error))?;
        let entry = Entry {
            name: name.to_string(),
            kind: Kind::Dir,
            size: 0,
            mtime: SystemTime::now(),
            etag: String::new(),
        };
        let mut tree = lock(&self.tree);
        let now = Instant::now();
        let ino = tree.upsert(parent, &entry, now);
        // Kept for this mount's life even where the store drops empty marker objects
        // (s3s-fs); and it is empty, so no need to ask the store what is in it.
        if let Some(node) = tree.get_mut(ino) {
            node.local = true;
        }
        tree.apply_listing(ino, &[], now);
        let node = tree.get(ino).ok_or(Errno::ENOENT)?;
        Ok((ino, self.attr(ino, node)))
    }

    pub(crate) async fn rmdir(&self, parent: Ino, name: &str) -> Result<(), Errno> {
        self.writable()?;
        let (ino, attr) = self.lookup_fresh(parent, name).await?;
        if attr.kind != fuser::FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        let (prefix, listing) = self.list_store(ino).await?;
        let children = lock(&self.tree).list(ino);
        let has_local = {
            let spills = lock(&self.spills);
            children
                .iter()
                .any(|(_, child, _)| spills.contains_key(child))
        };
        let only_marker = listing.prefixes.is_empty()
            && listing.objects.iter().all(|object| object.key == prefix);
        if !only_marker || has_local {
            return Err(Errno::ENOTEMPTY);
        }
        if !listing.objects.is_empty() {
            self.client
                .delete(&prefix)
                .await
                .map_err(|error| super::kernel::errno(&error))?;
        }
        lock(&self.tree).remove(parent, name, Instant::now());
        Ok(())
    }

    pub(crate) async fn unlink(&self, parent: Ino, name: &str) -> Result<(), Errno> {
        self.writable()?;
        let (ino, attr) = self.lookup(parent, name).await?;
        if attr.kind == fuser::FileType::Directory {
            return Err(Errno::EISDIR);
        }
        let spill = lock(&self.spills).get(&ino).cloned();
        if let Some(spill) = &spill {
            spill.mark_unlinked();
        }
        let path = self.child_path(parent, name)?;
        let result = self
            .client
            .delete(&file_key(&self.options.prefix, &path))
            .await;
        // A file never uploaded is not in the store; S3 answers 204 either way.
        if let Err(error) = result
            && error.status() != Some(404)
        {
            return Err(super::kernel::errno(&error));
        }
        lock(&self.tree).remove(parent, name, Instant::now());
        Ok(())
    }

    /// Files: a server-side copy, then a delete of the old key. Directories: `EXDEV`,
    /// which makes `mv` fall back to copying the files one by one.
    pub(crate) async fn rename(
        &self,
        parent: Ino,
        name: &str,
        new_parent: Ino,
        new_name: &str,
        no_replace: bool,
    ) -> Result<(), Errno> {
        self.writable()?;
        let (ino, attr) = self.lookup(parent, name).await?;
        if attr.kind == fuser::FileType::Directory {
            return Err(Errno::EXDEV);
        }
        match self.lookup(new_parent, new_name).await {
            Ok(_) if no_replace => return Err(Errno::EEXIST),
            Ok((_, target)) if target.kind == fuser::FileType::Directory => {
                return Err(Errno::EISDIR);
            }
            Ok(_) => {}
            Err(error) if error == Errno::ENOENT => {}
            Err(error) => return Err(error),
        }
        // Whatever is still only local goes to the store under the old name first.
        let held = lock(&self.spills).get(&ino).cloned();
        if let Some(spill) = held {
            self.upload(ino, &spill).await?;
        }
        let from = file_key(&self.options.prefix, &self.child_path(parent, name)?);
        let to = file_key(
            &self.options.prefix,
            &self.child_path(new_parent, new_name)?,
        );
        self.client
            .copy(&from, &to)
            .await
            .map_err(|error| super::kernel::errno(&error))?;
        self.client
            .delete(&from)
            .await
            .map_err(|error| super::kernel::errno(&error))?;
        lock(&self.tree).rename(ino, new_parent, new_name, Instant::now());
        Ok(())
    }
}
