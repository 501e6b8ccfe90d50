//! The gateway's decision for the bank's own edge gateway: an external authoriser (Envoy's
//! ext_authz over gRPC or HTTP, nginx `auth_request`, Traefik `ForwardAuth`, Caddy
//! `forward_auth`) asks whether a request it holds may go on, and to what identity headers.
//!
//! The question runs through the same phases as a request to the built-in proxy: the same
//! screening (methods, authority, the site's host, path normalisation, override parameters),
//! the same route rule, the same decision call, and the same logging phase (metrics and audit
//! record, with the face's name). What differs is what an authoriser cannot do: it cannot
//! rewrite the path its proxy forwards, so a target whose path is not already in normal form
//! is refused (`path_not_normal`), where the built-in proxy forwards the normal form it
//! decided on. The per-client rate limit (`gateway.rate_limit`) is not applied: the edge
//! gateway in front has its own.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};

use super::dialect::Failure;
use super::record::{self, Record};
use super::{GatewayState, decide, forward, identify_in, route};
use crate::policy::{Reason, Rejection};
use crate::server::{BodyError, ConnInfo, new_request_id};

/// A question from an external authoriser: the request it holds, as its client sent it.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The face asking, for metrics and the audit record: `ext-authz` or `forward-auth`.
    pub face: &'static str,
    pub method: Method,
    /// The request target as the client sent it: the path and its query.
    pub target: String,
    /// The request's host (`Host` or `:authority`), if the authoriser passed it.
    pub host: Option<String>,
    /// The client's certificate chain, leaf first (empty: none presented), or why the
    /// authoriser's copy of it cannot be read.
    /// Decoded once per distinct value ([`super::presented`]).
    pub chain: Result<Arc<super::DecodedChain>, super::presented::Unreadable>,
    /// The client's address as the authoriser reports it, else the authoriser's own.
    pub peer: SocketAddr,
    /// The names of the request's headers (lower case) as the authoriser passed them, less
    /// those its proxy sets itself: those the built-in proxy strips are removed by the
    /// authoriser's proxy (`edge_removes`) or the request is refused.
    pub header_names: Vec<String>,
    /// Whether the authoriser's proxy removes the headers the answer names (Envoy's
    /// `headers_to_remove`); nginx, Caddy and Traefik cannot be told to.
    pub edge_removes: bool,
    /// The request's body as the authoriser passed it (Envoy's `with_request_body`), when
    /// the request is a form (`Content-Type: application/x-www-form-urlencoded`): screened for
    /// method and path overrides (`_method`) as the built-in proxy screens it. `None`: not a
    /// form, or no body passed (docs/integration.md says what closes that at the edge).
    pub form_body: Option<Bytes>,
    /// The request's `traceparent` and `tracestate` fields as the authoriser passed them
    /// ([`trace_headers`]); empty: none. They are the client's (an authoriser passes its
    /// client's headers on), so `from-trusted-proxies` does not believe them.
    pub trace_headers: HeaderMap,
}

/// The `traceparent` and `tracestate` fields of `(name, value)` pairs (any case), each
/// value that is one, for [`Ask::trace_headers`]; a repeated `traceparent` stays repeated,
/// so that it is refused.
pub fn trace_headers<'a>(fields: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> HeaderMap {
    use crate::telemetry::trace_context::{TRACEPARENT, TRACESTATE};
    let mut out = HeaderMap::new();
    for (name, value) in fields {
        let name = if name.eq_ignore_ascii_case(TRACEPARENT.as_str()) {
            TRACEPARENT
        } else if name.eq_ignore_ascii_case(TRACESTATE.as_str()) {
            TRACESTATE
        } else {
            continue;
        };
        if let Ok(value) = HeaderValue::from_bytes(value) {
            out.append(name, value);
        }
    }
    out
}

/// The answer to an [`Ask`].
#[derive(Debug)]
pub enum Answer {
    /// The request may go on, with these identity headers set (after every header in
    /// `remove` was removed, so that no client copy survives).
    Allow {
        set: HeaderMap,
        remove: Vec<HeaderName>,
        /// The PSP's authorisation number, if its certificate has one.
        auth_number: Option<String>,
        /// The PSD2 services the PSP holds (the services header's value).
        services: Vec<u8>,
        check_id: String,
    },
    /// The request is refused: the built-in proxy's status and its dialect's body.
    Deny {
        status: StatusCode,
        /// The refusal's code (`docs/errors.md`).
        code: &'static str,
        headers: HeaderMap,
        body: Bytes,
        check_id: String,
    },
}

impl Answer {
    /// Whether the request may go on.
    pub fn allowed(&self) -> bool {
        matches!(self, Answer::Allow { .. })
    }
}

impl GatewayState {
    /// Decides `ask` for this site, as the built-in proxy would decide the same request, and
    /// records it (metrics, audit record) under `ask.face`.
    pub async fn authorise(&self, ask: Ask) -> Answer {
        let (span, trace) =
            // The authoriser passes the trace fields the client sent (nginx copies the
            // client's headers into its check; Envoy's filter sees them before its tracer
            // writes its own): they are the client's, believed under `accept` only.
            super::request_span(super::Asker::Authoriser, self, &ask.trace_headers, false);
        let mut record = Record::new(
            ask.face,
            (Arc::clone(&self.name), self.site.policy.jurisdiction),
            new_request_id(),
            (ask.method.clone(), path_of(&ask.target).to_owned()),
            self.default_dialect,
            trace,
        );
        span.record("check_id", record.check_id.as_str());
        let conn = ConnInfo::new(ask.peer, None);
        // The request's names the built-in proxy strips, found once: refused in the phases
        // when the authoriser's proxy cannot remove them, else named for it to remove.
        let strip = self.strip();
        let stripped: Vec<String> = ask
            .header_names
            .iter()
            .filter(|name| forward::is_stripped(name, &strip))
            .cloned()
            .collect();
        // Other tracing systems' headers of a caller whose trace is not believed: removed
        // where the authoriser's proxy removes what it is told (as the built-in proxy does).
        let untrusted_trace: Vec<HeaderName> = if record.trace.believed || !ask.edge_removes {
            Vec::new()
        } else {
            ask.header_names
                .iter()
                .filter(|name| {
                    crate::telemetry::trace_context::is_other_trace_header(
                        &name.to_ascii_lowercase(),
                    )
                })
                .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
                .collect()
        };
        let phased = {
            use tracing::Instrument;
            self.authorise_phases(ask, &stripped, &mut record)
                .instrument(span)
                .await
        };
        let answer = match phased {
            Ok(set) => {
                record::log(&record, &conn, None, StatusCode::OK);
                self.allow(set, &record, &stripped, untrusted_trace)
            }
            Err(failure) => {
                let response = super::refusal(self, &record, &failure);
                record::log(&record, &conn, Some(&failure), response.status());
                let (parts, body) = response.into_parts();
                Answer::Deny {
                    status: parts.status,
                    code: failure.code(),
                    headers: parts.headers,
                    body: collect(body).await,
                    check_id: record.check_id.clone(),
                }
            }
        };
        // Under `fail_closed`, the answer waits for its audit record's write (group commit).
        crate::telemetry::audit::recorded().await;
        answer
    }

    /// The permit's answer: the headers to set, and those to remove (what the built-in
    /// proxy strips, of those present, and the untrusted trace headers).
    fn allow(
        &self,
        set: HeaderMap,
        record: &Record,
        stripped: &[String],
        untrusted_trace: Vec<HeaderName>,
    ) -> Answer {
        let (auth_number, services) = match &record.decided {
            Some(d) => (
                d.checked.report().auth_number().map(str::to_owned),
                services_of(&set, &self.names.services),
            ),
            None => (None, Vec::new()),
        };
        let mut remove = self.headers_to_remove();
        let present = stripped
            .iter()
            .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
            .filter(|name| !remove.contains(name))
            .collect::<Vec<_>>();
        remove.extend(present);
        remove.extend(untrusted_trace);
        Answer::Allow {
            set,
            remove,
            auth_number,
            services,
            check_id: record.check_id.clone(),
        }
    }

    /// The phases of the built-in proxy up to its decision, on the authoriser's request; the
    /// identity headers of the permit.
    async fn authorise_phases(
        &self,
        ask: Ask,
        stripped: &[String],
        record: &mut Record,
    ) -> Result<HeaderMap, Failure> {
        let req = request_of(&ask)?;
        let (path, required) = route(self, &req, record)?;
        if path.as_str() != req.uri().path() {
            return Err(Failure::PathNotNormal(path.as_str().to_owned()));
        }
        // A form field that overrides the method or path, as the built-in proxy refuses it.
        if let Some(body) = &ask.form_body
            && let Some(field) = super::overrides::refused_parameter(&String::from_utf8_lossy(body))
        {
            return Err(Failure::OverrideRefused(field));
        }
        // `headers_with_underscores = "refuse"` refuses here as in the built-in proxy's
        // screening (its default, `drop`, is the strip set's).
        if self.underscores == super::UnderscoreHeaders::Refuse
            && let Some(name) = ask.header_names.iter().find(|name| {
                name.contains('_')
                    && self
                        .identity_header
                        .as_ref()
                        .is_none_or(|own| own.as_str() != name.as_str())
            })
        {
            return Err(Failure::HeaderNameRefused(super::overrides::echoed(name)));
        }
        // What the built-in proxy would strip and the authoriser's proxy cannot: refused.
        if !ask.edge_removes
            && let Some(name) = stripped.first()
        {
            return Err(Failure::HeaderRefused(super::overrides::echoed(name)));
        }
        let identity = match &ask.chain {
            Ok(decoded) => {
                super::shared_identity_keyed(self, decoded.digest(), decoded.chain()).await
            }
            Err(why) => {
                return Err(Failure::Refused(Rejection::new(
                    Reason::CertificateUnreadable,
                    format!("the certificate header cannot be read: {why}"),
                )));
            }
        };
        let (identity, certificate) = identify_in(identity)?;
        let permit = decide(self, &identity, certificate, &path, required, record).await?;
        let mut set = HeaderMap::new();
        forward::identity_headers(
            &mut set,
            &self.names,
            forward::Identity {
                permit: &permit,
                certificate: identity.certificate_header.as_ref(),
                check_id: &record.check_id,
                decision: self.forwarded_decision(record),
            },
        );
        Ok(set)
    }

    /// Every header name an allowed request must lose before the identity headers are set,
    /// as the built-in proxy removes them (`forward::stripped_names`): the identity headers
    /// themselves (a client's copy), the client-certificate, client-address and override
    /// headers, `Forwarded` and `gateway.strip_headers`.
    pub fn headers_to_remove(&self) -> Vec<HeaderName> {
        forward::stripped_names(&self.strip())
    }
}

/// The authoriser's request as the built-in proxy would have received it: the method, the
/// target, and the host as `Host`. A target or host that is not one is refused as the
/// proxy's listener would (400).
fn request_of(ask: &Ask) -> Result<Request<()>, Failure> {
    // `http::Uri` drops a fragment, where the authoriser's proxy forwards it with the rest.
    if ask.target.contains('#') {
        return Err(Failure::PathRefused(super::PathRefusal::Fragment));
    }
    let uri: http::Uri = ask
        .target
        .parse()
        .map_err(|_| Failure::PathRefused(super::PathRefusal::NotAbsolute))?;
    if uri.scheme().is_some() || !ask.target.starts_with('/') {
        // The authorisers pass origin-form targets; anything else is not a path.
        return Err(Failure::PathRefused(super::PathRefusal::NotAbsolute));
    }
    let mut req = Request::new(());
    *req.method_mut() = ask.method.clone();
    *req.uri_mut() = uri;
    req.extensions_mut()
        .insert(super::authority::VersionUnknown);
    if let Some(host) = &ask.host {
        let value = HeaderValue::from_str(host).map_err(|_| {
            Failure::AuthorityRefused(super::authority::AuthorityRefusal::InvalidHost)
        })?;
        req.headers_mut().insert(http::header::HOST, value);
    }
    Ok(req)
}

/// The path of a request target (before its query).
fn path_of(target: &str) -> &str {
    target.split_once('?').map_or(target, |(path, _)| path)
}

/// The services header's value as numbers.
fn services_of(set: &HeaderMap, name: &HeaderName) -> Vec<u8> {
    set.get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// A refusal's body, read whole (it is in memory: one JSON document).
async fn collect<B>(body: B) -> Bytes
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<BodyError>,
{
    use http_body_util::BodyExt;
    body.collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default()
}
