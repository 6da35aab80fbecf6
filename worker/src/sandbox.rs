//! The `Sandbox` Durable Object: one per sandbox id, owning its container. It starts the
//! container on demand (with a daemon token of its own) and waits until fsd answers on port
//! 3000, forwards the route API (retrying 503s within the budget clients expect), keeps the
//! preview exposures in its storage with the container run each was made in, and puts an
//! idle container to sleep with an alarm after `sleepAfter` unless `keepAlive` is set;
//! `GET /status` says whether it runs without waking it; `POST /destroy` ends it and
//! forgets the sandbox. `/backups`, `/restore` and `/schedule` are its time machine in R2
//! (`backups`, `schedule`); `POST /mounts` and `POST /unmount` mount R2 buckets with no key
//! in the container, and the container's requests for them come back here (`mounts`).

use std::cell::{Cell, RefCell};
use std::time::Duration;

use fsd_control::exposures::{SandboxExposures, SavedPort};
use fsd_control::preview::{self, Admission, PreviewTarget};
use fsd_control::sandbox::{
    DAEMON_PORT, DEFAULT_SLEEP_AFTER, parse_sleep_after, retry_delay, sleep_due,
};
use serde::Deserialize;
use worker::js_sys::{Function, Object, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{
    Container, Date, Delay, DurableObject, Env, Method, Request, Response, Result, State,
    durable_object,
};

use crate::daemon::{self, Daemon};
use crate::wire::{PREVIEW_HEADER, SANDBOX_ID_HEADER, error};
// The `durable_object` macro names `wasm_bindgen` at the call site.
use worker::wasm_bindgen;

/// The largest request body kept in memory so a forwarded request can be sent again.
const REPLAYED_BODY: usize = 1 << 20;

/// How long a start may take before fsd answers (the reference's port-ready timeout).
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// The first wait between start probes, doubled each time up to `READY_POLL_MAX`: fsd
/// answers tens of milliseconds after its container starts, and a fixed 300 ms wait made
/// every cold start wait for most of one.
const READY_POLL: Duration = Duration::from_millis(10);
const READY_POLL_MAX: Duration = Duration::from_millis(250);

/// What a start probe found.
enum Probe {
    /// fsd answers, in the run with this `runtimeId`.
    Ready(String),
    /// fsd answers 401 to the stored token.
    Refused,
    /// The container is no longer running.
    Stopped,
}

#[durable_object]
pub struct Sandbox {
    state: State,
    env: Env,
    /// The run fsd was last seen answering in (its token and `runtimeId`): while its
    /// container runs, a request goes straight to fsd instead of first asking it for its
    /// capabilities (a round trip into the container each time).
    seen: RefCell<Option<(Option<String>, String)>>,
    /// The last activity (ms) and the last one written to storage: activity is written
    /// (and the sleep alarm moved) at most once per `ACTIVITY_WRITE`, not on every request.
    activity: Cell<(i64, i64)>,
}

/// How often activity reaches storage; the alarm reads the newer of storage and memory.
const ACTIVITY_WRITE: i64 = 1_000;

impl DurableObject for Sandbox {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            seen: RefCell::new(None),
            activity: Cell::new((0, 0)),
        }
    }

    async fn fetch(&self, request: Request) -> Result<Response> {
        if crate::mounts::intercepted(&request) {
            return crate::mounts::proxy(&self.state, &self.env, request).await;
        }
        let id = request
            .headers()
            .get(SANDBOX_ID_HEADER)?
            .unwrap_or_default();
        if let Some(preview) = request.headers().get(PREVIEW_HEADER)? {
            return self.preview(&id, &preview, request).await;
        }
        let path = request.path();
        match (request.method().to_string().as_str(), path.as_str()) {
            ("POST", "/expose") => self.expose(&id, request).await,
            ("POST", "/unexpose") => self.unexpose(request).await,
            ("GET", "/exposed") => self.exposed(&id, request).await,
            ("POST", "/destroy") => self.destroy().await,
            ("GET", "/status") => self.status().await,
            ("POST", "/backups") | ("POST", "/restore") => self.backup(&path, request).await,
            // Reading and pruning history needs the store only, never the container.
            ("GET", "/backups") => crate::backups::list(&self.env, &request).await,
            ("POST", "/backups/forget") => crate::backups::forget(&self.env, request).await,
            ("DELETE", path) if path.starts_with("/backups/") => {
                crate::backups::delete(&self.env, &path["/backups/".len()..]).await
            }
            ("PUT", "/schedule") => {
                let answer = crate::schedule::set(&self.state, request, now_ms()).await?;
                self.arm().await?;
                Ok(answer)
            }
            ("GET", "/schedule") => crate::schedule::get(&self.state).await,
            ("DELETE", "/schedule") => crate::schedule::clear(&self.state).await,
            ("POST", "/mounts") | ("POST", "/unmount") => self.mounts(&path, request).await,
            _ => self.forward(request).await,
        }
    }

    /// The one alarm: a scheduled snapshot that is due is taken first, then an idle
    /// container is put to sleep; the alarm is set again for what comes next.
    async fn alarm(&self) -> Result<Response> {
        if let Some(mut schedule) = crate::schedule::load(&self.state).await?
            && now_ms() >= schedule.next
        {
            schedule.last = Some(self.scheduled_round(&schedule).await?);
            schedule.advance(now_ms());
            crate::schedule::save(&self.state, &schedule).await?;
        }
        if let Some(due) = self.sleep_due().await?
            && now_ms() >= due
        {
            if let Some(container) = self.state.container()
                && container.running()
            {
                // SIGTERM: fsd ends its commands and tunnels and exits 0.
                container.signal(15)?;
            }
            self.seen.replace(None);
            self.state.storage().delete("runtimeId").await?;
        }
        self.arm().await?;
        Response::ok("")
    }
}

impl Sandbox {
    /// When the running container is to be put to sleep (`None`: it is not running, or
    /// `keepAlive`): `sleepAfter` after the newer of stored and in-memory activity.
    async fn sleep_due(&self) -> Result<Option<i64>> {
        if !self.state.container().is_some_and(|c| c.running()) {
            return Ok(None);
        }
        let stored: i64 = self.state.storage().get("lastActivity").await?.unwrap_or(0);
        let last = stored.max(self.activity.get().0);
        Ok(sleep_due(last, self.sleep_after(), self.keep_alive()))
    }

    /// Sets the alarm for whichever comes first: the sleep, or the next scheduled snapshot.
    async fn arm(&self) -> Result<()> {
        let schedule = crate::schedule::load(&self.state).await?.map(|s| s.next);
        let next = [self.sleep_due().await?, schedule]
            .into_iter()
            .flatten()
            .min();
        // A time, not a number: the worker crate reads an `i64` as an offset from now.
        match next.and_then(chrono::DateTime::from_timestamp_millis) {
            Some(at) => self.state.storage().set_alarm(at).await,
            None => self.state.storage().delete_alarm().await,
        }
    }

    /// One scheduled round: a snapshot of the directory (only while the container runs;
    /// it does not count as activity), then the retention policy.
    async fn scheduled_round(
        &self,
        schedule: &crate::schedule::Schedule,
    ) -> Result<crate::schedule::Round> {
        let mut round = crate::schedule::Round {
            at: crate::backups::now().to_rfc3339(),
            id: None,
            removed: Vec::new(),
            error: None,
        };
        if !self.container()?.running() {
            round.error = Some("the container is not running".into());
            return Ok(round);
        }
        let bucket = match crate::backups::Bucket::from_env(&self.env) {
            Ok(bucket) => bucket,
            Err(missing) => {
                round.error = Some(format!("not configured: {}", missing.0.join(", ")));
                return Ok(round);
            }
        };
        let daemon = match self.ready().await {
            Ok((daemon, _)) => daemon,
            Err(refused) => {
                round.error = Some(refused.to_string());
                return Ok(round);
            }
        };
        let options = crate::backups::SnapshotOptions {
            dir: schedule.dir.clone(),
            ..Default::default()
        };
        match crate::backups::take(&bucket, &daemon, &options).await? {
            Ok(meta) => round.id = Some(meta.id),
            Err(mut refused) => {
                round.error = Some(refused.text().await.unwrap_or_default());
                return Ok(round);
            }
        }
        if schedule.policy.is_empty() {
            return Ok(round);
        }
        match crate::backups::apply_policy(&bucket, &schedule.dir, &schedule.policy, false).await? {
            Ok(decision) => round.removed = decision.remove,
            Err(mut refused) => round.error = Some(refused.text().await.unwrap_or_default()),
        }
        Ok(round)
    }

    fn sleep_after(&self) -> Duration {
        self.env
            .var("SLEEP_AFTER")
            .ok()
            .and_then(|value| parse_sleep_after(&value.to_string()).ok())
            .unwrap_or(DEFAULT_SLEEP_AFTER)
    }

    fn keep_alive(&self) -> bool {
        self.env
            .var("KEEP_ALIVE")
            .is_ok_and(|value| value.to_string() == "true")
    }

    fn container(&self) -> Result<Container> {
        self.state
            .container()
            .ok_or_else(|| worker::Error::RustError("no container is bound".into()))
    }

    /// Starts the container if it is not running (with a fresh daemon token) and waits until
    /// fsd answers; returns fsd and the run's `runtimeId`. A running container that refuses
    /// the stored token (a run this object did not start) is replaced once.
    async fn ready(&self) -> Result<(Daemon, String)> {
        let container = self.container()?;
        if container.running()
            && let Some((token, runtime)) = self.seen.borrow().clone()
        {
            let port = container.get_tcp_port(DAEMON_PORT)?;
            return Ok((Daemon { port, token }, runtime));
        }
        let mut replaced = false;
        loop {
            if !container.running() {
                let token = crate::random::hex::<32>()?;
                let mut env = vec![("FSD_TOKEN", token.clone())];
                if let Some(host) = crate::r2::plain_http_host(&self.env) {
                    env.push(("FSD_HTTP_TRANSFER_HOSTS", host));
                }
                self.state.storage().put(daemon::TOKEN_KEY, &token).await?;
                start(&container, &env)?;
                // A new run has none of the last run's bucket mounts.
                crate::mounts::forget(&self.state).await?;
            }
            let daemon = Daemon {
                port: container.get_tcp_port(DAEMON_PORT)?,
                token: self.state.storage().get(daemon::TOKEN_KEY).await?,
            };
            match self.probe(&daemon).await? {
                Probe::Ready(runtime) => {
                    self.seen
                        .replace(Some((daemon.token.clone(), runtime.clone())));
                    return Ok((daemon, runtime));
                }
                Probe::Refused if !replaced => {
                    container.destroy(None).await?;
                    replaced = true;
                }
                Probe::Refused => {
                    return Err(worker::Error::RustError(
                        "fsd in the container refuses this object's token".into(),
                    ));
                }
                // The container ended while fsd was awaited: start a new run.
                Probe::Stopped => {}
            }
        }
    }

    /// Polls fsd's capabilities until it answers (its `runtimeId`), refuses the token, or
    /// the start timeout passes.
    async fn probe(&self, daemon: &Daemon) -> Result<Probe> {
        let started = Date::now().as_millis();
        let mut wait = READY_POLL;
        loop {
            let answer = daemon.call(Method::Get, "/api/capabilities", None).await;
            match answer {
                Ok(mut answer) if answer.status_code() == 200 => {
                    let body: serde_json::Value = answer.json().await?;
                    let runtime = body["capabilities"]["runtimeId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    self.state.storage().put("runtimeId", &runtime).await?;
                    return Ok(Probe::Ready(runtime));
                }
                Ok(answer) if answer.status_code() == 401 => return Ok(Probe::Refused),
                _ if !self.container()?.running() => return Ok(Probe::Stopped),
                _ => {}
            }
            if Date::now().as_millis() - started > READY_TIMEOUT.as_millis() as u64 {
                return Err(worker::Error::RustError(
                    "the container did not answer on port 3000 within 90 s".into(),
                ));
            }
            Delay::from(wait).await;
            wait = (wait * 2).min(READY_POLL_MAX);
        }
    }

    /// Notes activity; writes it and moves the sleep alarm at most once per
    /// `ACTIVITY_WRITE`.
    async fn touch(&self) -> Result<()> {
        let now = now_ms();
        let (_, stored) = self.activity.get();
        if now - stored < ACTIVITY_WRITE {
            self.activity.set((now, stored));
            return Ok(());
        }
        self.activity.set((now, now));
        self.state.storage().put("lastActivity", now).await?;
        self.arm().await
    }

    /// fsd on port 3000 of a running container (started if need be), with the activity
    /// noted; or the 503 answer when it does not come up.
    async fn awake(&self) -> Result<std::result::Result<Daemon, Response>> {
        let daemon = match self.ready().await {
            Ok((daemon, _)) => daemon,
            Err(refused) => {
                return Ok(Err(error(
                    503,
                    "CONTAINER_UNAVAILABLE",
                    &refused.to_string(),
                )?));
            }
        };
        self.touch().await?;
        Ok(Ok(daemon))
    }

    /// The route API: to fsd on port 3000, retrying 503s (a starting container) within
    /// the budget.
    async fn forward(&self, mut request: Request) -> Result<Response> {
        let mut daemon = match self.awake().await? {
            Ok(daemon) => daemon,
            Err(refused) => return Ok(refused),
        };
        // A body small enough is read once and sent as bytes on every attempt (teeing the
        // stream of each request cost about a millisecond); a larger one is streamed, and
        // so sent once.
        let length: Option<usize> = request
            .headers()
            .get("content-length")?
            .and_then(|length| length.parse().ok());
        let body = match length {
            Some(0) | None if request.inner().body().is_none() => None,
            Some(length) if length <= REPLAYED_BODY => Some(request.bytes().await?),
            _ => return self.forward_once(&daemon, &request).await,
        };
        let started = Date::now().as_millis();
        let mut attempt = 0;
        let mut reconnected = false;
        loop {
            let answer = match daemon.send(&request, body.as_deref()).await {
                Ok(answer) => answer,
                // fsd did not take the connection although its container was seen running
                // (it is ending, or has ended): look again (probe, or start a new run) and
                // send once more.
                Err(_) if !reconnected => {
                    self.seen.replace(None);
                    reconnected = true;
                    daemon = match self.awake().await? {
                        Ok(daemon) => daemon,
                        Err(refused) => return Ok(refused),
                    };
                    continue;
                }
                Err(failed) => {
                    self.seen.replace(None);
                    return error(503, "CONTAINER_UNAVAILABLE", &failed.to_string());
                }
            };
            let elapsed = Duration::from_millis(Date::now().as_millis() - started);
            match retry_delay(attempt, elapsed) {
                Some(delay) if answer.status_code() == 503 => {
                    Delay::from(delay).await;
                    attempt += 1;
                }
                _ => return Ok(answer),
            }
        }
    }

    /// A request whose body is streamed: sent once, no retry.
    async fn forward_once(&self, daemon: &Daemon, request: &Request) -> Result<Response> {
        match daemon.send(request, None).await {
            Ok(answer) => Ok(answer),
            Err(failed) => {
                self.seen.replace(None);
                error(503, "CONTAINER_UNAVAILABLE", &failed.to_string())
            }
        }
    }

    /// A preview request: a bad token is refused from storage alone (the container is not
    /// woken for it); a port exposed in an earlier run is stale.
    async fn preview(&self, id: &str, preview: &str, request: Request) -> Result<Response> {
        let (port, token) = preview.split_once(':').unwrap_or((preview, ""));
        let target = PreviewTarget {
            port: port.parse().unwrap_or(0),
            sandbox_id: id.to_string(),
            token: token.to_string(),
        };
        let exposures = self.exposures().await?;
        if !exposures.authorizes(target.port, &target.token) {
            return refusal(Admission::InvalidToken);
        }
        let runtime: Option<String> = self.state.storage().get("runtimeId").await?;
        let admission = exposures.admit(&target, runtime.as_deref());
        if admission != Admission::Forward {
            return refusal(admission);
        }
        self.touch().await?;
        let answer = self
            .container()?
            .get_tcp_port(target.port)?
            .fetch_request(request)
            .await;
        // Nothing listening on the port (yet, or any more) is the app's state, not a fault
        // of the Worker.
        answer.or_else(|failed| {
            error(
                502,
                "SERVICE_NOT_RESPONDING",
                &format!("port {}: {failed}", target.port),
            )
        })
    }

    /// `POST /backups` and `POST /restore`: backups to R2 through the daemon's routes.
    async fn backup(&self, path: &str, request: Request) -> Result<Response> {
        let daemon = match self.awake().await? {
            Ok(daemon) => daemon,
            Err(refused) => return Ok(refused),
        };
        if path == "/backups" {
            crate::backups::create(&self.env, &daemon, request).await
        } else {
            crate::backups::restore(&self.env, &daemon, request).await
        }
    }

    /// `POST /mounts` and `POST /unmount`: R2 buckets mounted through this object's
    /// credential proxy (`mounts`).
    async fn mounts(&self, path: &str, request: Request) -> Result<Response> {
        let daemon = match self.awake().await? {
            Ok(daemon) => daemon,
            Err(refused) => return Ok(refused),
        };
        if path == "/mounts" {
            let container = self.container()?;
            crate::mounts::mount(&self.state, &self.env, &container, &daemon, request).await
        } else {
            crate::mounts::unmount(&self.state, &daemon, request).await
        }
    }

    /// `POST /destroy`: ends the container and forgets the sandbox (exposures, its run, the
    /// sleep alarm); the next request starts a fresh one.
    async fn destroy(&self) -> Result<Response> {
        if let Some(container) = self.state.container()
            && container.running()
        {
            container.destroy(None).await?;
        }
        self.seen.replace(None);
        self.activity.set((0, 0));
        self.state.storage().delete_alarm().await?;
        self.state.storage().delete_all().await?;
        Response::from_json(&serde_json::json!({"success": true}))
    }

    /// `GET /status` → `{running, runtimeId}`: whether the container runs, and its run,
    /// from the object alone (asking does not wake it).
    async fn status(&self) -> Result<Response> {
        let running = self.container()?.running();
        let runtime: Option<String> = self.state.storage().get("runtimeId").await?;
        Response::from_json(&serde_json::json!({
            "running": running,
            "runtimeId": if running { runtime } else { None },
        }))
    }

    /// The exposures as the object's storage keeps them (the gateway keeps the same list).
    async fn exposures(&self) -> Result<SandboxExposures> {
        let saved: Vec<SavedPort> = self.state.storage().get("ports").await?.unwrap_or_default();
        Ok(SandboxExposures::from_saved(saved))
    }

    async fn save(&self, exposures: &SandboxExposures) -> Result<()> {
        self.state.storage().put("ports", exposures.saved()).await
    }

    /// `POST /expose {port, hostname, token?, name?}` → `{url, port, token}`.
    async fn expose(&self, id: &str, mut request: Request) -> Result<Response> {
        #[derive(Deserialize)]
        struct Expose {
            port: u32,
            hostname: String,
            token: Option<String>,
            name: Option<String>,
        }
        let Ok(asked) = request.json::<Expose>().await else {
            return error(400, "VALIDATION_FAILED", "body: needs port and hostname");
        };
        let port = match preview::validate_port(asked.port, DAEMON_PORT) {
            Ok(port) => port,
            Err(refused) => return error(400, "INVALID_PORT", &refused.to_string()),
        };
        if let Err(refused) = preview::preview_url(port, id, "probe", &asked.hostname) {
            return error(400, "CUSTOM_DOMAIN_REQUIRED", &refused.to_string());
        }
        let runtime = match self.ready().await {
            Ok((_, runtime)) => runtime,
            Err(refused) => return error(503, "CONTAINER_UNAVAILABLE", &refused.to_string()),
        };
        let mut exposures = self.exposures().await?;
        let random = crate::random::bytes::<12>()?;
        let exposed = exposures.expose(port, asked.token.as_deref(), asked.name, &runtime, || {
            random
        });
        let token = match exposed {
            Ok(token) => token,
            Err(refused) => return error(409, "PORT_ALREADY_EXPOSED", &refused.to_string()),
        };
        exposures.remember_hostname(port, &asked.hostname);
        self.save(&exposures).await?;
        let url = preview::preview_url(port, id, &token, &asked.hostname).unwrap_or_default();
        Response::from_json(&serde_json::json!({"url": url, "port": port, "token": token}))
    }

    /// `POST /unexpose {port}`.
    async fn unexpose(&self, mut request: Request) -> Result<Response> {
        let asked: serde_json::Value = request.json().await.unwrap_or_default();
        let mut exposures = self.exposures().await?;
        if let Some(port) = asked["port"].as_u64().and_then(|p| u16::try_from(p).ok()) {
            exposures.unexpose(port);
        }
        self.save(&exposures).await?;
        Response::from_json(&serde_json::json!({"success": true}))
    }

    /// `GET /exposed[?hostname=H]` → `{ports: [{url, port, status}]}`: each URL on `H`, or
    /// on the host its expose named.
    async fn exposed(&self, id: &str, request: Request) -> Result<Response> {
        let url = request.url()?;
        let asked = url
            .query_pairs()
            .find(|(key, _)| key == "hostname")
            .map(|(_, value)| value.to_string())
            .filter(|hostname| !hostname.is_empty());
        let runtime: Option<String> = self.state.storage().get("runtimeId").await?;
        let exposures = self.exposures().await?;
        let ports: Vec<serde_json::Value> = exposures
            .ports(runtime.as_deref())
            .map(|(port, token, active)| {
                let hostname = asked
                    .as_deref()
                    .or(exposures.hostname(port))
                    .unwrap_or_default();
                serde_json::json!({
                    "url": preview::preview_url(port, id, token, hostname).unwrap_or_default(),
                    "port": port,
                    "status": if active { "active" } else { "stale" },
                })
            })
            .collect();
        Response::from_json(&serde_json::json!({"ports": ports}))
    }
}

/// Starts `container` with internet access and `env`. Through `js_sys`: the `worker`
/// crate's `ContainerStartupOptions` (0.8) hands the runtime a wrapper object whose
/// `env` and `enableInternet` it does not read, so the container started without them.
fn start(container: &Container, env: &[(&str, String)]) -> Result<()> {
    let vars = Object::new();
    for (name, value) in env {
        Reflect::set(&vars, &JsValue::from_str(name), &JsValue::from_str(value))?;
    }
    let options = Object::new();
    Reflect::set(
        &options,
        &JsValue::from_str("enableInternet"),
        &JsValue::TRUE,
    )?;
    Reflect::set(&options, &JsValue::from_str("env"), &vars)?;
    let start: Function = Reflect::get(container.as_ref(), &JsValue::from_str("start"))?
        .dyn_into()
        .map_err(|_| worker::Error::RustError("container.start is not available".into()))?;
    start.call1(container.as_ref(), &options)?;
    Ok(())
}

fn refusal(admission: Admission) -> Result<Response> {
    let (status, body) = admission.refusal().unwrap_or((500, "{}"));
    let mut response = Response::ok(body)?.with_status(status);
    response
        .headers_mut()
        .set("content-type", "application/json")?;
    Ok(response)
}

fn now_ms() -> i64 {
    i64::try_from(Date::now().as_millis()).unwrap_or(i64::MAX)
}
