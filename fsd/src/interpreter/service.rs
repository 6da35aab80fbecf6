//! Code contexts: each owns one executor for its whole life. Calls in a context are
//! serialized (its executor's lock); contexts run in parallel. New contexts take a warm
//! executor from the pool of their interpreter when one is ready (the pool refills in the
//! background), and apply their `cwd` and `env_vars` to it.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsd_api::interpreter::{CodeEvent, ContextInfo};
use tokio::sync::{mpsc, oneshot};

use super::error::InterpreterError;
use super::executor::{CallEnd, Executor, Programs};
use super::kind::Kind;
use crate::time::now_rfc3339;
use fsd_process::World;

/// How long after startup the pools start filling.
const WARM_AFTER: Duration = Duration::from_millis(500);

/// A context's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Python,
    JavaScript,
    TypeScript,
}

impl Language {
    /// The reference's names and aliases, case-insensitive; `None` for anything else
    /// (the reference silently takes those as Python).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "python" | "python3" | "py" => Some(Self::Python),
            "javascript" | "js" | "node" => Some(Self::JavaScript),
            "typescript" | "ts" => Some(Self::TypeScript),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::JavaScript => "javascript",
            Self::TypeScript => "typescript",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Self::Python => Kind::Python,
            Self::JavaScript | Self::TypeScript => Kind::Node,
        }
    }
}

/// How the service starts executors.
#[derive(Clone)]
pub struct InterpreterConfig {
    pub programs: Programs,
    pub world: Arc<World>,
    pub base_env: Vec<(String, String)>,
    pub workspace: PathBuf,
    /// Warm executors kept ready per interpreter (Python, Node).
    pub pool_size: usize,
    /// Calls that name no timeout are interrupted after this long (none: never).
    pub default_timeout: Option<Duration>,
}

/// A context's executor, or the news that it died.
enum Slot {
    Ready { executor: Box<Executor>, calls: u64 },
    Dead,
}

pub struct Context {
    pub id: String,
    pub language: Language,
    pub cwd: PathBuf,
    env: BTreeMap<String, String>,
    slot: tokio::sync::Mutex<Slot>,
    /// The executor's supervisor, so that a delete can end a call in progress.
    supervisor: AtomicU32,
    pub created_at: String,
    /// When a call last started in it.
    last_used: Mutex<String>,
}

pub struct InterpreterService {
    config: InterpreterConfig,
    /// In creation order.
    contexts: Mutex<Vec<Arc<Context>>>,
    pools: Mutex<HashMap<Kind, Vec<Executor>>>,
    /// Executors being started for the pools, per interpreter.
    warming: Mutex<HashMap<Kind, usize>>,
}

impl InterpreterService {
    pub fn new(config: InterpreterConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            contexts: Mutex::new(Vec::new()),
            pools: Mutex::new(HashMap::new()),
            warming: Mutex::new(HashMap::new()),
        })
    }

    /// Fills the pools in the background, a moment after startup: starting interpreters
    /// would compete with the daemon's own start for the CPU.
    pub fn warm(self: &Arc<Self>) {
        let service = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(WARM_AFTER).await;
            if let Some(service) = service.upgrade() {
                for kind in [Kind::Python, Kind::Node] {
                    service.refill(kind);
                }
            }
        });
    }

    pub async fn create(
        self: &Arc<Self>,
        language: Option<&str>,
        cwd: Option<&str>,
        env: BTreeMap<String, String>,
    ) -> Result<Arc<Context>, InterpreterError> {
        let language = match language {
            None | Some("") => Language::Python,
            Some(name) => Language::parse(name).ok_or_else(|| InterpreterError::Invalid {
                field: "language",
                reason: format!("{name:?} is not python, javascript or typescript"),
            })?,
        };
        let cwd = match cwd {
            None | Some("") => self.config.workspace.clone(),
            Some(dir) => self.config.workspace.join(dir),
        };
        if !cwd.is_dir() {
            return Err(InterpreterError::Invalid {
                field: "cwd",
                reason: format!("{} is not a directory", cwd.display()),
            });
        }
        let mut executor = self.executor(language.kind()).await?;
        executor
            .init(&cwd, &env, self.config.world.within())
            .await?;
        let created_at = now_rfc3339();
        let context = Arc::new(Context {
            last_used: Mutex::new(created_at.clone()),
            created_at,
            id: crate::random::uuid_v4(),
            language,
            cwd,
            env,
            supervisor: AtomicU32::new(executor.supervisor()),
            slot: tokio::sync::Mutex::new(Slot::Ready {
                executor: Box::new(executor),
                calls: 0,
            }),
        });
        self.lock_contexts().push(context.clone());
        Ok(context)
    }

    /// The supervisors of the contexts' interpreters (host pids): each interpreter is the
    /// child of its own, and goes back into its directory by name before each call.
    pub fn supervisors(&self) -> Vec<u32> {
        self.lock_contexts()
            .iter()
            .map(|c| c.supervisor.load(Ordering::SeqCst))
            .collect()
    }

    pub fn list(&self) -> Vec<ContextInfo> {
        self.lock_contexts()
            .iter()
            .map(|context| ContextInfo {
                id: context.id.clone(),
                language: context.language.name().to_string(),
                cwd: context.cwd.display().to_string(),
                created_at: context.created_at.clone(),
                last_used: context
                    .last_used
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            })
            .collect()
    }

    pub fn get(&self, id: &str) -> Result<Arc<Context>, InterpreterError> {
        self.lock_contexts()
            .iter()
            .find(|context| context.id == id)
            .cloned()
            .ok_or_else(|| InterpreterError::NotFound(id.to_string()))
    }

    /// Interrupts what runs in a context (SIGINT to everything its executor started, as
    /// Ctrl-C would); the context stays.
    pub fn interrupt(&self, id: &str) -> Result<(), InterpreterError> {
        let context = self.get(id)?;
        let supervisor = context.supervisor.load(Ordering::SeqCst);
        if supervisor > 1 {
            fsd_process::proctree::signal_all(
                &fsd_process::proctree::living_below(supervisor),
                nix::sys::signal::Signal::SIGINT,
            );
        }
        Ok(())
    }

    /// Removes a context and ends its executor (and whatever its code started).
    pub async fn delete(&self, id: &str) -> Result<(), InterpreterError> {
        let context = {
            let mut contexts = self.lock_contexts();
            let at = contexts
                .iter()
                .position(|context| context.id == id)
                .ok_or_else(|| InterpreterError::NotFound(id.to_string()))?;
            contexts.remove(at)
        };
        // A call in progress ends (with an error) when its executor does.
        let supervisor = context.supervisor.load(Ordering::SeqCst);
        if supervisor > 1 {
            let _ = tokio::task::spawn_blocking(move || {
                fsd_process::stop::kill_supervised(supervisor);
            })
            .await;
        }
        *context.slot.lock().await = Slot::Dead;
        Ok(())
    }

    /// Runs `code` in `context` after the calls before it, streaming its events to
    /// `events`. `started` hears when the call starts, or why it cannot (the context's
    /// executor is gone, the language does not match) before any event.
    pub async fn execute(
        self: &Arc<Self>,
        context: Arc<Context>,
        code: String,
        language: Option<&str>,
        timeout: Option<Duration>,
        events: mpsc::Sender<CodeEvent>,
        started: oneshot::Sender<Result<(), InterpreterError>>,
    ) {
        if let Some(asked) = language.filter(|name| !name.is_empty())
            && Language::parse(asked) != Some(context.language)
        {
            let _ = started.send(Err(InterpreterError::WrongLanguage {
                id: context.id.clone(),
                context: context.language.name().into(),
                asked: asked.to_string(),
            }));
            return;
        }
        let mut slot = context.slot.lock().await;
        *context.last_used.lock().unwrap_or_else(|p| p.into_inner()) = now_rfc3339();
        if let Slot::Ready { executor, .. } = &mut *slot
            && !executor.alive()
        {
            *slot = Slot::Dead;
        }
        let Slot::Ready { executor, calls } = &mut *slot else {
            let _ = started.send(Err(InterpreterError::Dead(context.id.clone())));
            return;
        };
        let _ = started.send(Ok(()));
        *calls += 1;
        let timeout = timeout.or(self.config.default_timeout);
        let language = context.language.name();
        match executor
            .run(&code, language, timeout, *calls, &events)
            .await
        {
            CallEnd::Kept => {}
            CallEnd::Lost => *slot = Slot::Dead,
            CallEnd::Killed => {
                // A fresh executor in the context's place; its state is gone (the error
                // event said so).
                *slot = match self.fresh(&context).await {
                    Ok(executor) => {
                        context
                            .supervisor
                            .store(executor.supervisor(), Ordering::SeqCst);
                        Slot::Ready {
                            executor: Box::new(executor),
                            calls: 0,
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, context = %context.id, "cannot restart a context's executor");
                        Slot::Dead
                    }
                };
            }
        }
    }

    async fn fresh(self: &Arc<Self>, context: &Context) -> Result<Executor, InterpreterError> {
        let mut executor = self.executor(context.language.kind()).await?;
        executor
            .init(&context.cwd, &context.env, self.config.world.within())
            .await?;
        Ok(executor)
    }

    /// A warm executor of `kind` if one is ready, else a new one; the pool refills.
    async fn executor(self: &Arc<Self>, kind: Kind) -> Result<Executor, InterpreterError> {
        let warm = {
            let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
            let pool = pools.entry(kind).or_default();
            let mut found = None;
            while let Some(mut candidate) = pool.pop() {
                if candidate.alive() {
                    found = Some(candidate);
                    break;
                }
            }
            found
        };
        self.refill(kind);
        match warm {
            Some(executor) => Ok(executor),
            None => self.spawn(kind).await,
        }
    }

    async fn spawn(&self, kind: Kind) -> Result<Executor, InterpreterError> {
        Executor::spawn(
            kind,
            &self.config.programs,
            &self.config.world,
            &self.config.base_env,
            &self.config.workspace,
        )
        .await
    }

    /// Starts executors in the background until the pool of `kind` is full again.
    fn refill(self: &Arc<Self>, kind: Kind) {
        let missing = {
            let pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
            let mut warming = self.warming.lock().unwrap_or_else(|p| p.into_inner());
            let have =
                pools.get(&kind).map_or(0, Vec::len) + warming.get(&kind).copied().unwrap_or(0);
            let missing = self.config.pool_size.saturating_sub(have);
            *warming.entry(kind).or_default() += missing;
            missing
        };
        for _ in 0..missing {
            let service = Arc::downgrade(self);
            tokio::spawn(async move {
                let Some(this) = service.upgrade() else {
                    return;
                };
                let spawned = this.spawn(kind).await;
                *this
                    .warming
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(kind)
                    .or_default() -= 1;
                match spawned {
                    Ok(executor) => this
                        .pools
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(kind)
                        .or_default()
                        .push(executor),
                    Err(error) => {
                        tracing::debug!(%error, kind = kind.name(), "no warm executor");
                    }
                }
            });
        }
    }

    /// Ends every executor (daemon shutdown).
    pub fn shutdown(&self) {
        self.pools.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.lock_contexts().clear();
    }

    fn lock_contexts(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Context>>> {
        self.contexts.lock().unwrap_or_else(|p| p.into_inner())
    }
}
