//! The workspace as one tar file and back (the next line's `workspace` domain,
//! docs/api.md, RPC: `workspace`): the object moves a sandbox's workspace between runtimes with
//! these. Members are named `./<path>` as `tar -C /workspace .` names them; excludes are
//! paths relative to the workspace, each leaving out what is under it; links are archived
//! as links and never followed; extraction refuses members that would land outside its
//! root. Archives live at `/tmp/sandbox-workspace-<uuid>.tar`, the only paths the extract
//! and cleanup calls take.

use std::path::{Component, Path, PathBuf};

use super::archive::write_tree;
use super::service::blocking;

/// Where archives go, and the name they start with.
const ARCHIVE_DIR: &str = "/tmp";
const ARCHIVE_PREFIX: &str = "sandbox-workspace-";

/// What can go wrong (the reference's are plain errors, without codes).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceArchiveError {
    #[error("Workspace archive root must be {0}")]
    Root(String),
    #[error(
        "Invalid workspace archive exclude {0:?}: it must be a relative path inside the workspace"
    )]
    Exclude(String),
    #[error("Invalid workspace archive path {0:?}")]
    ArchivePath(String),
    #[error("Workspace archive failed: {0}")]
    Io(String),
}

impl From<super::error::FileError> for WorkspaceArchiveError {
    fn from(error: super::error::FileError) -> Self {
        WorkspaceArchiveError::Io(error.to_string())
    }
}

/// Archives `workspace` (which `root` must name) without `excludes`; answers the archive's
/// path.
pub async fn create(
    workspace: &Path,
    root: &str,
    excludes: &[String],
) -> Result<PathBuf, WorkspaceArchiveError> {
    if Path::new(root) != workspace {
        return Err(WorkspaceArchiveError::Root(workspace.display().to_string()));
    }
    let mut excluded = Vec::with_capacity(excludes.len());
    for exclude in excludes {
        excluded.push(
            relative(exclude).ok_or_else(|| WorkspaceArchiveError::Exclude(exclude.clone()))?,
        );
    }
    let archive =
        Path::new(ARCHIVE_DIR).join(format!("{ARCHIVE_PREFIX}{}.tar", crate::random::uuid_v4()));
    let (dir, path) = (workspace.to_path_buf(), archive.clone());
    blocking(move || {
        let written = (|| {
            let file = std::fs::File::create(&path)?;
            let mut builder = tar::Builder::new(std::io::BufWriter::new(file));
            builder.follow_symlinks(false);
            let skip = |member: &Path| excluded.iter().any(|x| member.starts_with(x));
            write_tree(&mut builder, &dir, Path::new("."), &skip)?;
            let mut writer = builder.into_inner()?;
            std::io::Write::flush(&mut writer)?;
            writer.get_ref().sync_all()
        })();
        written.map_err(|error| {
            let _ = std::fs::remove_file(&path);
            super::error::FileError::Io {
                op: "archive",
                path: path.display().to_string(),
                source: error,
            }
        })
    })
    .await?;
    Ok(archive)
}

/// Extracts `archive` into `root` (made if missing), then removes the archive.
pub async fn extract(root: &str, archive: &str) -> Result<(), WorkspaceArchiveError> {
    let archive = archive_path(archive)?;
    if root.is_empty() || root.contains('\0') || !Path::new(root).is_absolute() {
        return Err(WorkspaceArchiveError::Root(root.to_string()));
    }
    let root = PathBuf::from(root);
    blocking(move || {
        let unpacked = (|| {
            std::fs::create_dir_all(&root)?;
            let file = std::fs::File::open(&archive)?;
            let mut tar = tar::Archive::new(std::io::BufReader::new(file));
            tar.set_preserve_permissions(true);
            tar.set_overwrite(true);
            // `unpack` refuses members with `..` and writes through no link outside root.
            tar.unpack(&root)?;
            std::fs::remove_file(&archive)
        })();
        unpacked.map_err(|error| super::error::FileError::Io {
            op: "extract",
            path: archive.display().to_string(),
            source: error,
        })
    })
    .await?;
    Ok(())
}

/// Removes an archive, if it is there.
pub async fn cleanup(archive: &str) -> Result<(), WorkspaceArchiveError> {
    let archive = archive_path(archive)?;
    match std::fs::remove_file(&archive) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(WorkspaceArchiveError::Io(error.to_string()))
        }
        _ => Ok(()),
    }
}

/// `path` if it names one of our archives: `/tmp/sandbox-workspace-*.tar`, no `..`, no NUL.
fn archive_path(path: &str) -> Result<PathBuf, WorkspaceArchiveError> {
    let refused = || WorkspaceArchiveError::ArchivePath(path.to_string());
    let name = path
        .strip_prefix(ARCHIVE_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .ok_or_else(refused)?;
    let valid = name.starts_with(ARCHIVE_PREFIX)
        && name.ends_with(".tar")
        && !name.contains(['/', '\0'])
        && !path.contains("..");
    if valid {
        Ok(PathBuf::from(path))
    } else {
        Err(refused())
    }
}

/// An exclude as a relative path of normal components (`./x` and `x/` accepted).
fn relative(exclude: &str) -> Option<PathBuf> {
    if exclude.is_empty() || exclude.contains('\0') {
        return None;
    }
    let mut path = PathBuf::new();
    for component in Path::new(exclude).components() {
        match component {
            Component::Normal(part) => path.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!path.as_os_str().is_empty()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_paths_and_excludes_are_checked() {
        assert!(archive_path("/tmp/sandbox-workspace-abc.tar").is_ok());
        for bad in [
            "/tmp/other.tar",
            "/tmp/sandbox-workspace-x.tgz",
            "/tmp/sandbox-workspace-../x.tar",
            "/var/sandbox-workspace-x.tar",
            "/tmp/sub/sandbox-workspace-x.tar",
        ] {
            assert!(archive_path(bad).is_err(), "{bad}");
        }
        assert_eq!(
            relative("node_modules"),
            Some(PathBuf::from("node_modules"))
        );
        assert_eq!(relative("./a/b/"), Some(PathBuf::from("a/b")));
        for bad in ["", "/abs", "../up", "a/../../b", ".", "a\0"] {
            assert_eq!(relative(bad), None, "{bad:?}");
        }
    }
}
