//! The first sync into an empty local directory: nothing to merge, so the sandbox's tree
//! comes as one tar stream (no manifest first, no hash read in the sandbox) and each file
//! is hashed as it is written here. What was written is the ancestor: the sandbox held it
//! when the stream read it, and anything the sandbox changed since is a change of its side
//! that the next pass carries (a following sync's change token was taken before).

use std::io::Read;
use std::path::{Component, Path};

use crate::content_hash::ContentHash;
use crate::merge::{Entry, Snapshot};
use crate::snapshot::{DEFAULT_EXCLUDES, Ignores, STATE_DIR};
use crate::{Sandbox, SdkError};

use super::Changes;
use super::local::{Tee, make_link, set_mode, temp_beside};

/// What the first sync brought.
pub struct Brought {
    pub tree: Snapshot,
    pub changes: Changes,
    /// What a sync cannot carry (devices, FIFOs, sockets, names or targets not UTF-8).
    pub skipped: Vec<String>,
}

/// Whether `local` holds nothing but the sync's own state.
pub fn is_empty(local: &Path) -> std::io::Result<bool> {
    for entry in std::fs::read_dir(local)? {
        if entry?.file_name() != STATE_DIR {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Brings the sandbox's tree at `remote` into the empty directory `local`, leaving out what
/// `ignores` matches (and the default names, when `defaults`, in the sandbox already).
pub async fn bring(
    sandbox: &Sandbox,
    remote: &str,
    local: &Path,
    ignores: &Ignores,
    defaults: bool,
) -> Result<Brought, SdkError> {
    let names: Vec<&str> = if defaults {
        DEFAULT_EXCLUDES
            .iter()
            .copied()
            .chain([STATE_DIR])
            .collect()
    } else {
        vec![STATE_DIR]
    };
    let stream = sandbox.download_archive(remote, &names).await?;
    let root = local.to_path_buf();
    let ignores = ignores.clone();
    let unpacked =
        crate::sync::read_on_a_thread(stream, move |reader| unpack(reader, &root, &ignores))
            .await?;
    Ok(unpacked?)
}

fn unpack(reader: impl Read, root: &Path, ignores: &Ignores) -> std::io::Result<Brought> {
    let mut brought = Brought {
        tree: Snapshot::new(),
        changes: Changes::default(),
        skipped: Vec::new(),
    };
    let mut dir_modes: Vec<(String, u32)> = Vec::new();
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
        let Some(relative) = path.to_str().filter(|_| plain).map(str::to_string) else {
            brought.skipped.push(path.display().to_string());
            continue;
        };
        if relative.is_empty() {
            continue;
        }
        let kind = entry.header().entry_type();
        if ignores.ignored(&relative, kind == tar::EntryType::Directory) {
            continue;
        }
        // What lies under something not made here (left out, or not a directory) is not
        // placed.
        if !crate::merge::placed(&brought.tree, &relative) {
            continue;
        }
        let mode = entry.header().mode().map_or(0o644, |mode| mode & 0o7777);
        let at = root.join(&relative);
        match kind {
            tar::EntryType::Directory => match std::fs::create_dir(&at) {
                Ok(()) => {
                    dir_modes.push((relative.clone(), mode));
                    brought.tree.insert(relative, Entry::Dir { mode });
                    brought.changes.dirs += 1;
                }
                // Made here meanwhile: the next pass merges it.
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(err),
            },
            tar::EntryType::Symlink => {
                let Some(target) = entry
                    .link_name()?
                    .and_then(|target| target.to_str().map(str::to_string))
                else {
                    brought.skipped.push(relative);
                    continue;
                };
                match make_link(&target, &at) {
                    Ok(()) => {
                        brought.tree.insert(relative, Entry::Link { target });
                        brought.changes.links += 1;
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => return Err(err),
                }
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(hash) = place(&mut entry, &at, mode)? {
                    brought.tree.insert(relative, Entry::File { hash, mode });
                    brought.changes.files += 1;
                }
            }
            _ => brought.skipped.push(relative),
        }
    }
    // Directories' modes last, deepest first: a read-only one does not stop its filling.
    for (relative, mode) in dir_modes.iter().rev() {
        set_mode(&root.join(relative), *mode)?;
    }
    Ok(brought)
}

/// Writes `content` through a temp file beside `at`, hashing it, and renames it there if
/// nothing is there yet; answers its hash (`None`: something was made there meanwhile).
fn place(content: &mut impl Read, at: &Path, mode: u32) -> std::io::Result<Option<ContentHash>> {
    use sha2::{Digest, Sha256};
    let temp = temp_beside(at);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        let mut hasher = Sha256::new();
        std::io::copy(
            content,
            &mut Tee {
                out: &mut file,
                hasher: &mut hasher,
            },
        )?;
        set_mode(&temp, mode)?;
        Ok::<_, std::io::Error>(ContentHash::from(hasher))
    })();
    let hash = match written {
        Ok(hash) => hash,
        Err(err) => {
            let _ = std::fs::remove_file(&temp);
            return Err(err);
        }
    };
    if std::fs::symlink_metadata(at).is_ok() {
        let _ = std::fs::remove_file(&temp);
        return Ok(None);
    }
    std::fs::rename(&temp, at)?;
    Ok(Some(hash))
}
