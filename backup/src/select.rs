//! Which entries of a directory go into an archive: exclude globs and gitignore rules.

use std::path::{Path, PathBuf};

use ignore::overrides::OverrideBuilder;
use ignore::{DirEntry, WalkBuilder};

use crate::BackupError;

/// Normalizes one exclude pattern as the reference does before handing it to mksquashfs:
/// strips a leading `**/`, turns `/**/` into `/`, strips a trailing `/**`; `None` when
/// nothing is left (an empty pattern or `**` would exclude everything).
pub fn normalize_exclude(pattern: &str) -> Option<String> {
    let mut p = pattern.trim().to_string();
    while let Some(rest) = p.strip_prefix("**/") {
        p = rest.to_string();
    }
    while p.contains("/**/") {
        p = p.replace("/**/", "/");
    }
    while let Some(rest) = p.strip_suffix("/**") {
        p = rest.to_string();
    }
    if p.is_empty() || p == "**" {
        None
    } else {
        Some(p)
    }
}

/// Walks `dir` in sorted order (parents before children), skipping excluded entries and,
/// with `gitignore`, what git would ignore (only inside a git work tree, as `git ls-files`
/// does). `skip` (the archive being written, say) is never included.
pub fn walk(
    dir: &Path,
    excludes: &[String],
    gitignore: bool,
    skip: &Path,
) -> Result<impl Iterator<Item = Result<DirEntry, BackupError>>, BackupError> {
    let overrides = build_overrides(dir, excludes)?;
    let walker = WalkBuilder::new(dir)
        .standard_filters(false)
        .git_ignore(gitignore)
        .git_exclude(gitignore)
        .require_git(true)
        .overrides(overrides)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let skip: PathBuf = skip.to_path_buf();
    Ok(walker.filter_map(move |entry| match entry {
        Ok(entry) if entry.path() == skip => None,
        Ok(entry) => Some(Ok(entry)),
        // An entry removed while the walk runs is simply not in the archive.
        Err(error)
            if error
                .io_error()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
        {
            None
        }
        Err(error) => Some(Err(BackupError::Walk(error.to_string()))),
    }))
}

/// Whether `relative` (or one of its parents) matches an exclude pattern, the way
/// [`walk`] decides; for trees that are not walked from their root.
pub fn matches_exclude(excludes: &[String], relative: &Path) -> bool {
    let Ok(overrides) = build_overrides(Path::new("/"), excludes) else {
        return false;
    };
    let mut path = PathBuf::from("/");
    for component in relative.components() {
        path.push(component);
        if overrides.matched(&path, false).is_ignore() || overrides.matched(&path, true).is_ignore()
        {
            return true;
        }
    }
    false
}

fn build_overrides(
    root: &Path,
    excludes: &[String],
) -> Result<ignore::overrides::Override, BackupError> {
    let mut overrides = OverrideBuilder::new(root);
    for pattern in excludes.iter().filter_map(|p| normalize_exclude(p)) {
        // mksquashfs matches each pattern from the root and, with `...`, at any depth.
        let glob = match pattern.strip_prefix('/') {
            Some(anchored) => format!("!/{anchored}"),
            None => format!("!**/{pattern}"),
        };
        overrides
            .add(&glob)
            .map_err(|e| BackupError::InvalidExclude {
                pattern: pattern.clone(),
                reason: e.to_string(),
            })?;
    }
    overrides.build().map_err(|e| BackupError::InvalidExclude {
        pattern: excludes.join(","),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::normalize_exclude;

    #[test]
    fn normalizes_like_the_reference() {
        assert_eq!(
            normalize_exclude("**/node_modules").as_deref(),
            Some("node_modules")
        );
        assert_eq!(normalize_exclude("a/**/b").as_deref(), Some("a/b"));
        assert_eq!(normalize_exclude("build/**").as_deref(), Some("build"));
        assert_eq!(normalize_exclude("**"), None);
        assert_eq!(normalize_exclude(""), None);
        assert_eq!(normalize_exclude("*.log").as_deref(), Some("*.log"));
    }

    #[test]
    fn matches_excludes_at_any_depth() {
        let excludes = vec!["node_modules".to_string(), "*.log".to_string()];
        assert!(super::matches_exclude(
            &excludes,
            std::path::Path::new("a/node_modules/x")
        ));
        assert!(super::matches_exclude(
            &excludes,
            std::path::Path::new("b.log")
        ));
        assert!(!super::matches_exclude(
            &excludes,
            std::path::Path::new("src/main.rs")
        ));
    }
}
