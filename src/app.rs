//! The running service: validated configuration in, listeners bound, signals handled.
//!
//! Start-up order (linkerd's rule: nothing is bound before everything is validated):
//! configuration → reference data → TLS material → bind every listener → serve. A change of
//! any file the configuration names, or SIGHUP, reloads (`reload`: all or nothing; what only a
//! restart applies is refused, not half-applied); SIGTERM and SIGINT stop accepting, drain,
//! and exit 0.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper::Request;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::admin::{self, AdminState};
use crate::api::{self, ApiState};
use crate::config::Config;
use crate::evidence::{Evidence, PublicKey, SigningKey};
use crate::forward_auth::{self, ForwardAuthState};
use crate::gateway::GatewayState;
use crate::server::{self, Handler, NewConnection, ServerCertificate, SharedState, TlsFiles};
use crate::service::{CheckService, ReferenceData};
use crate::sites::Sites;

mod files;
mod refresh;

pub use files::watched_files;
use files::{take_signals, wait_for_signals, watcher_for};
use refresh::{refresh_registers, refresh_trust};

/// How often the rate-limit tables (requests per source, logins per source and per user name)
/// forget keys that are back to full quota (governor keeps them otherwise: docs/stack.md; the
/// tables are also bounded in size, `server::limiter`).
const RATE_LIMIT_SWEEP: Duration = Duration::from_secs(60);

/// A running service: its bound addresses, and a handle to stop it.
pub struct Running {
    pub api: Option<SocketAddr>,
    /// The forward-auth listener, when configured.
    pub forward_auth: Option<SocketAddr>,
    /// The gRPC external authorisation listener, when configured.
    pub ext_authz: Option<SocketAddr>,
    /// The first gateway listener (the `[gateway]` one).
    pub gateway: Option<SocketAddr>,
    /// Every gateway listener, in configuration order of their first site.
    pub gateways: Vec<SocketAddr>,
    /// The sandbox echo upstream, when configured.
    pub echo: Option<SocketAddr>,
    pub admin: Option<SocketAddr>,
    pub service: Arc<CheckService>,
    /// The check endpoint's state, whose credentials and rate limit a reload replaces.
    pub api_state: Option<Arc<ApiState>>,
    /// What else a reload replaces.
    reloadable: Reloadable,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting, drains, and returns when every listener is done.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Why the keys of `[evidence]` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceConfigError {
    #[error("signing_key {}: {source}", path.display())]
    SigningKey {
        path: PathBuf,
        #[source]
        source: crate::evidence::KeyError,
    },
    #[error("previous_keys {}: {source}", path.display())]
    PreviousKey {
        path: PathBuf,
        #[source]
        source: crate::evidence::KeyError,
    },
    #[error("previous_keys {}: retired `{retired}` is not an RFC 3339 time ({source})", path.display())]
    RetiredNotATime {
        path: PathBuf,
        retired: String,
        #[source]
        source: time::error::Parse,
    },
    #[error("previous_keys {}: retired `{retired}` is in the future: a previous key is one that no longer signs (until then, anything it signs would be accepted)", path.display())]
    RetiredInTheFuture { path: PathBuf, retired: String },
    #[error("previous_keys {}: this is the signing key's public key; a key cannot sign and be retired", path.display())]
    SigningKeyRetired { path: PathBuf },
    #[error("previous_keys {}: the same key is listed twice", path.display())]
    ListedTwice { path: PathBuf },
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Data(#[from] crate::service::LoadError),
    #[error("{what} {path}: {message}")]
    Tls {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("gateway: {0}")]
    Gateway(String),
    #[error("evidence: {0}")]
    Evidence(#[from] EvidenceConfigError),
    #[error("site `{site}`: {message}")]
    Site { site: String, message: String },
    #[error("register fetch: {0}")]
    RegisterFetch(String),
    #[error("revocation: {0}")]
    Revocation(String),
    #[error("sandbox responder: {0}")]
    Sandbox(String),
    #[error("{0}")]
    SharedState(String),
    #[error("cannot listen on {addr} ({what}): {error}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// Logs each fail-closed default that `[danger]` relaxes, once at the start.
fn warn_of_relaxations(config: &Config) {
    for relaxation in config.danger.enabled() {
        tracing::warn!(
            setting = relaxation,
            "fail-closed default relaxed by configuration"
        );
    }
}

/// Loads everything and binds every listener of `config`; serving runs on spawned tasks.
pub async fn start(config: Config) -> Result<Running, StartError> {
    warn_of_relaxations(&config);
    let fetcher = fetcher(&config);
    fetch_missing_registers(&config, &fetcher).await?;
    let service = Arc::new(check_service(&config, &fetcher)?);

    // The sandbox echo upstream listens on an ephemeral loopback port, bound first so that
    // the gateway's state can name it.
    let echo = config.sites().into_iter().any(|g| g.upstream_is_echo());
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let echo_listener = bind_if("sandbox echo upstream", echo.then_some(loopback)).await?;
    let echo_addr = echo_listener.as_ref().and_then(|l| l.local_addr().ok());
    // Every file every face needs (TLS keys, the upstream CA, the sandbox PKI) is loaded
    // here, before any public port is bound.
    let shared_state = shared_state(&config)?;
    if let Some(shared) = &shared_state {
        // Connected before any port is bound: a start is not a window of fallbacks.
        let _ = shared.connect().await;
    }
    let faces = build_faces(&config, service.clone(), echo_addr, shared_state.as_ref())?;

    // Bind everything before serving anything.
    let api_listener = bind_if("api", config.api.as_ref().map(|a| a.listen)).await?;
    let mut gateway_listeners = Vec::new();
    for (listen, tls) in faces.gateway_listeners {
        gateway_listeners.push((bind("gateway", listen).await?, tls, listen));
    }
    let admin_listener = bind_if("admin", config.admin.as_ref().map(|a| a.listen)).await?;
    let ext_authz_listener =
        bind_if("ext-authz", config.ext_authz.as_ref().map(|e| e.listen)).await?;
    let forward_auth_listener = bind_if(
        "forward-auth",
        config.forward_auth.as_ref().map(|f| f.listen),
    )
    .await?;

    let (shutdown, shutdown_rx) = watch::channel(false);
    let serving = Serving::new(&config, shutdown_rx);
    let sites = Arc::new(ArcSwap::new(faces.sites));
    let reloadable = Reloadable {
        restart_only: restart_only(&config),
        echo: echo_addr,
        evidence: faces.evidence.clone(),
        shared_state: shared_state.clone(),
        api_certificate: faces.api_certificate,
        site_certificates: faces.site_certificates,
        sites: Arc::clone(&sites),
    };
    let mut running = Running::new(service.clone(), faces.api.clone(), reloadable, shutdown);
    // Announced and served in this order.
    let first = [
        api_listener
            .zip(faces.api)
            .map(|(listener, state)| Listener::api(listener, faces.api_tls, state)),
        echo_listener.map(Listener::echo),
    ];
    let gateways = gateway_listeners
        .into_iter()
        .map(|(listener, tls, listen)| {
            Some(Listener::gateway(listener, tls, Arc::clone(&sites), listen))
        });
    let last = [
        forward_auth_listener
            .zip(faces.forward_auth)
            .map(|(listener, state)| Listener::forward_auth(listener, state, Arc::clone(&sites))),
        admin_listener
            .zip(faces.admin)
            .map(|(listener, state)| Listener::admin(listener, state)),
    ];
    for listener in first.into_iter().chain(gateways).chain(last).flatten() {
        running.serve(listener, &serving);
    }
    if let (Some(listener), Some(ext)) = (ext_authz_listener, &config.ext_authz) {
        running.serve_ext_authz(listener, faces.ext_authz_tls, ext, &sites, &serving);
    }
    running.spawn_refreshes(&config, fetcher, service, &serving);
    Ok(running)
}

impl Running {
    /// Starts the register and trusted-list refreshes. Both run always and read the sources
    /// in force at each round, so that a reload that adds, changes or removes a fetched
    /// register or a LOTL is followed.
    fn spawn_refreshes(
        &mut self,
        config: &Config,
        fetcher: crate::fetch::Fetcher,
        service: Arc<CheckService>,
        serving: &Serving,
    ) {
        let refresher = crate::trust::refresh::Refresher::new(config.trust_fetch());
        let shutdown = &serving.shutdown;
        self.tasks.extend([
            tokio::spawn(refresh_registers(
                fetcher,
                service.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(refresh_trust(refresher, service, shutdown.clone())),
        ]);
    }

    /// Serves the gRPC external authoriser on `listener`, deciding with the sites in force.
    fn serve_ext_authz(
        &mut self,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
        ext: &crate::ext_authz::ExtAuthzConfig,
        sites: &Arc<ArcSwap<Sites>>,
        serving: &Serving,
    ) {
        self.ext_authz = listener.local_addr().ok();
        tracing::info!(addr = %display_addr(self.ext_authz), "ext_authz (gRPC) listening");
        let sites = Arc::clone(sites);
        self.tasks.push(tokio::spawn(crate::ext_authz::serve(
            listener,
            tls,
            Arc::new(ext.clone()),
            move || sites.load_full(),
            serving.shutdown.clone(),
        )));
    }
}

/// The fetcher of registers (and the FCA adapter's client), as `[revocation]` allows.
fn fetcher(config: &Config) -> crate::fetch::Fetcher {
    crate::fetch::Fetcher::new(
        config.revocation.allow_destinations,
        config.revocation.connect_timeout(),
    )
}

/// Fetches every fetched register file that is not there yet, before anything is loaded:
/// serving without it would refuse every PSP of its registers.
async fn fetch_missing_registers(
    config: &Config,
    fetcher: &crate::fetch::Fetcher,
) -> Result<(), StartError> {
    for file in config.registers.fetched_files() {
        if config.base_dir.join(&file.path).exists() {
            continue;
        }
        tracing::info!(path = %file.path.display(), "register file missing: fetching it before start");
        let done = crate::register::fetch_eba(
            fetcher,
            &config.registers,
            file,
            &config.base_dir,
            config.registers.fetch_timeout(),
        )
        .await
        .map_err(|e| StartError::RegisterFetch(e.to_string()))?;
        tracing::info!(path = %done.path.display(), entities = done.entities, "register fetched");
    }
    Ok(())
}

/// The check service: the reference data loaded, revocation, the `[results]` cache, the FCA
/// adapter.
fn check_service(
    config: &Config,
    fetcher: &crate::fetch::Fetcher,
) -> Result<CheckService, StartError> {
    let data = ReferenceData::load(&config.data_sources(), 1, time::OffsetDateTime::now_utc())?;
    record_register_history(&config.data_sources());
    tracing::info!(
        trust_sources = data.trust.sources().len(),
        trusted_issuers = data.trust.issuers().len(),
        registers = data.registers.registers().len(),
        "reference data loaded"
    );
    let revocation = crate::revocation::RevocationChecker::new(&config.revocation)
        .map_err(|e| StartError::Revocation(e.to_string()))?;
    let mut service = CheckService::new(
        data,
        crate::service::Revocation::Fetch(revocation),
        config.results.ttl(),
        config.results.cache_entries,
    );
    if let Some(fca) =
        fca_register(config, fetcher).map_err(|e| StartError::RegisterFetch(e.to_string()))?
    {
        service = service.with_fca(fca);
    }
    Ok(service)
}

/// Which listener a [`Listener`] is, for [`Running`]'s addresses.
#[derive(Clone, Copy)]
enum Face {
    Api,
    ForwardAuth,
    Echo,
    Gateway,
    Admin,
}

/// A bound listener, announced, ready to serve: its socket, its TLS, the handler of each of
/// its connections, and the sweep of its rate-limit tables, if it has any.
struct Listener {
    face: Face,
    addr: Option<SocketAddr>,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    new_connection: NewConnection,
    sweep: Option<Box<dyn Fn() + Send>>,
}

/// What every listener is served with.
struct Serving {
    limits: server::Limits,
    link_base: Arc<str>,
    shutdown: watch::Receiver<bool>,
}

impl Serving {
    fn new(config: &Config, shutdown: watch::Receiver<bool>) -> Serving {
        Serving {
            limits: config.limits.resolve(),
            // Requests refused before any face reads them link their error codes here too.
            link_base: config.checks.error_link_base.as_str().into(),
            shutdown,
        }
    }
}

impl Listener {
    /// `listener`, serving each connection with what `new_connection` makes.
    fn new(
        face: Face,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
        new_connection: NewConnection,
    ) -> Listener {
        Listener {
            face,
            addr: listener.local_addr().ok(),
            listener,
            tls,
            new_connection,
            sweep: None,
        }
    }

    /// The check endpoint.
    fn api(listener: TcpListener, tls: Option<TlsAcceptor>, state: Arc<ApiState>) -> Listener {
        let sweep_state = state.clone();
        let handler: Handler = Arc::new(move |req: Request<_>, conn| {
            let state = state.clone();
            Box::pin(async move { api::handle(state, req, conn).await })
        });
        let mut l = Listener::new(Face::Api, listener, tls, server::per_request(handler));
        l.sweep = Some(Box::new(move || {
            sweep_state.limiter.load().local().retain_recent();
            sweep_state.auth.load().retain_recent();
        }));
        tracing::info!(addr = %display_addr(l.addr), tls = l.tls.is_some(), "check endpoint listening");
        l
    }

    /// The sandbox echo upstream.
    fn echo(listener: TcpListener) -> Listener {
        let handler = crate::gateway::echo::handler();
        let l = Listener::new(Face::Echo, listener, None, server::per_request(handler));
        tracing::info!(addr = %display_addr(l.addr), "sandbox echo upstream listening");
        l
    }

    /// A gateway listener bound at `listen`: each request takes the sites as they are now
    /// (a reload swaps in rebuilt ones) and goes to its connection's site.
    fn gateway(
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
        sites: Arc<ArcSwap<Sites>>,
        listen: SocketAddr,
    ) -> Listener {
        let sweep_sites = Arc::clone(&sites);
        let announce = sites.load_full();
        let new_connection = crate::sites::new_connection(listen, move || sites.load_full());
        let mut l = Listener::new(Face::Gateway, listener, tls, new_connection);
        // Every site is swept once: by the listener of the first site's.
        let first_listener = announce.all().iter().find_map(|s| s.listen());
        if first_listener == Some(listen) {
            l.sweep = Some(Box::new(move || sweep_sites.load().sweep()));
        }
        for site in announce.all().iter().filter(|s| s.listen() == Some(listen)) {
            tracing::info!(
                addr = %display_addr(l.addr),
                site = site.name(),
                server_names = ?site.server_names(),
                jurisdiction = %site.jurisdiction(),
                upstream = site.upstream_display(),
                "gateway listening"
            );
        }
        l
    }

    /// The forward-auth listener: each request is decided by the sites as they are now.
    fn forward_auth(
        listener: TcpListener,
        state: Arc<ForwardAuthState>,
        sites: Arc<ArcSwap<Sites>>,
    ) -> Listener {
        let handler: Handler = Arc::new(move |req: Request<_>, conn| {
            let (state, sites) = (Arc::clone(&state), sites.load_full());
            Box::pin(async move { forward_auth::handle(&state, &sites, req, &conn).await })
        });
        let l = Listener::new(
            Face::ForwardAuth,
            listener,
            None,
            server::per_request(handler),
        );
        tracing::info!(addr = %display_addr(l.addr), "forward-auth listening");
        l
    }

    /// The admin listener.
    fn admin(listener: TcpListener, state: Arc<AdminState>) -> Listener {
        let handler: Handler = Arc::new(move |req: Request<_>, _conn| {
            let state = state.clone();
            Box::pin(async move { admin::handle(state, req).await })
        });
        let l = Listener::new(Face::Admin, listener, None, server::per_request(handler));
        tracing::info!(addr = %display_addr(l.addr), "admin listener listening");
        l
    }
}

impl Running {
    /// A service with nothing served yet.
    fn new(
        service: Arc<CheckService>,
        api_state: Option<Arc<ApiState>>,
        reloadable: Reloadable,
        shutdown: watch::Sender<bool>,
    ) -> Running {
        Running {
            api: None,
            forward_auth: None,
            ext_authz: None,
            gateway: None,
            gateways: Vec::new(),
            echo: None,
            admin: None,
            service,
            api_state,
            reloadable,
            shutdown,
            tasks: Vec::new(),
        }
    }

    /// Serves `listener` (and sweeps its rate-limit tables) until shutdown.
    fn serve(&mut self, listener: Listener, serving: &Serving) {
        let Listener {
            face,
            addr,
            listener,
            tls,
            new_connection,
            sweep,
        } = listener;
        if let (Face::Gateway, Some(addr)) = (face, addr) {
            self.gateways.push(addr);
        }
        let slot = match face {
            Face::Api => &mut self.api,
            Face::ForwardAuth => &mut self.forward_auth,
            Face::Echo => &mut self.echo,
            Face::Gateway => &mut self.gateway,
            Face::Admin => &mut self.admin,
        };
        if slot.is_none() {
            *slot = addr;
        }
        if let Some(sweep) = sweep {
            self.tasks
                .push(sweep_rate_limits(serving.shutdown.clone(), sweep));
        }
        self.tasks.push(tokio::spawn(server::serve_connections(
            listener,
            tls,
            serving.limits,
            serving.link_base.clone(),
            new_connection,
            serving.shutdown.clone(),
        )));
    }
}

/// Runs `sweep` every [`RATE_LIMIT_SWEEP`] until shutdown.
fn sweep_rate_limits(
    mut shutdown: watch::Receiver<bool>,
    sweep: impl Fn() + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RATE_LIMIT_SWEEP);
        loop {
            tokio::select! {
                _ = tick.tick() => sweep(),
                _ = shutdown.changed() => return,
            }
        }
    })
}

/// Why the `[registers.fca]` adapter cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum FcaRegisterError {
    /// The settings do not give a usable configuration (credentials, …).
    #[error(transparent)]
    Settings(#[from] crate::register::FcaSettingsError),
    /// The adapter refuses the configuration.
    #[error("[registers.fca]: {0}")]
    Adapter(crate::register::FcaConfigError),
}

/// The UK FCA register adapter `[registers.fca]` configures, if any.
pub fn fca_register(
    config: &Config,
    fetcher: &crate::fetch::Fetcher,
) -> Result<Option<crate::register::FcaRegister>, FcaRegisterError> {
    let Some(settings) = &config.registers.fca else {
        return Ok(None);
    };
    let fca_config = crate::register::FcaConfig::from_settings(settings, &config.base_dir)?;
    crate::register::FcaRegister::new(fca_config, fetcher.clone())
        .map(Some)
        .map_err(FcaRegisterError::Adapter)
}

/// Records the register files now in force in the register history, when one is configured
/// (`[registers] history_dir`). A failure is logged: audits of this period will say that no
/// snapshot covers it.
fn record_register_history(sources: &crate::service::DataSources) {
    let Some(history) = crate::register::History::of(&sources.registers, &sources.base_dir) else {
        return;
    };
    if let Err(e) = history.record(
        &sources.registers,
        &sources.base_dir,
        time::OffsetDateTime::now_utc(),
    ) {
        tracing::error!(dir = %history.dir().display(), error = %e, "cannot record the register history");
    }
}

/// Every face's state, built before any port is bound.
pub struct Faces {
    pub api: Option<Arc<ApiState>>,
    pub api_tls: Option<TlsAcceptor>,
    /// The check endpoint's certificate, which a reload replaces.
    pub api_certificate: Option<Arc<ServerCertificate>>,
    /// Every site (none without `[gateway]` or `[[sites]]`).
    pub sites: Arc<Sites>,
    /// Each gateway listener's address and TLS, in configuration order of their first site.
    pub gateway_listeners: Vec<(SocketAddr, Option<TlsAcceptor>)>,
    /// Each site's certificate by site name, which a reload replaces.
    pub site_certificates: Vec<(String, Arc<ServerCertificate>)>,
    pub forward_auth: Option<Arc<ForwardAuthState>>,
    /// The gRPC external authorisation listener's TLS, when `[ext_authz.tls]` is set.
    pub ext_authz_tls: Option<TlsAcceptor>,
    pub admin: Option<Arc<AdminState>>,
    /// The evidence keys, when `[evidence]` is configured.
    pub evidence: Option<Arc<Evidence>>,
}

impl Faces {
    /// The first site (the `[gateway]` one), if there is one.
    pub fn gateway(&self) -> Option<Arc<GatewayState>> {
        self.sites.all().first().cloned()
    }
}

/// What a reload replaces besides the reference data and the endpoint's credentials.
#[derive(Clone)]
struct Reloadable {
    /// The settings a reload cannot apply, as the service started with them.
    restart_only: Vec<(&'static str, String)>,
    /// The sandbox echo upstream's address, for a rebuilt gateway.
    echo: Option<SocketAddr>,
    /// The evidence keys (restart only): a rebuilt gateway signs with them.
    evidence: Option<Arc<Evidence>>,
    /// `[shared_state]` (restart only): a rebuilt gateway counts `gateway.rate_limit` in it.
    shared_state: Option<Arc<SharedState>>,
    api_certificate: Option<Arc<ServerCertificate>>,
    site_certificates: Vec<(String, Arc<ServerCertificate>)>,
    sites: Arc<ArcSwap<Sites>>,
}

/// The settings a reload cannot apply (listeners, their TLS mode, limits, caches, revocation,
/// the sandbox, the audit file, `[danger]`): a reload whose configuration changes one of them
/// is refused whole, naming them, so that nothing is believed applied that is not.
fn restart_only(config: &Config) -> Vec<(&'static str, String)> {
    let api = config.api.as_ref();
    let sites = config.sites();
    vec![
        ("api.listen", format!("{:?}", api.map(|a| a.listen))),
        ("api.tls", format!("{:?}", api.map(|a| a.tls.is_some()))),
        (
            "api.tls.session_resumption",
            format!(
                "{:?}",
                api.and_then(|a| a.tls.as_ref())
                    .map(|t| t.session_resumption)
            ),
        ),
        (
            "api.trusted_proxies",
            format!("{:?}", api.map(|a| &a.trusted_proxies)),
        ),
        (
            "api.max_eidas_header_bytes",
            format!("{:?}", api.map(|a| a.max_eidas_header_bytes)),
        ),
        ("results", format!("{:?}", config.results)),
        ("shared_state", format!("{:?}", config.shared_state)),
        ("checks", format!("{:?}", config.checks)),
        (
            "gateway.listen or a site's name, listen and server names",
            format!(
                "{:?}",
                sites
                    .iter()
                    .map(|g| (&g.name, g.listen, &g.server_names, g.default))
                    .collect::<Vec<_>>()
            ),
        ),
        (
            "gateway.tls (on or off) of the gateway or a site",
            format!(
                "{:?}",
                sites.iter().map(|g| g.tls.is_some()).collect::<Vec<_>>()
            ),
        ),
        (
            "gateway.tls.session_resumption of the gateway or a site",
            format!(
                "{:?}",
                sites
                    .iter()
                    .map(|g| g.tls.as_ref().map(|t| t.session_resumption))
                    .collect::<Vec<_>>()
            ),
        ),
        (
            "gateway.client_certificate of the gateway or a site",
            format!(
                "{:?}",
                sites
                    .iter()
                    .map(|g| g.client_certificate)
                    .collect::<Vec<_>>()
            ),
        ),
        ("admin", format!("{:?}", config.admin)),
        ("forward_auth", format!("{:?}", config.forward_auth)),
        ("ext_authz", format!("{:?}", config.ext_authz)),
        ("limits", format!("{:?}", config.limits)),
        ("revocation", format!("{:?}", config.revocation)),
        (
            "trust fetch settings",
            format!("{:?}", config.trust_fetch()),
        ),
        ("sandbox", format!("{:?}", config.sandbox)),
        ("audit", format!("{:?}", config.audit)),
        ("evidence", format!("{:?}", config.evidence)),
        ("danger", format!("{:?}", config.danger)),
    ]
}

/// The gRPC authoriser's TLS, when `[ext_authz.tls]` is set.
fn ext_authz_tls(config: &Config) -> Result<Option<TlsAcceptor>, StartError> {
    let Some(tls) = config.ext_authz.as_ref().and_then(|e| e.tls.as_ref()) else {
        return Ok(None);
    };
    let resolved = crate::ext_authz::ExtAuthzTls {
        cert: config.resolve(&tls.cert),
        key: config.resolve(&tls.key),
        client_ca: tls.client_ca.as_deref().map(|p| config.resolve(p)),
    };
    crate::ext_authz::tls_acceptor(&resolved)
        .map(Some)
        .map_err(|e| StartError::Gateway(format!("ext_authz.tls: {e}")))
}

/// The admin listener's state: the sandbox responder (the sandbox PKI) when the sandbox is
/// on, the evidence keys, the shared state.
fn admin_state(
    config: &Config,
    service: Arc<CheckService>,
    evidence: &Option<Arc<Evidence>>,
    shared_state: Option<&Arc<SharedState>>,
) -> Result<Arc<AdminState>, StartError> {
    let admin = AdminState::new(
        config
            .sandbox
            .enabled
            .then(|| config.resolve(&config.sandbox.certs))
            .as_deref(),
        service,
    )
    .map_err(|e| StartError::Sandbox(e.to_string()))?
    .with_evidence(evidence.clone());
    Ok(Arc::new(match shared_state {
        Some(shared) => admin.with_shared_state(shared.clone()),
        None => admin,
    }))
}

/// Builds every face `config` enables: TLS configurations (certificate and key parsed and
/// matched), the gateway's upstream client (its CA), the admin listener's sandbox responder
/// (the sandbox PKI). `serve` calls it before binding any public port; `config check` calls
/// it to validate the same files. `echo` is the sandbox echo upstream's address.
pub fn build_faces(
    config: &Config,
    service: Arc<CheckService>,
    echo: Option<SocketAddr>,
    shared_state: Option<&Arc<SharedState>>,
) -> Result<Faces, StartError> {
    let (api_tls, api_certificate) = match config.api.as_ref().and_then(|a| a.tls.as_ref()) {
        Some(files) => {
            let (tls, certificate) = server_tls_config(config, files, None)?;
            (Some(TlsAcceptor::from(Arc::new(tls))), Some(certificate))
        }
        None => (None, None),
    };
    let evidence = evidence(config)?;
    let api = config.api.as_ref().map(|api| {
        let state = ApiState::new(
            api,
            config.checks.valid_jurisdictions(),
            config.checks.error_link_base.clone(),
            service.clone(),
        )
        .with_audit(config.registers.clone(), config.base_dir.clone())
        .with_evidence(evidence.clone());
        Arc::new(match shared_state {
            Some(shared) => state.with_shared_state(api, shared.clone()),
            None => state,
        })
    });
    let (gateway_listeners, site_certificates) = gateway_tls(config)?;
    let ext_authz_tls = ext_authz_tls(config)?;
    let forward_auth = match &config.forward_auth {
        Some(f) => Some(Arc::new(
            ForwardAuthState::new(f, config.checks.error_link_base.clone())
                .map_err(|e| StartError::Gateway(e.to_string()))?,
        )),
        None => None,
    };
    let sites = Arc::new(Sites::new(
        site_states(
            config,
            service.clone(),
            echo,
            evidence.clone(),
            shared_state,
        )?
        .into_iter()
        .map(Arc::new)
        .collect(),
    ));
    let admin = match &config.admin {
        Some(_) => Some(admin_state(config, service, &evidence, shared_state)?),
        None => None,
    };
    Ok(Faces {
        api,
        api_tls,
        api_certificate,
        sites,
        gateway_listeners,
        site_certificates,
        forward_auth,
        ext_authz_tls,
        admin,
        evidence,
    })
}

/// The evidence keys of `[evidence]`: the signing key (PKCS#8, P-256 or Ed25519) and the
/// earlier public keys still published; an unreadable or unsupported key stops the start.
pub fn evidence(config: &Config) -> Result<Option<Arc<Evidence>>, StartError> {
    let Some(e) = &config.evidence else {
        return Ok(None);
    };
    let path = config.resolve(&e.signing_key);
    let key = SigningKey::from_pem_file(&path)
        .map_err(|source| EvidenceConfigError::SigningKey { path, source })?;
    let previous = previous_keys(config, e)?;
    Ok(Some(Arc::new(Evidence::new(
        key,
        previous,
        e.forward_signature,
        config.sha256.clone(),
    ))))
}

/// The previous keys of `[evidence]`, each retired at its instant; an unreadable key, a time
/// that is not RFC 3339 or is in the future (a stolen old key could sign until then), a key
/// listed twice, or the signing key itself among them is an error naming it.
pub fn previous_keys(
    config: &Config,
    e: &crate::config::EvidenceConfig,
) -> Result<Vec<PublicKey>, EvidenceConfigError> {
    let signing = SigningKey::from_pem_file(&config.resolve(&e.signing_key))
        .map(|k| k.kid())
        .unwrap_or_default();
    let now = time::OffsetDateTime::now_utc();
    let mut keys: Vec<PublicKey> = Vec::new();
    for p in &e.previous_keys {
        let path = config.resolve(&p.path);
        let retired =
            time::OffsetDateTime::parse(&p.retired, &time::format_description::well_known::Rfc3339)
                .map_err(|source| EvidenceConfigError::RetiredNotATime {
                    path: path.clone(),
                    retired: p.retired.clone(),
                    source,
                })?;
        if retired > now {
            return Err(EvidenceConfigError::RetiredInTheFuture {
                path,
                retired: p.retired.clone(),
            });
        }
        let key =
            PublicKey::from_pem_file(&path).map_err(|source| EvidenceConfigError::PreviousKey {
                path: path.clone(),
                source,
            })?;
        if key.kid() == signing {
            return Err(EvidenceConfigError::SigningKeyRetired { path });
        }
        if keys.iter().any(|k| k.kid() == key.kid()) {
            return Err(EvidenceConfigError::ListedTwice { path });
        }
        keys.push(key.retired_at(retired.unix_timestamp()));
    }
    Ok(keys)
}

/// The connection to Redis of `[shared_state]`, when configured: the password read from its
/// file or variable now (a missing one stops the start); a Redis down at start-up does not
/// (the failure modes decide until it answers).
fn shared_state(config: &Config) -> Result<Option<Arc<SharedState>>, StartError> {
    let Some(shared) = &config.shared_state else {
        return Ok(None);
    };
    let password = shared
        .password(&config.base_dir)
        .map_err(|e| StartError::SharedState(e.to_string()))?;
    let roots = match &shared.ca_file {
        Some(file) => {
            let path = config.resolve(file);
            Some(
                crate::bounded::read_regular_file(&path, 1024 * 1024, "a CA file").map_err(
                    |e| {
                        StartError::SharedState(format!(
                            "shared_state.ca_file {}: {e}",
                            path.display()
                        ))
                    },
                )?,
            )
        }
        None => None,
    };
    let state = SharedState::new(shared, password, roots)
        .map_err(|e| StartError::SharedState(e.to_string()))?;
    tracing::info!(
        budget_ms = shared.budget_ms,
        replicas = shared.replicas,
        rate_limits = ?shared.rate_limits,
        failed_logins = ?shared.failed_logins,
        "request rate limits are counted in Redis, shared by the replicas"
    );
    Ok(Some(state))
}

/// Each gateway listener's TLS: for a listener of one site without server names, its
/// certificate as `[gateway]` always had it; for a listener that sites share, each site's
/// certificate under its server names (and the default site's for a client that names none,
/// [`server::SiteCertificates`]). Each site's certificate is also returned by site name, for
/// a reload to replace.
fn gateway_tls(config: &Config) -> Result<(GatewayListeners, SiteCertificateList), StartError> {
    let sites = config.sites();
    let mut listens: Vec<SocketAddr> = Vec::new();
    for listen in sites.iter().filter_map(|g| g.listen) {
        if !listens.contains(&listen) {
            listens.push(listen);
        }
    }
    let mut certificates = Vec::new();
    let mut listeners = Vec::new();
    for listen in listens {
        let on: Vec<_> = sites.iter().filter(|g| g.listen == Some(listen)).collect();
        let mut named = Vec::new();
        let mut default = None;
        let mut first_config = None;
        for g in &on {
            let Some(files) = &g.tls else { continue };
            let verifier = crate::gateway::tls::AcceptAnyWellFormedChain::new(
                g.client_certificate == crate::gateway::config::ClientCertificateMode::Required,
            );
            let (tls, certificate) = server_tls_config(config, files, Some(verifier))?;
            let site = g.name.as_deref().unwrap_or(crate::gateway::DEFAULT_SITE);
            certificates.push((site.to_owned(), Arc::clone(&certificate)));
            for name in &g.server_names {
                named.push((name.clone(), Arc::clone(&certificate)));
            }
            if g.default {
                default = Some(Arc::clone(&certificate));
            }
            first_config.get_or_insert(tls);
        }
        let tls = first_config.map(|mut tls| {
            if on.len() > 1 || !on[0].server_names.is_empty() {
                tls.cert_resolver = Arc::new(server::SiteCertificates::new(named, default));
            }
            TlsAcceptor::from(Arc::new(tls))
        });
        listeners.push((listen, tls));
    }
    Ok((listeners, certificates))
}

/// Each gateway listener's address and TLS.
type GatewayListeners = Vec<(SocketAddr, Option<TlsAcceptor>)>;
/// Each site's certificate, by site name.
type SiteCertificateList = Vec<(String, Arc<ServerCertificate>)>;

/// Every site `config` configures, each with its upstream client (the upstream CA read).
/// `echo` is the sandbox echo upstream's address.
fn site_states(
    config: &Config,
    service: Arc<CheckService>,
    echo: Option<SocketAddr>,
    evidence: Option<Arc<Evidence>>,
    shared_state: Option<&Arc<SharedState>>,
) -> Result<Vec<GatewayState>, StartError> {
    config
        .sites()
        .into_iter()
        .map(|g| {
            let around = crate::gateway::Surroundings {
                upstream_url: match (g.upstream.as_deref(), echo) {
                    (Some("sandbox-echo"), Some(addr)) => Some(format!("http://{addr}")),
                    (Some("sandbox-echo"), None) => Some("http://127.0.0.1:9".to_owned()),
                    (upstream, _) => upstream.map(str::to_owned),
                },
                upstream_ca: g.upstream_ca.as_deref().map(|p| config.resolve(p)),
                report_only: config.danger.gateway_report_only,
                forward_unmatched_routes: config.danger.forward_unmatched_routes,
                error_link_base: config.checks.error_link_base.clone(),
                evidence: evidence.clone(),
                shared_state: shared_state.cloned(),
            };
            GatewayState::new(g, around, service.clone()).map_err(|e| match &g.name {
                Some(site) => StartError::Site {
                    site: site.clone(),
                    message: e.to_string(),
                },
                None => StartError::Gateway(e.to_string()),
            })
        })
        .collect()
}

/// A listener's address for a log field: the address itself, or `unknown`.
fn display_addr(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "unknown".to_owned(), |a| a.to_string())
}

/// Binds `addr`, when there is one.
async fn bind_if(
    what: &'static str,
    addr: Option<SocketAddr>,
) -> Result<Option<TcpListener>, StartError> {
    match addr {
        Some(addr) => bind(what, addr).await.map(Some),
        None => Ok(None),
    }
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| StartError::Bind { what, addr, error })
}

/// A listener's rustls configuration: TLS 1.2 and 1.3, ALPN h2 and http/1.1, an optional
/// client-certificate verifier, and its certificate and key from PEM files, matched, behind a
/// [`ServerCertificate`] that a reload replaces.
pub(crate) fn server_tls_config(
    config: &Config,
    files: &TlsFiles,
    client_verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<(rustls::ServerConfig, Arc<ServerCertificate>), StartError> {
    let certificate = Arc::new(ServerCertificate::new(load_tls_files(config, files)?));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| StartError::Tls {
            what: "certificate",
            path: config.resolve(&files.cert),
            message: e.to_string(),
        })?;
    let builder = match client_verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut server_config = builder.with_cert_resolver(certificate.clone());
    server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    if !files.session_resumption {
        server_config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        server_config.send_tls13_tickets = 0;
    }
    Ok((server_config, certificate))
}

/// A listener's certificate and key, read and matched.
fn load_tls_files(
    config: &Config,
    files: &TlsFiles,
) -> Result<rustls::sign::CertifiedKey, StartError> {
    server::load_certified_key(&config.resolve(&files.cert), &config.resolve(&files.key)).map_err(
        |e| StartError::Tls {
            what: e.what,
            path: e.path,
            message: e.message,
        },
    )
}

/// Runs the service from a configuration file until SIGTERM or SIGINT.
pub async fn run(config_path: &Path, config: Config) -> Result<(), StartError> {
    // The watch is in place before the listeners are, so that a change made once the service
    // answers is never missed (one made during the start reloads right after it).
    let (changed_tx, changed) = tokio::sync::mpsc::channel::<()>(1);
    let watcher = watcher_for(&watched_files(config_path, &config), &changed_tx);
    let signals = take_signals();
    let running = start(config).await?;
    wait_for_signals(
        config_path,
        &running,
        (changed_tx, changed),
        watcher,
        signals,
    )
    .await;
    tracing::info!("shutting down: draining connections");
    running.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// Re-reads the configuration file and applies it, all or nothing: the reference data, the
/// check endpoint's credentials and rate limit, the gateway (routes, access rule, identity
/// headers, upstream), the listeners' certificates (new handshakes present the new one; open
/// connections keep theirs) and the FCA adapter. Parsing and loading run on a blocking thread.
/// A configuration that changes a setting only a restart applies is refused whole. On any
/// error everything stays as it was; the failure is logged, counted
/// (`psp_gateway_reloads_total`) and shown in `/readyz`. On success, the files the new
/// configuration names, to watch.
pub async fn reload(config_path: &Path, running: &Running) -> Option<Vec<PathBuf>> {
    let path = config_path.to_owned();
    let service = running.service.clone();
    let api = running.api_state.clone();
    let parts = running.reloadable.clone();
    let result = tokio::task::spawn_blocking(move || reload_blocking(&path, &service, api, &parts))
        .await
        .unwrap_or_else(|e| Err(ReloadError::Task(e)));
    crate::telemetry::metrics::Metrics::outcome(
        &crate::telemetry::metrics::metrics().reloads,
        "reference-data",
        result.is_ok(),
    );
    match result {
        Ok((generation, files)) => {
            tracing::info!(generation, "configuration and reference data reloaded");
            Some(files)
        }
        Err(e) => {
            // Without the configuration's own text: a secret written in the wrong place is
            // quoted by the parser (docs/attacks/proxy-and-data.md O2).
            tracing::error!(
                error = %crate::admin::without_values(&e.to_string()),
                "reload failed; everything stays as it was"
            );
            None
        }
    }
}

/// Why a reload replaced nothing.
#[derive(Debug, thiserror::Error)]
enum ReloadError {
    /// The configuration file does not load.
    #[error("configuration invalid: {0}")]
    Config(crate::config::ConfigError),
    /// Settings only a restart applies differ from those in force (their names).
    #[error("{}, which only a restart applies; nothing was reloaded", .0.join(", "))]
    RestartOnly(Vec<String>),
    /// A TLS key, the gateway or the FCA adapter cannot be built from the new configuration.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The FCA adapter cannot be built from the new configuration.
    #[error(transparent)]
    Fca(#[from] FcaRegisterError),
    /// The reference data does not load.
    #[error(transparent)]
    Data(#[from] crate::service::LoadError),
    /// The blocking reload task panicked or was cancelled.
    #[error("the reload did not finish: {0}")]
    Task(tokio::task::JoinError),
}

fn reload_blocking(
    config_path: &Path,
    service: &Arc<CheckService>,
    api: Option<Arc<ApiState>>,
    parts: &Reloadable,
) -> Result<(u64, Vec<PathBuf>), ReloadError> {
    let fail = |e: ReloadError| {
        service.record_reload_failure(&e.to_string());
        e
    };
    let config = Config::load(config_path).map_err(|e| fail(ReloadError::Config(e)))?;
    let changed: Vec<String> = parts
        .restart_only
        .iter()
        .zip(restart_only(&config))
        .filter(|(was, now)| **was != *now)
        .map(|(was, _)| was.0.to_string())
        .collect();
    if !changed.is_empty() {
        return Err(fail(ReloadError::RestartOnly(changed)));
    }
    // Everything that can fail is built before anything is replaced.
    let tls_key = |files: Option<&TlsFiles>| match files {
        Some(files) => load_tls_files(&config, files)
            .map(Some)
            .map_err(|e| fail(e.into())),
        None => Ok(None),
    };
    let api_key = tls_key(config.api.as_ref().and_then(|a| a.tls.as_ref()))?;
    let mut site_keys = Vec::new();
    for g in config.sites() {
        let site = g.name.as_deref().unwrap_or(crate::gateway::DEFAULT_SITE);
        site_keys.push((site.to_owned(), tls_key(g.tls.as_ref())?));
    }
    // The rebuilt sites keep the clients' counts (when a site's rate limit is unchanged) and
    // the parsed client chains.
    let sites = Sites::new(
        site_states(
            &config,
            service.clone(),
            parts.echo,
            parts.evidence.clone(),
            parts.shared_state.as_ref(),
        )
        .map_err(|e| fail(e.into()))?
        .into_iter()
        .map(Arc::new)
        .collect(),
    )
    .keeping_state_of(&parts.sites.load());
    let fca = fca_register(&config, &fetcher(&config)).map_err(|e| fail(e.into()))?;
    let generation = service.reload(&config.data_sources())?;
    // The data is in: the rest cannot fail.
    if let (Some(state), Some(api_config)) = (api, &config.api) {
        state.reload(api_config);
    }
    if let (Some(certificate), Some(key)) = (&parts.api_certificate, api_key) {
        certificate.replace(key);
    }
    for (site, key) in site_keys {
        let certificate = parts.site_certificates.iter().find(|(s, _)| *s == site);
        if let (Some((_, certificate)), Some(key)) = (certificate, key) {
            certificate.replace(key);
        }
    }
    parts.sites.store(Arc::new(sites));
    if let Some(evidence) = &parts.evidence {
        evidence.set_config_sha256(config.sha256.clone());
    }
    service.replace_fca(fca);
    record_register_history(&config.data_sources());
    Ok((generation, watched_files(config_path, &config)))
}
