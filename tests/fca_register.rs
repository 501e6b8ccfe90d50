//! The FCA register adapter against a replay server on 127.0.0.1 that serves the responses
//! recorded from the real API (`../shared/data/registers/fca/*.json`, by request path and
//! query) and counts every request it receives.
//!
//! Recorded: firm 552016 (record, no passports), permissions of 765112 (both pages) and of
//! 122702 (page 1 of 3), passports of both banks. Whatever a test needs beyond that is added
//! by the test and labelled synthetic where it is built.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use psp_server::{self as server, Body, Handler, Limits, full};
use psp_service::fetch::{AllowDestinations, FetchError, Fetcher};
use psp_service::register::{
    AuthStatus, Category, FcaAnswer, FcaConfig, FcaCredentials, FcaEndpoint, FcaError,
    FcaFreshness, FcaManualClock, FcaPassportDirection, FcaQuota, FcaRateLimit, FcaRegister,
    ServiceSet, frn_of,
};
use psp_testkit::wait::{Gate, until};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

const EMAIL: &str = "register-tests@bank.example";
/// Made up; what must never show anywhere but in the request header.
const KEY: &str = "k3y-0f-the-fca-api-never-to-be-logged";
const BASE_PATH: &str = "/services/V0.1";

/// One answer of the replay server.
#[derive(Clone)]
struct Route {
    status: u16,
    body: Vec<u8>,
    /// Held until this gate opens (never, if it is never opened).
    gate: Option<Gate>,
}

impl Route {
    fn json(body: Value) -> Route {
        Route {
            status: 200,
            body: serde_json::to_vec(&body).expect("serialises"),
            gate: None,
        }
    }

    fn raw(status: u16, body: &str) -> Route {
        Route {
            status,
            body: body.as_bytes().to_vec(),
            gate: None,
        }
    }

    fn held_by(mut self, gate: &Gate) -> Route {
        self.gate = Some(gate.clone());
        self
    }
}

/// When set, every request gets this HTTP status (the register failing or limiting).
#[derive(Clone, Copy)]
enum Mode {
    Replay,
    Status(u16),
}

struct Seen {
    target: String,
    headers: HeaderMap,
}

struct Replay {
    addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, Route>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    mode: Arc<Mutex<Mode>>,
    _stop: watch::Sender<bool>,
}

impl Replay {
    /// The recorded responses, keyed by the path and query of `recorded_request_url`.
    fn recorded() -> HashMap<String, Route> {
        let dir = common::data("registers/fca");
        let mut routes = HashMap::new();
        for entry in std::fs::read_dir(&dir).expect("recordings") {
            let path = entry.expect("entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let file: Value =
                serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
            let url = file["recorded_request_url"].as_str().expect("url");
            let target = url
                .strip_prefix("https://register.fca.org.uk")
                .expect("recorded from the FCA");
            let status = file["http_status"].as_u64().expect("status") as u16;
            let body = serde_json::to_vec(&file["body"]).expect("body");
            routes.insert(
                target.to_owned(),
                Route {
                    status,
                    body,
                    gate: None,
                },
            );
        }
        assert!(routes.len() >= 9, "{} recordings", routes.len());
        routes
    }

    async fn start() -> Replay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let routes = Arc::new(Mutex::new(Self::recorded()));
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let mode = Arc::new(Mutex::new(Mode::Replay));
        let (r, s, m) = (routes.clone(), seen.clone(), mode.clone());
        let handler: Handler = Arc::new(move |req, _conn| {
            let (r, s, m) = (r.clone(), s.clone(), m.clone());
            Box::pin(async move {
                let target = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_default();
                s.lock().expect("lock").push(Seen {
                    target: target.clone(),
                    headers: req.headers().clone(),
                });
                let mode = *m.lock().expect("lock");
                let route = match mode {
                    Mode::Status(status) => Route::raw(status, "register unavailable"),
                    Mode::Replay => r
                        .lock()
                        .expect("lock")
                        .get(&target)
                        .cloned()
                        .unwrap_or_else(|| Route::raw(404, "not recorded")),
                };
                if let Some(gate) = &route.gate {
                    gate.wait().await;
                }
                let mut response: Response<Body> = Response::new(full(route.body));
                *response.status_mut() = StatusCode::from_u16(route.status).expect("status");
                response
            })
        });
        let (stop, stop_rx) = watch::channel(false);
        tokio::spawn(server::serve_with_link_base(
            listener,
            None,
            Limits::default(),
            "/docs/errors#".into(),
            handler,
            stop_rx,
        ));
        Replay {
            addr,
            routes,
            seen,
            mode,
            _stop: stop,
        }
    }

    fn base(&self) -> String {
        format!("http://{}{BASE_PATH}", self.addr)
    }

    fn route(&self, target: &str, route: Route) {
        self.routes
            .lock()
            .expect("lock")
            .insert(format!("{BASE_PATH}{target}"), route);
    }

    fn set_mode(&self, mode: Mode) {
        *self.mode.lock().expect("lock") = mode;
    }

    fn count(&self) -> usize {
        self.seen.lock().expect("lock").len()
    }

    /// Request targets without the base path, in arrival order.
    fn targets(&self) -> Vec<String> {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .map(|s| s.target.trim_start_matches(BASE_PATH).to_owned())
            .collect()
    }
}

fn credentials() -> FcaCredentials {
    FcaCredentials::new(EMAIL, KEY).expect("valid credentials")
}

fn config(base: String) -> FcaConfig {
    let mut c = FcaConfig::new(credentials());
    c.base_url = base;
    c.quota = FcaQuota {
        requests: 1_000,
        period: Duration::from_secs(1),
    };
    c.max_token_wait = Duration::from_millis(100);
    c.request_timeout = Duration::from_secs(2);
    c.lookup_timeout = Duration::from_secs(5);
    c
}

fn register(config: FcaConfig, clock: &Arc<FcaManualClock>) -> FcaRegister {
    let fetcher = Fetcher::new(AllowDestinations::Loopback, Duration::from_secs(2));
    FcaRegister::with_clock(config, fetcher, clock.clone()).expect("valid configuration")
}

fn firm_of(answer: &FcaAnswer) -> &psp_service::register::FcaFirm {
    answer.firm().expect("the firm is in the register")
}

/// SYNTHETIC: the permissions of 552016 were not recorded. One FSMA activity, in the recorded
/// envelope shape.
fn synthetic_552016_permissions() -> Route {
    Route::json(json!({
        "Status": "FSR-API-02-03-00",
        "ResultInfo": {"page": "1", "per_page": "20", "total_count": "1"},
        "Message": "Ok. Firm permission found",
        "Data": {"Managing investments": [{"Customer Type": ["Retail (Investment)"]}]}
    }))
}

/// SYNTHETIC: a firm record for `frn` named `name`, made from the recorded 552016 record.
fn synthetic_firm(frn: &str, name: &str) -> Route {
    let recorded = Replay::recorded();
    let route = &recorded[&format!("{BASE_PATH}/Firm/552016")];
    let mut body: Value = serde_json::from_slice(&route.body).expect("JSON");
    body["Data"][0]["FRN"] = json!(frn);
    body["Data"][0]["Organisation Name"] = json!(name);
    Route::json(body)
}

/// SYNTHETIC: "firm not found" with the FCA's code and message (FCA code table).
fn not_found() -> Route {
    Route::json(json!({
        "Status": "FSR-API-02-01-11", "ResultInfo": null, "Message": "Firm not found", "Data": null
    }))
}

async fn started() -> (Replay, Arc<FcaManualClock>) {
    let replay = Replay::start().await;
    replay.route(
        "/Firm/552016/Permissions?pgnp=1",
        synthetic_552016_permissions(),
    );
    replay.route("/Firm/765112", synthetic_firm("765112", "HSBC UK Bank plc"));
    replay.route(
        "/Firm/122702",
        synthetic_firm("122702", "Barclays Bank Plc"),
    );
    (replay, Arc::new(FcaManualClock::new()))
}

#[tokio::test]
async fn the_real_firm_552016_is_found_is_not_a_psp_and_has_no_passports() {
    let (replay, clock) = started().await;
    let fca = register(config(replay.base()), &clock);
    let lookup = fca.lookup_reference("552016").await.expect("answer");
    assert_eq!(lookup.freshness, FcaFreshness::Fresh);
    let firm = firm_of(&lookup.answer);
    assert_eq!(firm.frn, "552016");
    assert_eq!(firm.name, "J.P. MORGAN PERSONAL INVESTING LIMITED");
    assert_eq!(firm.firm_status, "Authorised");
    assert_eq!(firm.psd_emd_status, "");
    assert!(
        firm.passports.is_empty(),
        "FSR-API-02-07-11 Passport not found"
    );
    assert_eq!(firm.standing, None, "no PSD/EMD status, no deposits");
    assert!(firm.to_entity().entries.is_empty());
    assert_eq!(
        replay.targets(),
        vec![
            "/Firm/552016",
            "/Firm/552016/Permissions?pgnp=1",
            "/Firm/552016/Passports?pgnp=1"
        ]
    );
    assert_eq!(fca.requests_sent(), 3);
}

#[tokio::test]
async fn hsbc_permissions_are_read_across_both_recorded_pages() {
    let (replay, clock) = started().await;
    let fca = register(config(replay.base()), &clock);
    let lookup = fca.lookup_reference("765112").await.expect("answer");
    let firm = firm_of(&lookup.answer);
    assert_eq!(
        replay.targets(),
        vec![
            "/Firm/765112",
            "/Firm/765112/Permissions?pgnp=1",
            "/Firm/765112/Permissions?pgnp=2",
            "/Firm/765112/Passports?pgnp=1"
        ]
    );
    assert_eq!(firm.permissions.len(), 38, "total_count 38 over two pages");
    assert!(
        firm.permissions.iter().any(|p| p == "Accepting Deposits"),
        "page 1"
    );
    assert!(
        firm.permissions
            .iter()
            .any(|p| p == "Sending dematerialised instructions"),
        "page 2"
    );
    let standing = firm.standing.clone().expect("a credit institution");
    assert_eq!(standing.category, Category::CreditInstitution);
    assert_eq!(standing.status, AuthStatus::Authorised);
    assert_eq!(firm.services, ServiceSet::ALL);
    assert_eq!(firm.passports.len(), 1);
    assert_eq!(firm.passports[0].country, "GIBRALTAR");
    assert_eq!(firm.passports[0].direction, FcaPassportDirection::Out);
    let entity = lookup.answer.to_entity().expect("found");
    assert_eq!(entity.reference, "765112");
    assert_eq!(entity.entries[0].legal_name, "HSBC UK Bank plc");
    assert_eq!(entity.entries[0].passport_out, None);
}

#[tokio::test]
async fn barclays_pages_are_followed_and_a_page_missing_from_the_recording_fails_the_lookup() {
    let (replay, clock) = started().await;
    let fca = register(config(replay.base()), &clock);
    let error = fca
        .lookup_reference("122702")
        .await
        .expect_err("page 2 not recorded");
    assert_eq!(
        error,
        FcaError::Fetch {
            endpoint: FcaEndpoint::Permissions,
            source: FetchError::Status(404)
        }
    );
    assert_eq!(
        replay.targets(),
        vec![
            "/Firm/122702",
            "/Firm/122702/Permissions?pgnp=1",
            "/Firm/122702/Permissions?pgnp=2"
        ],
        "no partial answer from page 1 alone"
    );
}

#[tokio::test]
async fn an_frn_not_in_the_register_is_a_definite_answer_and_is_cached() {
    let (replay, clock) = started().await;
    replay.route("/Firm/999999", not_found());
    let fca = register(config(replay.base()), &clock);
    let lookup = fca.lookup_reference("999999").await.expect("an answer");
    assert_eq!(
        *lookup.answer,
        FcaAnswer::NotFound {
            frn: "999999".into()
        }
    );
    assert_eq!(lookup.answer.to_entity(), None);
    let again = fca.lookup_reference("999999").await.expect("cached");
    assert_eq!(again.answer, lookup.answer);
    assert_eq!(replay.targets(), vec!["/Firm/999999"]);
}

#[tokio::test]
async fn a_second_lookup_is_served_from_the_cache_without_a_request() {
    let (replay, clock) = started().await;
    let fca = register(config(replay.base()), &clock);
    fca.lookup_reference("552016").await.expect("answer");
    assert_eq!(replay.count(), 3);
    clock.advance(Duration::from_secs(59 * 60));
    let cached = fca.lookup_reference("552016").await.expect("cached");
    assert_eq!(cached.freshness, FcaFreshness::Fresh);
    assert_eq!(cached.age, Duration::from_secs(59 * 60));
    assert_eq!(replay.count(), 3, "no request for a cached answer");
    clock.advance(Duration::from_secs(61));
    fca.lookup_reference("552016").await.expect("refreshed");
    assert_eq!(
        replay.count(),
        6,
        "past the 1 h ttl the register is asked again"
    );
}

#[tokio::test]
async fn concurrent_lookups_of_one_frn_share_one_load() {
    let (replay, clock) = started().await;
    // The firm answer is held until its request has arrived; every lookup has started by
    // then (join! polls the lookups first).
    let gate = Gate::new();
    let firm = synthetic_firm("765112", "HSBC UK Bank plc").held_by(&gate);
    replay.route("/Firm/765112", firm);
    let fca = register(config(replay.base()), &clock);
    let lookups = (0..8).map(|_| fca.lookup_reference("765112"));
    let release = async {
        until("the firm request arrived", Duration::from_secs(10), || {
            replay.targets().iter().any(|t| t == "/Firm/765112")
        })
        .await;
        gate.open();
    };
    let (results, ()) = tokio::join!(futures_util::future::join_all(lookups), release);
    for r in &results {
        assert!(r.as_ref().expect("answer").answer.firm().is_some());
    }
    assert_eq!(
        replay.count(),
        4,
        "firm, two permission pages, passports: once"
    );
}

#[tokio::test]
async fn refused_credentials_fail_closed_with_a_configuration_message_and_no_stale_answer() {
    let (replay, clock) = started().await;
    let fca = register(config(replay.base()), &clock);
    fca.lookup_reference("552016").await.expect("answer");
    clock.advance(Duration::from_secs(2 * 3600));
    // The FCA's documented answer to a bad key (FCA code table).
    replay.route(
        "/Firm/552016",
        Route::json(json!({
            "Status": "FSR-API-01-01-11", "ResultInfo": null, "Data": null,
            "Message": "Unauthorised: Please include a valid API key and Email address"
        })),
    );
    let error = fca.lookup_reference("552016").await.expect_err("refused");
    assert!(matches!(error, FcaError::Unauthorised { .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("configuration error"), "{text}");
    assert!(text.contains("FSR-API-01-01-11"), "{text}");
    assert!(!text.contains(KEY));
    assert!(
        !error.allows_stale(),
        "a configuration error is not hidden by old answers"
    );
}

#[tokio::test]
async fn http_429_is_a_rate_limit_and_no_request_is_sent_until_the_block_ends() {
    let (replay, clock) = started().await;
    replay.route("/Firm/999999", not_found());
    let fca = register(config(replay.base()), &clock);
    replay.set_mode(Mode::Status(429));
    let error = fca.lookup_reference("552016").await.expect_err("429");
    assert_eq!(error, FcaError::RateLimited(FcaRateLimit::Upstream));
    assert_eq!(replay.count(), 1);
    replay.set_mode(Mode::Replay);
    let error = fca.lookup_reference("999999").await.expect_err("blocked");
    assert!(
        matches!(error, FcaError::RateLimited(FcaRateLimit::Blocked { .. })),
        "{error:?}"
    );
    assert_eq!(replay.count(), 1, "nothing sent while the key is blocked");
    clock.advance(Duration::from_secs(61));
    fca.lookup_reference("999999")
        .await
        .expect("after the block");
    assert_eq!(replay.count(), 2);
}

/// On tokio's paused clock: the register never answers, and the 2 s limit passes without
/// being waited for.
#[tokio::test(start_paused = true)]
async fn a_slow_register_times_out_within_the_request_limit() {
    let (replay, clock) = started().await;
    let never = Gate::new();
    replay.route(
        "/Firm/552016",
        synthetic_firm("552016", "Slow").held_by(&never),
    );
    let fca = register(config(replay.base()), &clock);
    // A bound on the failure: the lookup ends by itself, at its limit, before 3 s.
    let error = tokio::time::timeout(Duration::from_secs(3), fca.lookup_reference("552016"))
        .await
        .expect("the lookup ended at its own limit")
        .expect_err("too slow");
    assert_eq!(
        error,
        FcaError::Fetch {
            endpoint: FcaEndpoint::Firm,
            source: FetchError::Timeout(Duration::from_secs(2))
        }
    );
}

#[tokio::test]
async fn malformed_json_is_an_error_not_a_panic() {
    let (replay, clock) = started().await;
    replay.route(
        "/Firm/552016",
        Route::raw(200, r#"{"Status":"FSR-API-02-01-00","Data":[{"FRN":"#),
    );
    replay.route(
        "/Firm/1",
        Route::raw(200, "<html>Service Unavailable</html>"),
    );
    let fca = register(config(replay.base()), &clock);
    for frn in ["552016", "1"] {
        let error = fca.lookup_reference(frn).await.expect_err("malformed");
        assert!(
            matches!(
                error,
                FcaError::Malformed {
                    endpoint: FcaEndpoint::Firm,
                    ..
                }
            ),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn answers_of_the_wrong_shape_are_errors() {
    let (replay, clock) = started().await;
    let ok = |data: Value| {
        Route::json(json!({"Status": "FSR-API-02-01-00", "Message": "Ok", "Data": data}))
    };
    replay.route("/Firm/11", ok(json!({"FRN": "11"})));
    replay.route("/Firm/12", ok(json!([])));
    // The record of another firm: never taken for the one asked for.
    replay.route("/Firm/13", synthetic_firm("552016", "Somebody Else"));
    // A status code of another endpoint.
    replay.route(
        "/Firm/14",
        Route::json(json!({"Status": "FSR-API-02-03-00", "Data": {}})),
    );
    replay.route("/Firm/15", Route::json(json!({"Status": "Ok", "Data": []})));
    replay.route("/Firm/16", synthetic_firm("16", "Sixteen"));
    replay.route(
        "/Firm/16/Permissions?pgnp=1",
        Route::json(json!({"Status": "FSR-API-02-03-00", "Data": ["a list"],
            "ResultInfo": {"page": "1", "per_page": "20", "total_count": "1"}})),
    );
    replay.route("/Firm/17", synthetic_firm("17", "Seventeen"));
    replay.route(
        "/Firm/17/Permissions?pgnp=1",
        Route::json(json!({"Status": "FSR-API-02-03-00", "Data": {}})),
    );
    let fca = register(config(replay.base()), &clock);
    for (frn, endpoint) in [
        ("11", FcaEndpoint::Firm),
        ("12", FcaEndpoint::Firm),
        ("13", FcaEndpoint::Firm),
        ("15", FcaEndpoint::Firm),
        ("16", FcaEndpoint::Permissions),
        ("17", FcaEndpoint::Permissions),
    ] {
        let error = fca.lookup_reference(frn).await.expect_err("wrong shape");
        assert!(
            matches!(&error, FcaError::Shape { endpoint: e, .. } if *e == endpoint),
            "{frn}: {error:?}"
        );
    }
    let error = fca
        .lookup_reference("14")
        .await
        .expect_err("wrong endpoint");
    assert!(matches!(error, FcaError::Status { .. }), "{error:?}");
}

#[tokio::test]
async fn the_next_url_in_an_answer_is_never_followed() {
    let (replay, clock) = started().await;
    replay.route("/Firm/21", synthetic_firm("21", "Twenty-One"));
    replay.route(
        "/Firm/21/Permissions?pgnp=1",
        Route::json(json!({"Status": "FSR-API-02-03-00", "Message": "Ok",
            "ResultInfo": {"page": "1", "per_page": "1", "total_count": "2",
                "Next": "http://127.0.0.1:9/steal?key=please"},
            "Data": {"Payment initiation services": []}})),
    );
    replay.route(
        "/Firm/21/Permissions?pgnp=2",
        Route::json(json!({"Status": "FSR-API-02-03-00", "Message": "Ok",
            "ResultInfo": {"page": "2", "per_page": "1", "total_count": "2"},
            "Data": {"Account information services": []}})),
    );
    replay.route(
        "/Firm/21/Passports?pgnp=1",
        Route::json(json!({"Status": "FSR-API-02-07-11", "Data": null, "ResultInfo": null})),
    );
    let fca = register(config(replay.base()), &clock);
    let lookup = fca.lookup_reference("21").await.expect("answer");
    assert_eq!(firm_of(&lookup.answer).permissions.len(), 2);
    assert_eq!(
        replay.targets()[2],
        "/Firm/21/Permissions?pgnp=2",
        "page 2 from the configured base, not from `Next`"
    );
}

#[tokio::test]
async fn more_pages_than_the_cap_fail_the_lookup_without_reading_them() {
    let (replay, clock) = started().await;
    replay.route("/Firm/31", synthetic_firm("31", "Thirty-One"));
    replay.route(
        "/Firm/31/Permissions?pgnp=1",
        Route::json(json!({"Status": "FSR-API-02-03-00",
            "ResultInfo": {"page": "1", "per_page": "20", "total_count": "100000"},
            "Data": {"Money remittance": []}})),
    );
    let fca = register(config(replay.base()), &clock);
    let error = fca
        .lookup_reference("31")
        .await
        .expect_err("too many pages");
    assert_eq!(
        error,
        FcaError::TooManyPages {
            endpoint: FcaEndpoint::Permissions,
            pages: 5_000,
            cap: 10
        }
    );
    assert_eq!(replay.count(), 2);
}

#[tokio::test]
async fn the_token_bucket_keeps_lookups_under_the_quota() {
    let (replay, clock) = started().await;
    let frns = ["41", "42", "43", "44", "45"];
    for frn in frns {
        replay.route(&format!("/Firm/{frn}"), not_found());
    }
    let mut c = config(replay.base());
    // A tiny quota: 4 requests per minute, and a lookup waits at most 50 ms for a token.
    c.quota = FcaQuota {
        requests: 4,
        period: Duration::from_secs(60),
    };
    c.max_token_wait = Duration::from_millis(50);
    let fca = register(c, &clock);
    let mut answered = 0;
    let mut limited = 0;
    for frn in frns {
        match fca.lookup_reference(frn).await {
            Ok(_) => answered += 1,
            Err(FcaError::RateLimited(FcaRateLimit::Local { .. })) => limited += 1,
            Err(other) => panic!("{frn}: {other:?}"),
        }
    }
    assert!(
        replay.count() <= 4,
        "{} requests for a quota of 4",
        replay.count()
    );
    assert_eq!(replay.count(), answered, "one request per not-found lookup");
    assert_eq!(
        answered, 2,
        "half the quota is the burst (at most 4 in any minute)"
    );
    assert_eq!(limited, 3);
}

#[tokio::test]
async fn a_stale_answer_stands_in_while_the_register_fails_but_not_beyond_max_stale() {
    let (replay, clock) = started().await;
    let mut c = config(replay.base());
    c.ttl = Duration::from_secs(60);
    c.max_stale = Duration::from_secs(300);
    let fca = register(c, &clock);
    let first = fca.lookup_reference("552016").await.expect("answer");
    assert!(!first.is_stale());
    assert_eq!(first.warning(), None);

    replay.set_mode(Mode::Status(503));
    clock.advance(Duration::from_secs(61));
    let stale = fca.lookup_reference("552016").await.expect("stale answer");
    assert!(stale.is_stale());
    assert_eq!(stale.answer, first.answer);
    assert_eq!(stale.age, Duration::from_secs(61));
    let FcaFreshness::Stale { error } = &stale.freshness else {
        panic!("stale")
    };
    assert_eq!(
        *error,
        FcaError::Fetch {
            endpoint: FcaEndpoint::Firm,
            source: FetchError::Status(503)
        }
    );
    let warning = stale.warning().expect("a warning for the home block");
    assert!(warning.contains("61 s"), "{warning}");
    assert_eq!(replay.count(), 4, "the register was asked again first");

    clock.advance(Duration::from_secs(240));
    let error = fca
        .lookup_reference("552016")
        .await
        .expect_err("older than max_stale");
    assert_eq!(
        error,
        FcaError::Fetch {
            endpoint: FcaEndpoint::Firm,
            source: FetchError::Status(503)
        }
    );

    replay.set_mode(Mode::Replay);
    let fresh = fca.lookup_reference("552016").await.expect("back");
    assert!(!fresh.is_stale());
    assert_eq!(fresh.age, Duration::ZERO);
}

#[tokio::test]
async fn an_unreachable_register_without_a_cached_answer_is_an_error() {
    // A port with nothing behind it: bound, then closed.
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    let clock = Arc::new(FcaManualClock::new());
    let fca = register(config(format!("http://{addr}{BASE_PATH}")), &clock);
    let error = fca
        .lookup_reference("552016")
        .await
        .expect_err("unreachable");
    assert!(
        matches!(
            error,
            FcaError::Fetch {
                endpoint: FcaEndpoint::Firm,
                source: FetchError::Transport(_)
            }
        ),
        "{error:?}"
    );
}

/// A log sink for the tracing subscriber of one test.
#[derive(Clone, Default)]
struct LogSink(Arc<Mutex<Vec<u8>>>);

impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn credentials_are_sent_as_headers_and_never_logged_or_shown() {
    let sink = LogSink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // The other tests of this binary run the same log call sites on their threads, with no
    // subscriber: recompute every site's interest now that this thread has one (else a site
    // first reached elsewhere can stay cached as "never").
    tracing::callsite::rebuild_interest_cache();

    let (replay, clock) = started().await;
    replay.route("/Firm/999999", not_found());
    let fca = register(config(replay.base()), &clock);
    fca.lookup_reference("552016").await.expect("answer");
    fca.lookup_reference("999999").await.expect("answer");
    // Failure paths log too.
    replay.route(
        "/Firm/1",
        Route::json(json!({"Status": "FSR-API-01-01-11", "Message": "Unauthorised", "Data": null})),
    );
    tracing::callsite::rebuild_interest_cache();
    let refused = fca.lookup_reference("1").await.expect_err("unauthorised");
    replay.set_mode(Mode::Status(429));
    let limited = fca.lookup_reference("2").await.expect_err("429");

    {
        let seen = replay.seen.lock().expect("lock");
        assert!(!seen.is_empty());
        for s in seen.iter() {
            assert_eq!(
                s.headers.get("x-auth-email").map(|v| v.as_bytes()),
                Some(EMAIL.as_bytes())
            );
            assert_eq!(
                s.headers.get("x-auth-key").map(|v| v.as_bytes()),
                Some(KEY.as_bytes())
            );
        }
    }
    let logs = String::from_utf8(sink.0.lock().expect("lock").clone()).expect("UTF-8");
    assert!(
        logs.contains("FCA register request"),
        "the requests are logged: {logs}"
    );
    assert!(logs.contains("refused the API credentials"), "{logs}");
    assert!(!logs.contains(KEY), "the key is in the logs");
    let shown = [
        format!("{fca:?}"),
        format!("{:?}", credentials()),
        format!("{:?}", config(replay.base())),
        format!("{refused} {refused:?}"),
        format!("{limited} {limited:?}"),
    ];
    for text in shown {
        assert!(!text.contains(KEY), "{text}");
    }
}

#[tokio::test]
async fn hostile_references_are_refused_before_any_request() {
    let (replay, clock) = started().await;
    let fca = register(config(replay.base()), &clock);
    let hostile = [
        "",
        "../552016",
        "552016/../../Firm/1",
        "552016/Permissions",
        "552016?pgnp=2",
        "552016#x",
        "552016%2F..",
        "%35%35%32%30%31%36",
        "552 016",
        " 552016",
        "552016\r\nx-auth-key: stolen",
        "12345678901",
        &"9".repeat(10_000),
        "+552016",
        "-1",
        "0x1F",
        "1e5",
        "５５２０１６",
        "552016\u{0}",
    ];
    for reference in hostile {
        let error = fca.lookup_reference(reference).await.expect_err("refused");
        assert!(
            matches!(error, FcaError::InvalidFrn(_)),
            "{reference:?}: {error:?}"
        );
        assert!(
            error.to_string().len() < 200,
            "the error does not echo a long input"
        );
        assert_eq!(
            frn_of(&format!("PSDGB-FCA-{reference}")),
            None,
            "{reference:?}"
        );
    }
    assert_eq!(frn_of("PSDGB-OB-Unknown0015800001HQQrZAAX"), None);
    assert_eq!(replay.count(), 0, "no request for any of them");
}

#[test]
fn the_fuzzing_entry_decodes_real_answers_as_the_adapter_does() {
    use psp_service::register::decode_answer_for_fuzzing;
    for (file, records) in [
        ("registers/fca/fca_552016_firm.json", 1),
        ("registers/fca/fca_765112_permissions_p1.json", 1),
        ("registers/fca/fca_765112_passports.json", 1),
    ] {
        // The recordings hold the API's body under `body`.
        let recording: serde_json::Value =
            serde_json::from_slice(&std::fs::read(common::data(file)).expect("recording"))
                .expect("JSON");
        let body = serde_json::to_vec(&recording["body"]).expect("body");
        assert!(
            decode_answer_for_fuzzing(&body) >= records,
            "{file}: no record decoder accepted it"
        );
    }
    assert_eq!(decode_answer_for_fuzzing(b"{\"Status\": \"nope\"}"), 0);
    assert_eq!(decode_answer_for_fuzzing(b"\xff"), 0);
}
