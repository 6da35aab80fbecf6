//! `/api/fork`: a workspace directory forked into copy-on-write branches, the branches
//! listed, merged back and discarded (fsd's own; the engine is [`fsd_backup::fork`], the
//! merge's work `super::merge`).

use std::path::{Path, PathBuf};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use fsd_api::backup::{
    BranchInfo, BranchesResponse, DiscardBranchRequest, DiscardBranchResponse, ForkRequest,
    ForkResponse, MergeBranchRequest, MergeBranchResponse,
};
use fsd_api::{ErrorCode, Operation};
use fsd_backup::BackupError;
use fsd_backup::fork::Branch;

use super::BackupState;
use super::holders::holder;
use super::merge::{self, MergeMode};
use super::request::backup_dir;
use super::wire_error::Forking;
use crate::error::{ApiError, OperationExt};
use crate::paths::Follow;

/// Most branches one fork makes.
pub const MAX_BRANCHES: u32 = 100;

pub async fn fork(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<ForkResponse>, ApiError> {
    let req: ForkRequest =
        crate::wire::json::parse_as(&body, ErrorCode::ValidationFailed, Operation::WorkspaceFork)?;
    Ok(Json(fork_dir(&state, req).await?))
}

pub async fn branches(
    State(state): State<BackupState>,
) -> Result<Json<BranchesResponse>, ApiError> {
    Ok(Json(list_branches(&state).await?))
}

/// Every branch, with what it changed.
pub async fn list_branches(state: &BackupState) -> Result<BranchesResponse, ApiError> {
    let branches = state
        .service
        .branches()
        .await
        .map_err(Forking)
        .op(Operation::WorkspaceFork)?;
    Ok(BranchesResponse {
        branches: branches.iter().map(branch_info).collect(),
    })
}

pub async fn discard(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<DiscardBranchResponse>, ApiError> {
    let req: DiscardBranchRequest =
        crate::wire::json::parse_as(&body, ErrorCode::ValidationFailed, Operation::WorkspaceFork)?;
    Ok(Json(discard_branch(&state, req).await?))
}

/// Takes the request's branch away with what was written in it.
pub async fn discard_branch(
    state: &BackupState,
    req: DiscardBranchRequest,
) -> Result<DiscardBranchResponse, ApiError> {
    let path = state
        .paths
        .in_workspace("path", &req.path, Follow::Parent)?;
    let roots = confined_roots(state);
    let discarded = state
        .service
        .discard_branch(path, move |dir| holder(dir, &roots))
        .await
        .map_err(Forking)
        .op(Operation::WorkspaceFork)?;
    Ok(DiscardBranchResponse {
        success: true,
        path: discarded.path.display().to_string(),
    })
}

pub async fn merge(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<MergeBranchResponse>, ApiError> {
    let req: MergeBranchRequest = crate::wire::json::parse_as(
        &body,
        ErrorCode::ValidationFailed,
        Operation::WorkspaceMerge,
    )?;
    Ok(Json(merge_branch(&state, req).await?))
}

/// Merges the request's branch into its `into`, or says what that would change.
pub async fn merge_branch(
    state: &BackupState,
    req: MergeBranchRequest,
) -> Result<MergeBranchResponse, ApiError> {
    let op = Operation::WorkspaceMerge;
    let mode = MergeMode::parse(req.mode.as_deref()).ok_or_else(|| {
        ApiError::invalid_field(
            ErrorCode::ValidationFailed,
            "mode",
            "must be two-way-safe, theirs or ours",
        )
    })?;
    let branch = state
        .paths
        .in_workspace("branch", &req.branch, Follow::Parent)?;
    let into = match &req.into {
        Some(into) => Some(state.paths.in_workspace("into", into, Follow::Parent)?),
        None => None,
    };
    let sides = state
        .service
        .merge_sides(branch, into)
        .await
        .map_err(Forking)
        .op(op)?;
    // What it merges into is written: inside the roots too when it was not named.
    state
        .paths
        .in_workspace("into", &sides.into.display().to_string(), Follow::Parent)?;
    let files = state.files.clone();
    let (sides, decided) = tokio::task::spawn_blocking(move || {
        let decided = merge::decide(&files, &sides, mode);
        (sides, decided)
    })
    .await
    .map_err(worker_failed)
    .op(op)?;
    let decided = decided.map_err(|e| merge_failed(&sides.into, e)).op(op)?;
    if req.dry_run {
        return Ok(merge::answer(&sides, decided, None));
    }
    let (steps, body) = merge::steps(&decided)
        .map_err(|e| merge_failed(&sides.branch, e))
        .op(op)?;
    let outcomes = state
        .files
        .apply(None, &sides.into.display().to_string(), steps, body)
        .await
        .op(op)?;
    // The next merge of the pair starts from what this one took in; a base not kept
    // leaves the last one (a later merge then sees conflicts it could have settled).
    let kept = tokio::task::spawn_blocking(move || {
        let kept = merge::keep_base(&sides, &decided, &outcomes);
        (sides, decided, outcomes, kept)
    })
    .await;
    let (sides, decided, outcomes, kept) = kept.map_err(worker_failed).op(op)?;
    if let Err(error) = kept {
        tracing::warn!(%error, file = %sides.base_file.display(), "could not keep a merge's base");
    }
    Ok(merge::answer(&sides, decided, Some(outcomes)))
}

fn merge_failed(path: &Path, error: std::io::Error) -> Forking {
    Forking(BackupError::io(path, error))
}

/// A merge's blocking work that did not come back (it panicked).
fn worker_failed(join: tokio::task::JoinError) -> Forking {
    merge_failed(Path::new(""), std::io::Error::other(join.to_string()))
}

/// Forks the request's directory into its branches.
pub async fn fork_dir(state: &BackupState, req: ForkRequest) -> Result<ForkResponse, ApiError> {
    let op = Operation::WorkspaceFork;
    let names = match (req.names, req.count) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid_field(
                ErrorCode::ValidationFailed,
                "count",
                "give names or count, not both",
            ));
        }
        (Some(names), None) => names,
        (None, Some(count)) if (1..=MAX_BRANCHES).contains(&count) => {
            (1..=count).map(|n| n.to_string()).collect()
        }
        (None, Some(_)) => {
            return Err(ApiError::invalid_field(
                ErrorCode::ValidationFailed,
                "count",
                format!("must be 1 to {MAX_BRANCHES}"),
            ));
        }
        (None, None) => vec!["1".into()],
    };
    if names.len() > MAX_BRANCHES as usize {
        return Err(ApiError::invalid_field(
            ErrorCode::ValidationFailed,
            "names",
            format!("at most {MAX_BRANCHES} branches a fork"),
        ));
    }
    let dir = backup_dir(state, &req.dir, op)?;
    // Forked where it is (the engine takes it so too): a directory named through a link
    // has its branches beside what it names.
    let dir = std::fs::canonicalize(&dir)
        .map_err(|_| Forking(BackupError::NotADirectory(dir.clone())))
        .op(op)?;
    // With --confine, each branch beside the directory must be inside the roots too.
    for name in &names {
        let beside = branch_path(&dir, name);
        state
            .paths
            .in_workspace("dir", &beside.display().to_string(), Follow::Parent)?;
    }
    let (made, copied_because) = match req.from {
        Some(chain) => {
            let sources = received_chain(state, &chain).op(op)?;
            let made = state.service.receive(dir.clone(), names, sources).await;
            made.map(|made| (made, None))
        }
        None => {
            let roots = confined_roots(state);
            let forked = state
                .service
                .fork(dir.clone(), names, move |dir| holder(dir, &roots))
                .await;
            forked.map(|forked| (forked.branches, forked.copied_because))
        }
    }
    .map_err(Forking)
    .op(op)?;
    Ok(ForkResponse {
        success: true,
        dir: dir.display().to_string(),
        branches: made.iter().map(branch_info).collect(),
        copied_because,
    })
}

/// A directory frozen to be sent as a fork point: its frozen layers, shown read-only
/// while this lives.
pub struct Frozen {
    dir: PathBuf,
    lowers: Vec<PathBuf>,
    _view: fsd_backup::fork::AncestorView,
}

impl Frozen {
    /// Records `archive` (made of the view) as sent from the directory.
    pub async fn record(
        self,
        service: &std::sync::Arc<super::service::BackupService>,
        archive: PathBuf,
    ) -> Result<(), BackupError> {
        service.record_sent(self.dir, archive, self.lowers).await
    }
}

/// For a snapshot with `fork`: freezes its directory as a fork does (refused as a fork is,
/// under a mount; from a copy while a process works in it) and points the snapshot at
/// what was frozen, so the archive is exactly the tree a branch received later stacks on.
pub async fn freeze_to_send(
    state: &BackupState,
    spec: &mut super::service::CreateSpec,
) -> Result<Option<Frozen>, ApiError> {
    if !spec.fork {
        return Ok(None);
    }
    let op = Operation::BackupCreate;
    let dir = std::fs::canonicalize(&spec.dir)
        .map_err(|_| Forking(BackupError::NotADirectory(spec.dir.clone())))
        .op(op)?;
    let roots = confined_roots(state);
    let frozen = state
        .service
        .freeze(dir.clone(), move |dir| holder(dir, &roots))
        .await
        .map_err(Forking)
        .op(op)?;
    if let Some(because) = &frozen.copied_because {
        tracing::info!(dir = %dir.display(), %because, "sent a copy of the directory as the fork point");
    }
    let lowers = frozen.lowers;
    let view = state
        .service
        .show_frozen(lowers.clone())
        .await
        .map_err(Forking)
        .op(op)?;
    spec.dir = view.path().to_path_buf();
    // The daemon's own read-only mount of a tree checked inside the roots above, which no
    // process can change: read where it is, not beneath the `--confine` roots.
    spec.options.reader = fsd_backup::reader::Reader::default();
    Ok(Some(Frozen {
        dir,
        lowers,
        _view: view,
    }))
}

/// A fork request's `from`: a snapshot's chain as `/api/backup/download` takes one.
fn received_chain(
    state: &BackupState,
    chain: &[fsd_api::backup::ArchiveSource],
) -> Result<Vec<super::service::Source>, ApiError> {
    if chain.is_empty() {
        return Err(ApiError::invalid_field(
            ErrorCode::ValidationFailed,
            "from",
            "must name at least the fork point's archive",
        ));
    }
    Ok(state.service.sources("from", chain)?)
}

fn branch_path(dir: &Path, name: &str) -> PathBuf {
    let mut named = dir.as_os_str().to_owned();
    named.push("@");
    named.push(name);
    PathBuf::from(named)
}

fn confined_roots(state: &BackupState) -> Vec<PathBuf> {
    state
        .paths
        .policy()
        .confined_roots()
        .map(<[PathBuf]>::to_vec)
        .unwrap_or_default()
}

fn branch_info(branch: &Branch) -> BranchInfo {
    BranchInfo {
        name: branch.name.clone(),
        path: branch.path.display().to_string(),
        forked_from: branch.forked_from.display().to_string(),
        forked_at: rfc3339_ms(branch.forked_at),
        changed: branch.changed,
        deleted: branch.deleted,
        bytes: branch.bytes,
        received_from: branch
            .received
            .as_ref()
            .map(|archive| archive.display().to_string()),
    }
}

fn rfc3339_ms(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    crate::time::unix_rfc3339(ms / 1000, (ms % 1000) * 1_000_000)
}
