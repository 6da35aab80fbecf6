//! How `fsctl backup log|ls|diff|restore --path` print what they found: a line each for
//! people, one JSON document with `--json`.

use fsctl::trusted::{BackupMeta, Difference, IndexEntry, describe};
use fsd_sdk::api::backup::ExtractBackupResponse;
use serde_json::json;

use crate::output;

/// The timeline, newest first, each snapshot with those built on it (`dependents`: they
/// stop restoring without it, so it is not deleted while they are there).
pub fn log(snapshots: &[BackupMeta], as_json: bool) {
    let dependents = |id: &str| -> Vec<String> {
        fsd_control::backup::dependents(snapshots, id)
            .iter()
            .map(|meta| meta.id.clone())
            .collect()
    };
    if as_json {
        let listed: Vec<serde_json::Value> = snapshots
            .iter()
            .map(|meta| {
                let mut value = json!(meta);
                value["dependents"] = json!(dependents(&meta.id));
                value
            })
            .collect();
        output::json(&json!({ "snapshots": listed }));
        return;
    }
    for meta in snapshots {
        let kind = match (&meta.parent, meta.depth) {
            (Some(parent), Some(depth)) => format!("incremental {depth} over {parent}"),
            (Some(parent), None) => format!("layer over {parent}"),
            (None, _) => "full".to_string(),
        };
        let changes = meta
            .changes
            .map(|c| format!("  +{} ~{} -{}", c.created, c.modified, c.deleted))
            .unwrap_or_default();
        let built_on = dependents(&meta.id);
        let built_on = if built_on.is_empty() {
            String::new()
        } else {
            format!("  (built on by {})", built_on.join(", "))
        };
        println!(
            "{}  {}  {:>12}  {}{}  {}{}",
            meta.id, meta.created_at, meta.size_bytes, kind, changes, meta.dir, built_on
        );
    }
}

pub fn ls(entries: &[IndexEntry], as_json: bool) {
    if as_json {
        let listed: Vec<_> = entries
            .iter()
            .map(|e| {
                json!({
                    "path": e.path.display().to_string(),
                    "type": e.kind.as_str(),
                    "mode": format!("{:o}", e.mode),
                    "size": e.size,
                    "mtimeNs": e.mtime_ns,
                })
            })
            .collect();
        output::json(&json!({ "entries": listed }));
        return;
    }
    for entry in entries {
        let kind = match entry.kind {
            fsctl::trusted::EntryKind::Dir => 'd',
            fsctl::trusted::EntryKind::File => '-',
            fsctl::trusted::EntryKind::Symlink => 'l',
            fsctl::trusted::EntryKind::Special => '?',
        };
        println!(
            "{kind} {:04o} {:>12}  {}",
            entry.mode,
            entry.size,
            entry.path.display()
        );
    }
}

pub fn diff(differences: &[Difference], as_json: bool) {
    if as_json {
        let listed: Vec<_> = differences
            .iter()
            .map(|d| {
                let (path, from) = describe(d);
                json!({ "type": d.kind(), "path": path, "from": from })
            })
            .collect();
        output::json(&json!({ "changes": listed }));
        return;
    }
    for difference in differences {
        let (path, from) = describe(difference);
        match from {
            Some(from) => println!("{:<9} {path} (from {from})", difference.kind()),
            None => println!("{:<9} {path}", difference.kind()),
        }
    }
}

pub fn restored_paths(restored: &ExtractBackupResponse, as_json: bool) {
    if as_json {
        output::json(restored);
    } else {
        println!(
            "restored {} files ({} bytes), {} directories, {} symlinks",
            restored.files, restored.bytes, restored.directories, restored.symlinks
        );
    }
}
