//! The UK FCA register consulted on demand by the check endpoint: a PSP whose certificate
//! names `PSDGB-FCA-<FRN>` gets its home block from the FCA API (a local replay server on
//! 127.0.0.1 in the recorded envelope shape); when the API cannot answer, the home block says
//! so and names no entry (the gateway then refuses: fail closed); a certificate whose issuer
//! is not approved never spends the API's quota.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::service::*;
use common::test_pki::{test_config, test_pki};
use http::{Method, Response, StatusCode};
use psp_server::{self as server, Body, Handler, Limits, full};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

const AUTH: &str = "Basic c2FuZGJveDpzYW5kYm94";
/// Same length as the sandbox PSP's `PSDXX-TEST-000015`, so its DER keeps its lengths.
const FCA_AUTH: &str = "PSDGB-FCA-7651120";
const UNKNOWN_AUTH: &str = "PSDGB-FCA-7651121";

struct Replay {
    addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    requests: Arc<AtomicUsize>,
    _stop: watch::Sender<bool>,
}

impl Replay {
    async fn start() -> Replay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let routes: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let requests = Arc::new(AtomicUsize::new(0));
        let (r, n) = (routes.clone(), requests.clone());
        let handler: Handler = Arc::new(move |req, _conn| {
            let (r, n) = (r.clone(), n.clone());
            Box::pin(async move {
                n.fetch_add(1, Ordering::SeqCst);
                let target = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_default();
                match r.lock().expect("lock").get(&target).cloned() {
                    Some(b) => Response::new(full(b)),
                    None => {
                        let mut resp: Response<Body> = Response::new(full("no route"));
                        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                        resp
                    }
                }
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
            requests,
            _stop: stop,
        }
    }
}

fn recorded(name: &str) -> Value {
    let v: Value = serde_json::from_slice(
        &std::fs::read(common::data(&format!("registers/fca/{name}"))).expect("recording"),
    )
    .expect("JSON");
    v["body"].clone()
}

/// FRN 7651120: the recorded firm record of 552016 made an authorised payment institution
/// with the PSRs 2017 permissions for payment initiation and account information (no PI or
/// EMI was recorded; the field names and envelope are the recorded ones).
fn routes_for_7651120() -> HashMap<String, Vec<u8>> {
    let mut firm = recorded("fca_552016_firm.json");
    let record = &mut firm["Data"][0];
    record["FRN"] = json!("7651120");
    record["Organisation Name"] = json!("SANDBOX FCA PAYMENTS LIMITED");
    record["PSD / EMD Status"] = json!("Authorised Payment Institution");
    let permissions = json!({
        "Status": "FSR-API-02-03-00",
        "ResultInfo": {"page": "1", "per_page": "20", "total_count": "2"},
        "Message": "Ok. Firm permissions found",
        "Data": {
            "Payment initiation services": [{"Limitation Not Found": ["Valid limitation not present"]}],
            "Account information services": [{"Limitation Not Found": ["Valid limitation not present"]}]
        }
    });
    let passports = recorded("fca_552016_passports.json");
    let base = "/services/V0.1/Firm/7651120";
    HashMap::from([
        (base.to_owned(), serde_json::to_vec(&firm).expect("json")),
        (
            format!("{base}/Permissions?pgnp=1"),
            serde_json::to_vec(&permissions).expect("json"),
        ),
        (
            format!("{base}/Passports?pgnp=1"),
            serde_json::to_vec(&passports).expect("json"),
        ),
    ])
}

/// The sandbox's ECDSA PSP certificate with its auth number replaced, re-signed by the
/// sandbox ECDSA QTSP (an approved issuer).
fn fca_psp_certificate(auth: &str) -> String {
    let pki = test_pki();
    let original = common::load_cert(&pki.psp("ecdsa")).der;
    let needle = b"PSDXX-TEST-000015";
    let at = original
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the sandbox auth number");
    let mut template = original.clone();
    template[at..at + needle.len()].copy_from_slice(auth.as_bytes());
    let issuer_key = rcgen::KeyPair::from_pem(
        &std::fs::read_to_string(pki.dir.join("ca/qtsp-ecdsa-issuing.key")).expect("CA key"),
    )
    .expect("CA key parses");
    let subject_key = common::forge::attacker_key();
    let der = common::forge::reissue(&template, &subject_key, &[], &issuer_key);
    STANDARD.encode(der)
}

async fn check(api: SocketAddr, eidas: &str) -> Value {
    let r = send(
        api,
        Method::GET,
        "/v1/psp/eidas?jurisdiction=GB",
        &[
            ("authorization", AUTH),
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("version", "latest"),
            ("eidas", eidas),
        ],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    r.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fca_psp_is_looked_up_on_demand_and_an_unreachable_register_fails_closed() {
    let replay = Replay::start().await;
    *replay.routes.lock().expect("lock") = routes_for_7651120();
    let key_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fca_gateway");
    std::fs::create_dir_all(&key_dir).expect("dir");
    let key_file = key_dir.join("fca.key");
    std::fs::write(&key_file, "test-key-not-a-secret\n").expect("write");
    let base = format!("http://{}/services/V0.1", replay.addr);
    let config = test_config(|t| {
        format!(
            "{t}\n[registers.fca]\nbase_url = \"{base}\"\nemail = \"ops@bank.example\"\nkey_file = \"{}\"\n",
            key_file.display()
        )
    });
    let running = start(config).await;
    let api = running.api.expect("api");

    let found = check(api, &fca_psp_certificate(FCA_AUTH)).await;
    assert_eq!(found["eIDAS"]["validity"]["validQTSP"], true, "{found:#}");
    let home = &found["homeRegister"];
    assert_eq!(home["ncaName"], "GB-FCA", "{found:#}");
    assert_eq!(
        home["categoryEntries"][0]["categoryName"],
        "Payment Institution"
    );
    assert_eq!(
        home["categoryEntries"][0]["pspLegalName"],
        "SANDBOX FCA PAYMENTS LIMITED"
    );
    assert_eq!(home["categoryEntries"][0]["pspAuthStatus"], "Authorised");
    assert_eq!(
        home["categoryEntries"][0]["pspPaymentServices"],
        json!([7, 8])
    );
    let asked = replay.requests.load(Ordering::SeqCst);
    assert_eq!(asked, 3, "firm, permissions, passports");

    // An FRN the replay does not serve: the API answers 503, no stale answer exists, so the
    // home block has no entry and says why.
    let unreachable = check(api, &fca_psp_certificate(UNKNOWN_AUTH)).await;
    let home = &unreachable["homeRegister"];
    assert_eq!(home["categoryEntries"], json!([]), "{unreachable:#}");
    assert!(
        home["warning"]
            .to_string()
            .contains("could not be consulted"),
        "{unreachable:#}"
    );

    // A forged certificate naming the same PSP and the approved issuer, signed by someone
    // else: the API is not asked, and the cached answer for that FRN is not shown either.
    let before = replay.requests.load(Ordering::SeqCst);
    let forged = {
        let original = common::load_cert(&test_pki().psp("ecdsa")).der;
        let needle = b"PSDXX-TEST-000015";
        let at = original
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("auth number");
        let mut template = original.clone();
        template[at..at + needle.len()].copy_from_slice(FCA_AUTH.as_bytes());
        let attacker = common::forge::attacker_key();
        STANDARD.encode(common::forge::reissue(&template, &attacker, &[], &attacker))
    };
    let refused = check(api, &forged).await;
    assert_eq!(
        refused["eIDAS"]["validity"]["validSignature"], false,
        "{refused:#}"
    );
    assert_eq!(
        refused["homeRegister"]["categoryEntries"],
        json!([]),
        "{refused:#}"
    );
    assert!(
        refused["homeRegister"]["warning"]
            .to_string()
            .contains("issuer is not approved or its signature does not verify"),
        "{refused:#}"
    );
    assert_eq!(
        replay.requests.load(Ordering::SeqCst),
        before,
        "no request for it"
    );
    running.stop().await;
}
