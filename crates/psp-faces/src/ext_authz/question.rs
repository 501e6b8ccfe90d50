//! Reading Envoy's `CheckRequest`: the site it is for, and the question that site decides.
//! Pure functions of the message (and of the sites, for the choice); nothing here decides.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::address::Address as AddressKind;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::service::auth::v3::AttributeContext;
use envoy_types::pb::envoy::service::auth::v3::attribute_context::HttpRequest;
use http::Method;
use percent_encoding::percent_decode;

use super::answer::Refusal;
use super::{CertificateSource, ExtAuthzConfig};
use crate::gateway::presented::{Unreadable, decoded_once, xfcc_decoded};
use crate::gateway::{Ask, DecodedChain, GatewayState};
use crate::sites::Sites;

/// The face's name in metrics and audit records.
pub(crate) const FACE: &str = "ext-authz";

/// The XFCC header, as Envoy names it in a `CheckRequest` (lower-cased).
const XFCC: &str = "x-forwarded-client-cert";

/// At most this many characters of a name the caller sent are repeated in a refusal's text.
const SHOWN_CHARS: usize = 100;

/// What a Check names its site by.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Naming<'a> {
    /// The route's context extension `site_key`.
    pub(crate) extension: Option<&'a str>,
    /// The TLS server name the client asked Envoy for.
    pub(crate) sni: Option<&'a str>,
    /// The request's `Host` or `:authority`.
    pub(crate) host: Option<&'a str>,
}

/// The sites as the choice sees them; [`Sites`] in production, a list of names in the tests.
pub(crate) trait Directory {
    type Site;
    fn named(&self, name: &str) -> Option<&Self::Site>;
    fn by_server_name(&self, name: &str) -> Option<&Self::Site>;
    fn by_host(&self, host: &str) -> Option<&Self::Site>;
    fn all(&self) -> &[Self::Site];
    /// The site's name (unique among the sites).
    fn name_of(site: &Self::Site) -> &str;
}

impl Directory for Sites {
    type Site = Arc<GatewayState>;

    fn named(&self, name: &str) -> Option<&Arc<GatewayState>> {
        Sites::named(self, name)
    }

    fn by_server_name(&self, name: &str) -> Option<&Arc<GatewayState>> {
        Sites::by_server_name(self, name)
    }

    fn by_host(&self, host: &str) -> Option<&Arc<GatewayState>> {
        Sites::by_host(self, host)
    }

    fn all(&self) -> &[Arc<GatewayState>] {
        Sites::all(self)
    }

    fn name_of(site: &Arc<GatewayState>) -> &str {
        site.name()
    }
}

/// What `attributes` and its HTTP request name the site by (empty values name nothing).
pub(crate) fn naming<'a>(
    attributes: &'a AttributeContext,
    http: &'a HttpRequest,
    site_key: &str,
) -> Naming<'a> {
    let given = |s: &'a str| Some(s).filter(|s| !s.is_empty());
    Naming {
        extension: attributes
            .context_extensions
            .get(site_key)
            .map(String::as_str),
        // A server name with a final dot (`xx.localhost.`) is the same name, as the host's
        // is (`gateway::host_of`).
        sni: attributes
            .tls_session
            .as_ref()
            .and_then(|t| given(t.sni.strip_suffix('.').unwrap_or(&t.sni))),
        host: given(http.host.as_str()),
    }
}

/// The site a Check is for: the one the context extension names; else the one whose server
/// name the client asked for; else the one that names the host; else the only site. An
/// extension that names no site is refused (a route configured for a site that is gone must
/// not fall back to another), and so are an extension and a server name that name two
/// different sites (421: the client's connection was made for the other one).
pub(crate) fn choose_site<'d, D: Directory>(
    sites: &'d D,
    naming: &Naming<'_>,
    site_key: &str,
) -> Result<&'d D::Site, Refusal> {
    let by_sni = naming.sni.and_then(|name| sites.by_server_name(name));
    if let Some(name) = naming.extension {
        let site = sites.named(name).ok_or_else(|| {
            Refusal::SiteUnknown(format!(
                "the route's context extension `{site_key}` names no site: `{}`",
                shown(name)
            ))
        })?;
        if let Some(other) = by_sni
            && D::name_of(other) != D::name_of(site)
        {
            return Err(Refusal::SitesDisagree {
                extension: D::name_of(site).to_owned(),
                sni: D::name_of(other).to_owned(),
            });
        }
        return Ok(site);
    }
    if let Some(site) = by_sni {
        return Ok(site);
    }
    if let Some(site) = naming.host.and_then(|host| sites.by_host(host)) {
        return Ok(site);
    }
    match sites.all() {
        [only] => Ok(only),
        all => Err(Refusal::SiteUnknown(format!(
            "no site is named among {}: no context extension `{site_key}`, {}, {}",
            all.len(),
            naming.sni.map_or("no server name".to_owned(), |n| format!(
                "the server name `{}` is no site's",
                shown(n)
            )),
            naming.host.map_or("no host".to_owned(), |h| format!(
                "the host `{}` is no site's",
                shown(h)
            )),
        ))),
    }
}

/// The question for the site: the request as Envoy holds it, the certificate from where
/// `config.certificate` says, and the client's address (Envoy's `source.address`, else the
/// caller's own).
pub(crate) fn ask(
    attributes: &AttributeContext,
    http: &HttpRequest,
    config: &ExtAuthzConfig,
    caller: SocketAddr,
) -> Result<Ask, Refusal> {
    let method = Method::from_bytes(http.method.as_bytes())
        .map_err(|_| Refusal::MethodInvalid(shown(&http.method)))?;
    let chain = match config.certificate {
        CertificateSource::Peer => peer_chain(attributes),
        CertificateSource::Xfcc => match xfcc_value(http) {
            Ok(Some(value)) => {
                xfcc_decoded(value, config.xfcc_forwarding, config.xfcc_by.as_deref())
            }
            Ok(None) => Ok(DecodedChain::none()),
            Err(why) => Err(why),
        },
    };
    Ok(Ask {
        face: FACE,
        method,
        target: http.path.clone(),
        host: Some(http.host.clone()).filter(|h| !h.is_empty()),
        chain,
        peer: source_address(attributes).unwrap_or(caller),
        header_names: header_names(http),
        // Envoy removes what the answer's `headers_to_remove` names.
        edge_removes: true,
        form_body: form_body(http),
        trace_headers: crate::gateway::trace_headers(
            http.headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes()))
                .chain(
                    http.header_map
                        .iter()
                        .flat_map(|map| &map.headers)
                        .map(|header| {
                            let value = if header.raw_value.is_empty() {
                                header.value.as_bytes()
                            } else {
                                header.raw_value.as_slice()
                            };
                            (header.key.as_str(), value)
                        }),
                ),
        ),
    })
}

/// The client's socket address as Envoy reports it (`source.address`), if it is one.
pub(crate) fn source_address(attributes: &AttributeContext) -> Option<SocketAddr> {
    let address = attributes
        .source
        .as_ref()?
        .address
        .as_ref()?
        .address
        .as_ref()?;
    let AddressKind::SocketAddress(socket) = address else {
        return None;
    };
    let ip: IpAddr = socket.address.parse().ok()?;
    let port = match socket.port_specifier {
        Some(PortSpecifier::PortValue(port)) => u16::try_from(port).ok()?,
        Some(PortSpecifier::NamedPort(_)) | None => 0,
    };
    Some(SocketAddr::new(ip, port))
}

/// The chain in `attributes.source.certificate`: URL-encoded PEM (Envoy percent-encodes the
/// PEM text; `+` stays `+`, so this is percent-decoding, not form decoding). Empty: the client
/// presented none.
pub(crate) fn peer_chain(attributes: &AttributeContext) -> Result<Arc<DecodedChain>, Unreadable> {
    let encoded = attributes
        .source
        .as_ref()
        .map_or("", |source| source.certificate.as_str());
    if encoded.is_empty() {
        return Ok(DecodedChain::none());
    }
    decoded_once(
        "envoy source.certificate",
        None,
        encoded.as_bytes(),
        |encoded| {
            let pem: Vec<u8> = percent_decode(encoded).collect();
            crate::cert::input::decode_certificate_chain(&pem)
                .map_err(|e| Unreadable::in_place("attributes.source.certificate", e))
        },
    )
}

/// The one `x-forwarded-client-cert` value of the request, wherever Envoy put it: the
/// `headers` map (names lower-cased, repeated headers merged) or `header_map` (Envoy's
/// `encode_raw_headers`, each header line on its own, values as bytes). Given more than once,
/// in either or across both, it is refused: which one the proxy appended to is not known.
/// Absent or empty: no certificate.
pub(crate) fn xfcc_value(http: &HttpRequest) -> Result<Option<&[u8]>, Unreadable> {
    let in_map = http
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(XFCC))
        .map(|(_, value)| value.as_bytes());
    let in_list = http
        .header_map
        .iter()
        .flat_map(|map| &map.headers)
        .filter(|header| header.key.eq_ignore_ascii_case(XFCC))
        .map(|header| {
            if header.raw_value.is_empty() {
                header.value.as_bytes()
            } else {
                header.raw_value.as_slice()
            }
        });
    let values: Vec<&[u8]> = in_map.chain(in_list).collect();
    match values.as_slice() {
        [] => Ok(None),
        [value] if value.iter().all(u8::is_ascii_whitespace) => Ok(None),
        [value] => Ok(Some(value)),
        more => Err(Unreadable::Repeated {
            header: XFCC.to_owned(),
            count: more.len(),
        }),
    }
}

/// The body Envoy passed (`with_request_body`: `raw_body` with `pack_as_bytes`, else
/// `body`), when the request's `content-type` is a form; `None` otherwise, or when it passed
/// none.
fn form_body(http: &HttpRequest) -> Option<bytes::Bytes> {
    let mut headers = http::HeaderMap::new();
    for (name, value) in &http.headers {
        if name.eq_ignore_ascii_case("content-type")
            && let Ok(value) = http::HeaderValue::from_str(value)
        {
            headers.append(http::header::CONTENT_TYPE, value);
        }
    }
    if !crate::gateway::is_form_headers(&headers) {
        return None;
    }
    let body = if http.raw_body.is_empty() {
        http.body.as_bytes()
    } else {
        http.raw_body.as_slice()
    };
    (!body.is_empty()).then(|| bytes::Bytes::copy_from_slice(body))
}

/// The names of the request's headers, lower-cased, each once, from either form Envoy sends
/// them in: the site removes (through the answer's `headers_to_remove`) those the built-in
/// proxy strips.
pub(crate) fn header_names(http: &HttpRequest) -> Vec<String> {
    let listed = http.header_map.iter().flat_map(|map| &map.headers);
    let mut names: Vec<String> = http
        .headers
        .keys()
        .map(String::as_str)
        .chain(listed.map(|header| header.key.as_str()))
        .map(str::to_ascii_lowercase)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// At most [`SHOWN_CHARS`] characters of `s`, for a refusal's text.
fn shown(s: &str) -> String {
    match s.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use envoy_types::pb::envoy::config::core::v3::{
        Address, HeaderMap, HeaderValue, SocketAddress,
    };
    use envoy_types::pb::envoy::service::auth::v3::attribute_context::{Peer, TlsSession};

    use super::*;
    use crate::gateway::presented::XfccMode;

    /// Sites by name, each with its server names and hosts.
    struct Names(
        Vec<(
            &'static str,
            &'static [&'static str],
            &'static [&'static str],
        )>,
    );

    type Entry = (
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
    );

    impl Directory for Names {
        type Site = Entry;
        fn named(&self, name: &str) -> Option<&Entry> {
            self.0.iter().find(|s| s.0 == name)
        }
        fn by_server_name(&self, name: &str) -> Option<&Entry> {
            self.0.iter().find(|s| s.1.contains(&name))
        }
        fn by_host(&self, host: &str) -> Option<&Entry> {
            self.0.iter().find(|s| s.2.contains(&host))
        }
        fn all(&self) -> &[Entry] {
            &self.0
        }
        fn name_of(site: &Entry) -> &str {
            site.0
        }
    }

    fn two_sites() -> Names {
        Names(vec![
            ("xx", &["xx.localhost"], &["xx.localhost", "127.0.0.1"]),
            ("xy", &["xy.localhost"], &["xy.localhost"]),
        ])
    }

    fn chosen<'d>(sites: &'d Names, naming: Naming<'_>) -> Result<&'d str, Refusal> {
        choose_site(sites, &naming, "psp_site").map(|s| s.0)
    }

    #[test]
    fn the_site_is_chosen_by_extension_then_server_name_then_host_then_alone() {
        let sites = two_sites();
        let naming = |extension, sni, host| Naming {
            extension,
            sni,
            host,
        };
        assert_eq!(
            chosen(&sites, naming(Some("xy"), None, Some("xx.localhost"))),
            Ok("xy")
        );
        assert_eq!(
            chosen(&sites, naming(Some("xy"), Some("xy.localhost"), None)),
            Ok("xy")
        );
        assert_eq!(
            chosen(
                &sites,
                naming(None, Some("xy.localhost"), Some("xx.localhost"))
            ),
            Ok("xy")
        );
        assert_eq!(
            chosen(
                &sites,
                naming(None, Some("other.example"), Some("xy.localhost"))
            ),
            Ok("xy")
        );
        assert_eq!(
            chosen(&sites, naming(None, None, Some("127.0.0.1"))),
            Ok("xx")
        );
        let one = Names(vec![("only", &[], &[])]);
        assert_eq!(
            chosen(&one, naming(None, None, Some("anything"))),
            Ok("only")
        );
    }

    #[test]
    fn an_extension_and_a_server_name_of_two_sites_or_a_site_nobody_names_are_refused() {
        let sites = two_sites();
        let refused = chosen(
            &sites,
            Naming {
                extension: Some("xx"),
                sni: Some("xy.localhost"),
                host: None,
            },
        );
        assert_eq!(
            refused,
            Err(Refusal::SitesDisagree {
                extension: "xx".into(),
                sni: "xy".into()
            })
        );
        let Err(Refusal::SiteUnknown(why)) = chosen(
            &sites,
            Naming {
                extension: Some("zz"),
                sni: None,
                host: Some("xx.localhost"),
            },
        ) else {
            panic!("an unknown extension falls back to nothing");
        };
        assert!(why.contains("`psp_site` names no site: `zz`"), "{why}");
        let Err(Refusal::SiteUnknown(why)) = chosen(
            &sites,
            Naming {
                extension: None,
                sni: None,
                host: Some("bank.example"),
            },
        ) else {
            panic!("two sites and no name is no choice");
        };
        assert!(
            why.contains("among 2") && why.contains("`bank.example`"),
            "{why}"
        );
    }

    fn http(method: &str, path: &str, host: &str) -> HttpRequest {
        HttpRequest {
            method: method.into(),
            path: path.into(),
            host: host.into(),
            ..HttpRequest::default()
        }
    }

    fn attributes(sni: &str, extensions: &[(&str, &str)]) -> AttributeContext {
        AttributeContext {
            tls_session: Some(TlsSession { sni: sni.into() }),
            context_extensions: extensions
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..AttributeContext::default()
        }
    }

    #[test]
    fn a_server_name_with_a_final_dot_names_the_same_site() {
        let a = attributes("xy.localhost.", &[]);
        let h = http("GET", "/", "");
        assert_eq!(naming(&a, &h, "site").sni, Some("xy.localhost"));
        assert_eq!(naming(&attributes(".", &[]), &h, "site").sni, None);
        let sites = two_sites();
        assert_eq!(chosen(&sites, naming(&a, &h, "site")).ok(), Some("xy"));
    }

    #[test]
    fn naming_reads_the_configured_extension_the_sni_and_the_host_and_ignores_empty_ones() {
        let a = attributes("xy.localhost", &[("site", "xx"), ("psp_site", "other")]);
        let h = http("GET", "/", "xx.localhost:443");
        assert_eq!(
            naming(&a, &h, "site"),
            Naming {
                extension: Some("xx"),
                sni: Some("xy.localhost"),
                host: Some("xx.localhost:443"),
            }
        );
        let empty = attributes("", &[]);
        assert_eq!(
            naming(&empty, &http("GET", "/", ""), "site"),
            Naming::default()
        );
    }

    fn config(certificate: CertificateSource, xfcc_by: Option<&str>) -> ExtAuthzConfig {
        ExtAuthzConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            callers: vec!["127.0.0.1".parse().expect("cidr")],
            certificate,
            xfcc_by: xfcc_by.map(str::to_owned),
            xfcc_forwarding: XfccMode::SanitizeSet,
            site_key: "psp_site".into(),
            tls: None,
        }
    }

    fn socket(address: &str, port: u32) -> AttributeContext {
        AttributeContext {
            source: Some(Peer {
                address: Some(Address {
                    address: Some(AddressKind::SocketAddress(SocketAddress {
                        address: address.into(),
                        port_specifier: Some(PortSpecifier::PortValue(port)),
                        ..SocketAddress::default()
                    })),
                }),
                ..Peer::default()
            }),
            ..AttributeContext::default()
        }
    }

    #[test]
    fn the_ask_carries_the_raw_target_the_host_and_envoys_client_address() {
        let caller = SocketAddr::from(([10, 0, 0, 1], 5000));
        let a = socket("192.0.2.7", 40_000);
        let ask = ask(
            &a,
            &http("POST", "/v1/payments/sepa?x=%2F", "xx.localhost"),
            &config(CertificateSource::Peer, None),
            caller,
        )
        .expect("ask");
        assert_eq!(ask.face, "ext-authz");
        assert_eq!(ask.method, Method::POST);
        assert_eq!(ask.target, "/v1/payments/sepa?x=%2F");
        assert_eq!(ask.host.as_deref(), Some("xx.localhost"));
        assert_eq!(ask.chain, Ok(DecodedChain::none()));
        assert_eq!(ask.peer, SocketAddr::from(([192, 0, 2, 7], 40_000)));
        // No usable source address: the caller's.
        let no_source = super::ask(
            &socket("not an address", 1),
            &http("GET", "/", ""),
            &config(CertificateSource::Peer, None),
            caller,
        )
        .expect("ask");
        assert_eq!((no_source.peer, no_source.host), (caller, None));
    }

    #[test]
    fn the_trace_headers_are_read_from_either_form_and_a_repeat_across_them_stays_visible() {
        use crate::telemetry::trace_context::{TraceParent, TraceParentError};
        const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let caller = SocketAddr::from(([10, 0, 0, 1], 5000));
        let ask_of = |h: &HttpRequest| {
            super::ask(
                &AttributeContext::default(),
                h,
                &config(CertificateSource::Peer, None),
                caller,
            )
            .expect("ask")
        };
        let mut h = http("GET", "/", "");
        h.headers = HashMap::from([
            ("traceparent".to_owned(), TP.to_owned()),
            ("tracestate".to_owned(), "congo=t61rcWkgMzE".to_owned()),
            ("x-other".to_owned(), "1".to_owned()),
        ]);
        let ask = ask_of(&h);
        assert_eq!(ask.trace_headers.len(), 2, "only the trace headers");
        let parsed = TraceParent::from_headers(&ask.trace_headers).expect("accepted");
        assert_eq!(
            parsed.map(|p| p.trace_id.to_string()).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        // The same name in the raw list too: two values, which the gateway refuses (which one
        // the client sent is not known).
        h.header_map = Some(HeaderMap {
            headers: vec![HeaderValue {
                key: "Traceparent".into(),
                raw_value: b"00-11111111111111111111111111111111-2222222222222222-01".to_vec(),
                ..HeaderValue::default()
            }],
        });
        let ask = ask_of(&h);
        assert_eq!(
            TraceParent::from_headers(&ask.trace_headers),
            Err(TraceParentError::Repeated)
        );
    }

    #[test]
    fn a_method_that_is_not_one_is_refused() {
        let caller = SocketAddr::from(([10, 0, 0, 1], 5000));
        for method in ["", "GE T", "GET\n"] {
            let refused = ask(
                &AttributeContext::default(),
                &http(method, "/", ""),
                &config(CertificateSource::Peer, None),
                caller,
            );
            assert!(
                matches!(refused, Err(Refusal::MethodInvalid(_))),
                "{method:?}"
            );
        }
    }

    #[test]
    fn source_address_takes_ipv4_and_ipv6_and_nothing_else() {
        assert_eq!(
            source_address(&socket("2001:db8::1", 443)),
            Some("[2001:db8::1]:443".parse().expect("addr"))
        );
        assert_eq!(source_address(&socket("localhost", 443)), None);
        assert_eq!(source_address(&socket("192.0.2.1", 70_000)), None);
        assert_eq!(source_address(&AttributeContext::default()), None);
    }

    /// A certificate's PEM, made here (rcgen), and its DER.
    fn certificate() -> (String, Vec<u8>) {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["psp.example".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("certificate");
        (cert.pem(), cert.der().to_vec())
    }

    /// Percent-encoding as Envoy's `urlEncodedPemEncodedPeerCertificate` does it (every byte
    /// but unreserved characters).
    fn url_encoded(pem: &str) -> String {
        percent_encoding::utf8_percent_encode(pem, percent_encoding::NON_ALPHANUMERIC).to_string()
    }

    #[test]
    fn peer_chain_decodes_envoys_url_encoded_pem_and_reads_empty_as_none() {
        let (pem, der) = certificate();
        let mut a = AttributeContext::default();
        let chain = |a: &AttributeContext| peer_chain(a).map(|d| d.chain().to_vec());
        assert_eq!(chain(&a), Ok(Vec::new()));
        a.source = Some(Peer {
            certificate: url_encoded(&pem),
            ..Peer::default()
        });
        assert_eq!(chain(&a), Ok(vec![der.clone()]));
        // Again, from the cache: the same chain.
        assert_eq!(chain(&a), Ok(vec![der]));
        a.source = Some(Peer {
            certificate: "-----BEGIN%20CERTIFICATE-----%0Anot%20base64".into(),
            ..Peer::default()
        });
        assert!(peer_chain(&a).is_err());
    }

    #[test]
    fn xfcc_value_is_read_from_either_form_and_refused_when_given_twice() {
        let mut h = http("GET", "/", "");
        assert_eq!(xfcc_value(&h), Ok(None));
        h.headers = HashMap::from([(XFCC.to_owned(), "By=a;Cert=b".to_owned())]);
        assert_eq!(xfcc_value(&h), Ok(Some(&b"By=a;Cert=b"[..])));
        let raw = |key: &str, value: &[u8]| HeaderValue {
            key: key.into(),
            raw_value: value.to_vec(),
            ..HeaderValue::default()
        };
        let mut listed = http("GET", "/", "");
        listed.header_map = Some(HeaderMap {
            headers: vec![raw("x-request-id", b"1"), raw(XFCC, b"Cert=c")],
        });
        assert_eq!(xfcc_value(&listed), Ok(Some(&b"Cert=c"[..])));
        listed.header_map = Some(HeaderMap {
            headers: vec![
                raw(XFCC, b"Cert=client"),
                raw("X-Forwarded-Client-Cert", b"Cert=c"),
            ],
        });
        assert!(xfcc_value(&listed).is_err());
        // Across both forms.
        let mut both = listed.clone();
        both.header_map = Some(HeaderMap {
            headers: vec![raw(XFCC, b"Cert=c")],
        });
        both.headers = HashMap::from([(XFCC.to_owned(), "Cert=d".to_owned())]);
        assert!(xfcc_value(&both).is_err());
        // Present but empty: no certificate.
        h.headers = HashMap::from([(XFCC.to_owned(), " ".to_owned())]);
        assert_eq!(xfcc_value(&h), Ok(None));
    }

    #[test]
    fn xfcc_chain_takes_the_last_element_and_checks_who_added_it() {
        let (pem, der) = certificate();
        let (client_pem, _) = certificate();
        // Envoy's Hash: the SHA-256 of the certificate's DER, hex (checked against Cert).
        let hash: String = ring::digest::digest(&ring::digest::SHA256, &der)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let value = format!(
            "By=spiffe://client;Cert=\"{}\",By=spiffe://edge;Hash={hash};Cert=\"{}\";Subject=\"CN=a,O=b\";URI=",
            url_encoded(&client_pem),
            url_encoded(&pem)
        );
        let chain = |value: &[u8], mode, by| {
            xfcc_decoded(value, mode, by).map(|decoded| decoded.chain().to_vec())
        };
        let (set, append) = (XfccMode::SanitizeSet, XfccMode::AppendForward);
        // Two elements: APPEND_FORWARD's shape, never SANITIZE_SET's.
        assert_eq!(
            chain(value.as_bytes(), append, Some("spiffe://edge")),
            Ok(vec![der.clone()])
        );
        assert!(chain(value.as_bytes(), set, None).is_err());
        assert!(chain(value.as_bytes(), set, Some("spiffe://edge")).is_err());
        assert!(chain(value.as_bytes(), append, Some("spiffe://other")).is_err());
        assert!(chain(value.as_bytes(), append, None).is_err());
        assert!(chain(b"By=spiffe://edge;Hash=ab", set, Some("spiffe://edge")).is_err());
        // A Hash that is not the certificate's.
        let wrong = value.replace(&hash, &"0".repeat(64));
        assert!(chain(wrong.as_bytes(), append, Some("spiffe://edge")).is_err());
        // An empty value is no certificate.
        assert_eq!(chain(b"", set, None), Ok(Vec::new()));
    }

    #[test]
    fn header_names_come_from_either_form_once_each() {
        let mut h = http("GET", "/", "");
        h.headers = HashMap::from([
            ("x_psp_auth_number".to_owned(), "forged".to_owned()),
            ("x-psp-name".to_owned(), "a".to_owned()),
        ]);
        h.header_map = Some(HeaderMap {
            headers: vec![
                HeaderValue {
                    key: "X-Psp_Services".into(),
                    ..HeaderValue::default()
                },
                HeaderValue {
                    key: "x_psp_auth_number".into(),
                    ..HeaderValue::default()
                },
            ],
        });
        assert_eq!(
            header_names(&h),
            ["x-psp-name", "x-psp_services", "x_psp_auth_number"]
        );
    }

    #[test]
    fn shown_cuts_long_names() {
        assert_eq!(shown("abc"), "abc");
        assert_eq!(shown(&"é".repeat(150)).chars().count(), SHOWN_CHARS + 1);
    }
}
