//! The sites of one deployment: a bank group's APIs, each with its own jurisdiction, route
//! rule, dialect, identity headers and upstream (a [`GatewayState`] each), and where each is
//! reached. A site has its own listener, or shares one with others and is chosen by the TLS
//! server name (SNI) its client asked for; a plain listener behind a load balancer chooses by
//! `Host`. The external authorisers choose among all sites by name, server name or host.
//!
//! One [`Sites`] is built from the whole configuration and swapped whole by a reload, so a
//! request never sees one site from before a reload and another from after it.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use hyper::{Request, Response};

use crate::gateway::{Connection, GatewayState, host_of};
use crate::server::{Body, BodyError, ConnHandler, ConnInfo, NewConnection};

/// Every site of the deployment, in configuration order.
pub struct Sites {
    sites: Vec<Arc<GatewayState>>,
}

/// Why a connection's request has no site to go to: the server name or host it named (none
/// when it named nothing), answered 421 by `fallback` (the listener's first site, whose
/// dialect the answer is in).
pub struct NoSite<'a> {
    pub fallback: &'a Arc<GatewayState>,
    pub named: Option<String>,
}

impl Sites {
    /// The sites, in configuration order.
    pub fn new(sites: Vec<Arc<GatewayState>>) -> Sites {
        Sites { sites }
    }

    /// Every site.
    pub fn all(&self) -> &[Arc<GatewayState>] {
        &self.sites
    }

    /// The base of the error links of a refusal no site made (`checks.error_link_base`,
    /// which every site shares): the first site's, or the default without sites.
    pub fn error_link_base(&self) -> &str {
        self.sites
            .first()
            .map_or("/docs/errors#", |site| site.error_link_base())
    }

    /// The site called `name`.
    pub fn named(&self, name: &str) -> Option<&Arc<GatewayState>> {
        self.sites.iter().find(|s| s.name() == name)
    }

    /// The site with the TLS server name `name` (any case), on any listener.
    pub fn by_server_name(&self, name: &str) -> Option<&Arc<GatewayState>> {
        let name = name.to_ascii_lowercase();
        self.sites.iter().find(|s| s.server_names().contains(&name))
    }

    /// The site that names `host` (a `Host` value or authority: its server names and hosts),
    /// on any listener. A site that names no hosts is not chosen by host.
    pub fn by_host(&self, host: &str) -> Option<&Arc<GatewayState>> {
        let host = host_of(host);
        self.sites.iter().find(|s| s.host_names().contains(&host))
    }

    /// The site a request on a connection of the listener `listen` goes to:
    /// - the listener's only site, when it names no server names (the `[gateway]` of old);
    /// - over TLS, the site whose server name the client asked for, or without one the
    ///   listener's default site;
    /// - on a plain listener (a load balancer in front terminated TLS), the site that names
    ///   the request's host, or the default site.
    ///
    /// `host` is read only on a plain listener (`tls` false).
    ///
    /// Whether the request's own host agrees with the site chosen is the site's check
    /// (421 in its dialect).
    pub fn for_connection(
        &self,
        listen: SocketAddr,
        server_name: Option<&str>,
        tls: bool,
        host: Option<&str>,
    ) -> Result<&Arc<GatewayState>, NoSite<'_>> {
        let on_listener = self.sites.iter().filter(|s| s.listen() == Some(listen));
        let Some(first) = on_listener.clone().next() else {
            // Listeners are bound at start and only a restart changes them: a listener with
            // no site cannot be; answered 421 by the first site all the same.
            return Err(NoSite {
                fallback: &self.sites[0],
                named: server_name.or(host).map(str::to_owned),
            });
        };
        if on_listener.clone().count() == 1 && first.server_names().is_empty() {
            return Ok(first);
        }
        let default = || on_listener.clone().find(|s| s.is_default());
        let chosen = if tls {
            match server_name {
                Some(name) => on_listener
                    .clone()
                    .find(|s| s.server_names().iter().any(|n| n == name)),
                None => default(),
            }
        } else {
            match host {
                Some(host) => {
                    let host = host_of(host);
                    on_listener
                        .clone()
                        .find(|s| s.host_names().contains(&host))
                        .or_else(default)
                }
                None => default(),
            }
        };
        chosen.ok_or(NoSite {
            fallback: first,
            named: if tls { server_name } else { host }.map(str::to_owned),
        })
    }

    /// The sites rebuilt by a reload, each keeping its namesake's counters and caches from
    /// `previous` ([`GatewayState::keeping_state_of`]).
    pub fn keeping_state_of(self, previous: &Sites) -> Sites {
        Sites {
            sites: self
                .sites
                .into_iter()
                .map(|next| match previous.named(next.name()) {
                    Some(before) => match Arc::try_unwrap(next) {
                        Ok(next) => Arc::new(next.keeping_state_of(before)),
                        Err(shared) => shared,
                    },
                    None => next,
                })
                .collect(),
        }
    }

    /// Forgets clients back at full quota, on every site.
    pub fn sweep(&self) {
        for site in &self.sites {
            site.sweep();
        }
    }
}

/// The gateway's handler of each accepted connection of the listener bound at `listen`. Each
/// request takes the sites `current` gives at that moment (a reload swaps
/// in rebuilt ones) and goes to its connection's site ([`Sites::for_connection`]); the
/// connection keeps its parsed identity.
pub fn new_connection(
    listen: SocketAddr,
    current: impl Fn() -> Arc<Sites> + Send + Sync + 'static,
) -> NewConnection {
    let current = Arc::new(current);
    Arc::new(move |info: Arc<ConnInfo>| {
        let connection = Arc::new(Connection::new(info));
        let current = Arc::clone(&current);
        let handler: ConnHandler = Arc::new(move |req| {
            let (sites, connection) = (current(), Arc::clone(&connection));
            Box::pin(async move { handle_on(&sites, listen, req, connection).await })
        });
        handler
    })
}

/// One request on a connection of the listener bound at `listen`, handled by the site it
/// goes to ([`Sites::for_connection`]), or answered 421 when no site of the listener takes it.
pub async fn handle_on<B>(
    sites: &Sites,
    listen: SocketAddr,
    req: Request<B>,
    conn: Arc<Connection>,
) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BodyError>,
{
    let tls = conn.tls.as_ref();
    // Over TLS the server name chooses the site; only a plain listener reads the host.
    let host = match tls {
        Some(_) => None,
        None => crate::gateway::request_host(&req),
    };
    let site = sites.for_connection(
        listen,
        tls.and_then(|t| t.server_name.as_deref()),
        tls.is_some(),
        host.as_deref(),
    );
    match site {
        Ok(site) => crate::gateway::handle(Arc::clone(site), req, conn).await,
        Err(no) => crate::gateway::misdirected(no.fallback, &req, &conn, no.named),
    }
}
