//! Signed evidence as callers and auditors meet it (issue 26 §1): the JWKS on the admin
//! listener, the check endpoint's `x-jws-signature` over every answer's body, the gateway's
//! decisions signed once and named by every request they decide, the signed decision
//! forwarded upstream on request, and `psp-gateway evidence verify`. Each signature is also
//! checked by jwcrypto (`scripts/evidence/verify.py`), which no one here wrote; each attack
//! (a tampered body, another key, `alg: none`, a forged header from the PSP) is refused.
//! Alone in its binary: it installs its own log capture.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::in_memory;
use common::log_capture::capture;
use common::test_pki::{test_config, test_pki};
use common::upstream;
use http::{Method, StatusCode};
use psp_gateway::app::EvidenceConfigError;
use psp_service::evidence::{
    Alg, Jwks, JwsError, PublicKey, SigningKey, verify_compact, verify_detached,
};
use serde_json::{Value, json};

const AUTH: &str = "Basic c2FuZGJveDpzYW5kYm94";

/// jwcrypto's verdict on `args` (`verify.py` modes): `Ok(stderr)` for `valid`, else the
/// reason it refused.
fn jwcrypto(args: &[&str]) -> Result<String, String> {
    common::evidence_py::verdict(args)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "psp-evidence-signing-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The test PKI's evidence key, as the configuration names it.
fn sandbox_key() -> SigningKey {
    SigningKey::from_pem_file(&test_pki().dir.join("evidence/sandbox-signing.key"))
        .expect("the sandbox evidence key")
}

fn sandbox_jwks() -> Jwks {
    Jwks::new([sandbox_key().public()])
}

/// `text` without its `[evidence]` section (its header and its `signing_key` line).
fn without_evidence(text: String) -> String {
    let start = text.find("[evidence]\n").expect("an [evidence] section");
    let key = start + text[start..].find("signing_key").expect("its signing_key");
    let end = key + text[key..].find('\n').expect("a line end") + 1;
    format!("{}{}", &text[..start], &text[end..])
}

fn b64_of(name: &str) -> String {
    let pem = std::fs::read(test_pki().psp(name)).expect("PSP certificate");
    let der = psp_cert::cert::PspCertificate::parse(&pem)
        .expect("parses")
        .der;
    STANDARD.encode(der)
}

#[tokio::test(flavor = "current_thread")]
async fn the_jwks_is_served_on_the_admin_listener_with_the_previous_keys_of_a_rotation() {
    let dir = scratch("jwks");
    let old = SigningKey::from_pem(&SigningKey::generate_pem(Alg::EdDsa)).expect("key");
    let old_pem = dir.join("old.pub.pem");
    std::fs::write(&old_pem, old.public().to_pem()).expect("write");
    let config = test_config(|t| {
        t.replace(
            "[evidence]\n",
            &format!(
                "[evidence]\nprevious_keys = [{{ path = \"{}\", retired = \"2026-11-01T00:00:00Z\" }}]\n",
                old_pem.display()
            ),
        )
    });
    let running = common::service::start(config).await;
    let admin = running.admin.expect("admin listener");
    let reply = common::service::send(admin, Method::GET, "/.well-known/jwks.json", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.headers["content-type"], "application/jwk-set+json",
        "RFC 7517 §8.5's media type"
    );
    let jwks = Jwks::from_json(std::str::from_utf8(&reply.body).expect("utf-8")).expect("a JWKS");
    let kids: Vec<String> = jwks.keys().iter().map(PublicKey::kid).collect();
    assert_eq!(
        kids,
        [sandbox_key().kid(), old.kid()],
        "signing key first, then the previous"
    );
    for key in reply.json()["keys"].as_array().expect("keys") {
        assert!(key.get("d").is_none(), "no private member: {key}");
    }
    // The previous key is published with the instant it was retired; the signing key without.
    let keys = reply.json()["keys"].clone();
    assert_eq!(keys[0].get("retired"), None, "{keys}");
    assert_eq!(keys[1]["retired"], "2026-11-01T00:00:00Z", "{keys}");
    assert_eq!(jwks.keys()[1].retired(), Some(1_793_491_200));

    // Without [evidence], nothing is published.
    let config = test_config(without_evidence);
    let running = common::service::start(config).await;
    let reply = common::service::send(
        running.admin.expect("admin"),
        Method::GET,
        "/.well-known/jwks.json",
        &[],
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

/// (what, request headers, the status expected)
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, StatusCode);

#[tokio::test(flavor = "current_thread")]
async fn every_answer_of_the_endpoint_is_signed_over_its_exact_body() {
    let dir = scratch("answers");
    let faces = in_memory::faces(&test_config(|t| t));
    let jwks = sandbox_jwks();
    let jwks_file = dir.join("jwks.json");
    std::fs::write(&jwks_file, jwks.to_json()).expect("write");
    let valid = b64_of("valid");
    let q = "/v1/psp/eidas?jurisdiction=XX";
    let cases: Vec<Case> = vec![
        (
            "an answer",
            vec![
                ("authorization", AUTH),
                ("fi_reference_id", "PSDXX-TEST-999999"),
                ("eidas", &valid),
            ],
            StatusCode::OK,
        ),
        (
            "a missing parameter",
            vec![("authorization", AUTH), ("eidas", &valid)],
            StatusCode::NOT_FOUND,
        ),
        (
            "no credentials",
            vec![("fi_reference_id", "x"), ("eidas", &valid)],
            StatusCode::UNAUTHORIZED,
        ),
    ];
    for (what, headers, status) in cases {
        let reply = in_memory::api(&faces, Method::GET, q, &headers).await;
        assert_eq!(reply.status, status, "{what}");
        let jws = reply.headers["x-jws-signature"]
            .to_str()
            .expect("ascii")
            .to_owned();
        let verified = verify_detached(&jwks, &jws, &reply.body).expect(what);
        assert_eq!(verified.kid, sandbox_key().kid());
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        assert!((now - verified.iat).abs() < 60, "{what}: iat is now");
        // The contract's body is untouched: still the JSON the contract defines.
        let body = reply.json();
        assert!(
            body.get("eIDAS").is_some() || body.get("errors").is_some(),
            "{what}: {body}"
        );

        let payload = dir.join("payload");
        std::fs::write(&payload, &reply.body).expect("write");
        let args = [
            "jws",
            jwks_file.to_str().expect("path"),
            payload.to_str().expect("path"),
            &jws,
        ];
        jwcrypto(&args).unwrap_or_else(|e| panic!("{what}: jwcrypto refused: {e}"));

        // One byte changed in the body: refused by both.
        let mut tampered = reply.body.to_vec();
        let at = tampered.iter().position(|&b| b == b':').expect("a colon");
        tampered.insert(at + 1, b' ');
        assert!(matches!(
            verify_detached(&jwks, &jws, &tampered),
            Err(JwsError::BadSignature { .. })
        ));
        std::fs::write(&payload, &tampered).expect("write");
        let why = jwcrypto(&args).expect_err("jwcrypto refuses a tampered body");
        assert!(why.contains("Verification failed"), "{what}: {why}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn evidence_verify_accepts_a_signed_answer_and_refuses_a_tampered_one_or_another_key() {
    let dir = scratch("cli");
    let faces = in_memory::faces(&test_config(|t| t));
    let valid = b64_of("valid");
    let reply = in_memory::api(
        &faces,
        Method::GET,
        "/v1/psp/eidas?jurisdiction=XX",
        &[
            ("authorization", AUTH),
            ("fi_reference_id", "PSDXX-TEST-999999"),
            ("eidas", &valid),
        ],
    )
    .await;
    let jws = reply.headers["x-jws-signature"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let body = dir.join("body.json");
    std::fs::write(&body, &reply.body).expect("write");
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, sandbox_jwks().to_json()).expect("write");
    let other = dir.join("other.json");
    let stranger = SigningKey::from_pem(&SigningKey::generate_pem(Alg::Es256)).expect("key");
    std::fs::write(&other, Jwks::new([stranger.public()]).to_json()).expect("write");
    let run = |jwks: &Path, body: &Path| {
        Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(["evidence", "verify", "--jwks"])
            .arg(jwks)
            .args(["--signature", &jws, "--body"])
            .arg(body)
            .output()
            .expect("run")
    };
    let ok = run(&jwks, &body);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("signature verified: ES256"));

    let tampered = dir.join("tampered.json");
    std::fs::write(
        &tampered,
        String::from_utf8_lossy(&reply.body).replace("true", "false"),
    )
    .expect("write");
    let no = run(&jwks, &tampered);
    assert_eq!(no.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&no.stderr).contains("does not verify"));

    let wrong_key = run(&other, &body);
    assert_eq!(wrong_key.status.code(), Some(65));
    assert!(
        String::from_utf8_lossy(&wrong_key.stderr).contains("is not a key of the JWK set"),
        "{}",
        String::from_utf8_lossy(&wrong_key.stderr)
    );

    // The signature says which question it answers (issue 38 finding 7): the certificate,
    // the jurisdiction, the reference and the caller, in the protected header.
    let verified = psp_service::evidence::verify_detached(&sandbox_jwks(), &jws, &reply.body)
        .expect("verifies");
    let question = verified.question.expect("a question");
    let valid_der = STANDARD.decode(&valid).expect("base64");
    assert_eq!(
        question["certSha256"],
        psp_cert::hex::lower(&psp_cert::hex::sha256(&valid_der))
    );
    assert_eq!(question["jurisdiction"], "XX");
    assert_eq!(question["fiReferenceId"], "PSDXX-TEST-999999");
    assert_eq!(question["caller"], "sandbox");
    let asked = |extra: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(["evidence", "verify", "--jwks"])
            .arg(&jwks)
            .args(["--signature", &jws, "--body"])
            .arg(&body)
            .args(extra)
            .output()
            .expect("run")
    };
    let valid_pem = test_pki().psp("valid");
    let revoked_pem = test_pki().psp("revoked");
    let right = asked(&[
        "--cert".as_ref(),
        valid_pem.as_os_str(),
        "--jurisdiction".as_ref(),
        "XX".as_ref(),
        "--fi-reference-id".as_ref(),
        "PSDXX-TEST-999999".as_ref(),
    ]);
    assert_eq!(
        right.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&right.stderr)
    );
    // The same answer presented as the answer about another certificate, or another
    // reference: refused, naming what differs.
    for (flag, value, says) in [
        ("--cert", revoked_pem.as_os_str(), "certSha256"),
        ("--fi-reference-id", "R-OTHER".as_ref(), "fiReferenceId"),
        ("--jurisdiction", "XY".as_ref(), "jurisdiction"),
    ] {
        let wrong = asked(&[flag.as_ref(), value]);
        assert_eq!(wrong.status.code(), Some(65), "{flag}");
        let err = String::from_utf8_lossy(&wrong.stderr);
        assert!(
            err.contains("not for this question") && err.contains(says),
            "{err}"
        );
    }
}

/// The payload of a compact JWS, verified with the sandbox key.
fn decision_payload(jws: &str) -> Value {
    let (verified, payload) = verify_compact(&sandbox_jwks(), jws).expect("the decision verifies");
    assert_eq!(verified.kid, sandbox_key().kid());
    serde_json::from_slice(&payload).expect("JSON payload")
}

#[tokio::test(flavor = "current_thread")]
async fn a_decision_is_signed_once_and_every_request_it_decides_names_it() {
    let (captured, _guard) = capture();
    let dir = scratch("decisions");
    let up = upstream::start().await;
    let config = test_config(|t| {
        t.replace(
            "upstream = \"sandbox-echo\"",
            &format!("upstream = \"http://{}\"", up.addr),
        )
    });
    let config_sha256 = config.sha256.clone();
    let faces = in_memory::faces(&config);
    let send = |uri: &'static str, psp: &'static str| {
        let faces = &faces;
        async move {
            in_memory::gateway(
                faces,
                in_memory::chain_of(psp),
                in_memory::request("GET", uri),
            )
            .await
            .status
        }
    };
    assert_eq!(send("/v1/accounts", "valid").await, StatusCode::OK);
    assert_eq!(send("/v1/accounts/123", "valid").await, StatusCode::OK);
    assert_eq!(
        captured.count("gateway decision signed"),
        1,
        "two requests on one route are one decision"
    );
    // Another route is another decision; so is a refusal.
    assert_eq!(send("/v1/payments/sepa", "valid").await, StatusCode::OK);
    let refused = send("/v1/accounts", "unauthorised").await;
    assert_eq!(refused, StatusCode::FORBIDDEN);
    let signed = captured.lines("gateway decision signed");
    assert_eq!(signed.len(), 3, "{signed:#?}");
    let requests = captured.lines("gateway decision");
    assert_eq!(requests.len(), 4);

    let jwks_file = dir.join("jwks.json");
    std::fs::write(&jwks_file, sandbox_jwks().to_json()).expect("write");
    for s in &signed {
        let fields = &s["fields"];
        let jws = fields["decision_jws"].as_str().expect("jws");
        let id = fields["decision_id"].as_str().expect("id");
        let digest = psp_cert::hex::sha256(jws.as_bytes());
        assert_eq!(
            id,
            psp_cert::hex::lower(&digest[..16]),
            "the id is the JWS's hash"
        );
        // Every request of this decision names it.
        let named: Vec<&Value> = requests
            .iter()
            .filter(|r| r["fields"]["decision_id"] == id)
            .collect();
        assert!(!named.is_empty(), "no request names {id}");
        let payload = decision_payload(jws);
        assert_eq!(payload["site"], "default");
        assert_eq!(payload["jurisdiction"], "XX");
        assert_eq!(payload["decision"], fields["signed_decision"]);
        assert_eq!(
            payload["psp"]["certificateSha256"],
            named[0]["fields"]["fingerprint"]
        );
        assert_eq!(payload["data"]["configSha256"], config_sha256.as_str());
        assert_eq!(payload["data"]["reference"]["generation"], 1);
        assert!(
            payload["data"]["reference"]["registers"]
                .as_array()
                .is_some_and(|r| !r.is_empty()),
            "the register files it was made on: {payload}"
        );
        assert!(
            payload["data"]["revocation"]
                .as_str()
                .is_some_and(|r| r.contains("CRL") || r.contains("OCSP")),
            "the revocation evidence: {payload}"
        );
        // jwcrypto agrees, and prints the same payload.
        let printed = jwcrypto(&["compact", jwks_file.to_str().expect("path"), jws])
            .unwrap_or_else(|e| panic!("jwcrypto refused a decision: {e}"));
        let printed: Value = serde_json::from_str(printed.trim()).expect("payload");
        assert_eq!(printed, payload);
    }
    let routes: Vec<&Value> = signed.iter().map(|s| &s["fields"]["route"]).collect();
    assert_eq!(
        routes,
        [
            &json!("/v1/accounts"),
            &json!("/v1/payments"),
            &json!("/v1/accounts")
        ]
    );
    let refusal = decision_payload(signed[2]["fields"]["decision_jws"].as_str().expect("jws"));
    assert_eq!(refusal["decision"], "refuse");
    assert!(refusal["reason"].is_string(), "{refusal}");
}

#[test]
fn a_decision_token_from_another_key_with_alg_none_or_a_swapped_payload_is_refused() {
    let dir = scratch("attacks");
    let jwks_file = dir.join("jwks.json");
    std::fs::write(&jwks_file, sandbox_jwks().to_json()).expect("write");
    let key = sandbox_key();
    let genuine = psp_service::evidence::sign_compact(
        &key,
        psp_service::evidence::DECISION_TYPE,
        br#"{"decision":"refuse"}"#,
        1_764_000_000,
    );
    assert!(verify_compact(&sandbox_jwks(), &genuine).is_ok());
    let parts: Vec<&str> = genuine.split('.').collect();

    // The payload swapped for a permit, the signature kept.
    let swapped = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(br#"{"decision":"permit"}"#),
        parts[2]
    );
    // alg: none, no signature.
    let header = json!({"alg": "none", "kid": key.kid(), "typ": "psp-decision+json", "iat": 1});
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        parts[1]
    );
    // Signed by a key the JWKS does not hold, under the sandbox key's kid.
    let stranger = SigningKey::from_pem(&SigningKey::generate_pem(Alg::Es256)).expect("key");
    let forged = psp_service::evidence::sign_compact(
        &stranger,
        psp_service::evidence::DECISION_TYPE,
        br#"{"decision":"permit"}"#,
        1,
    );
    let forged_parts: Vec<&str> = forged.split('.').collect();
    let forged_kid = format!("{}.{}.{}", parts[0], forged_parts[1], forged_parts[2]);

    for (what, token, ours) in [
        ("swapped payload", &swapped, "does not verify"),
        ("alg none", &none, "`none`"),
        ("another key under our kid", &forged_kid, "does not verify"),
        ("another key", &forged, "is not a key of the JWK set"),
    ] {
        let e = verify_compact(&sandbox_jwks(), token).expect_err(what);
        assert!(e.to_string().contains(ours), "{what}: {e}");
        jwcrypto(&["compact", jwks_file.to_str().expect("path"), token])
            .expect_err(&format!("jwcrypto accepted {what}"));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_signed_decision_goes_upstream_when_asked_and_a_psp_cannot_forge_it() {
    let up = upstream::start().await;
    for forward in [true, false] {
        let faces = in_memory::faces(&test_config(|t| {
            t.replace(
                "upstream = \"sandbox-echo\"",
                &format!("upstream = \"http://{}\"", up.addr),
            )
            .replace(
                "[evidence]\n",
                &format!("[evidence]\nforward_signature = {forward}\n"),
            )
        }));
        let mut request = in_memory::request("GET", "/v1/accounts");
        // The PSP sends its own "signed decision", in two spellings.
        request.headers_mut().append(
            "x-psp-decision-jws",
            "eyJhbGciOiJub25lIn0.eyJkZWNpc2lvbiI6InBlcm1pdCJ9."
                .parse()
                .expect("value"),
        );
        request
            .headers_mut()
            .append("X-PSP-Decision-JWS", "forged".parse().expect("value"));
        // The spelling a WSGI or CGI upstream reads as the same header.
        request
            .headers_mut()
            .append("x_psp_decision_jws", "forged".parse().expect("value"));
        let answer = in_memory::gateway(&faces, in_memory::chain_of("valid"), request).await;
        assert_eq!(answer.status, StatusCode::OK);
        let received = up
            .received
            .lock()
            .expect("lock")
            .last()
            .cloned()
            .expect("forwarded");
        let values: Vec<&str> = received
            .headers
            .get_all("x-psp-decision-jws")
            .iter()
            .map(|v| v.to_str().expect("ascii"))
            .collect();
        assert!(
            received.headers.get("x_psp_decision_jws").is_none(),
            "the underscore spelling never reaches the upstream"
        );
        if forward {
            assert_eq!(values.len(), 1, "exactly the gateway's own: {values:?}");
            let payload = decision_payload(values[0]);
            assert_eq!(payload["decision"], "permit");
            assert_eq!(payload["route"]["prefix"], "/v1/accounts");
        } else {
            assert!(
                values.is_empty(),
                "nothing forwarded, the PSP's own removed: {values:?}"
            );
        }
    }
}

#[test]
fn evidence_settings_that_cannot_sign_are_refused_by_name() {
    let dir = scratch("config");
    let root = common::root();
    let base = std::fs::read_to_string(root.join("gateway.toml"))
        .expect("gateway.toml")
        .replace("\"certs/", &format!("\"{}/certs/", root.display()))
        .replace("\"registers/", &format!("\"{}/registers/", root.display()));
    let check = |name: &str, text: String| {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, text).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
            .args(["config", "check", "--config"])
            .arg(&path)
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let missing = base.replace(
        "certs/evidence/sandbox-signing.key",
        "certs/evidence/no-such.key",
    );
    let (code, err) = check("missing", missing);
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("no-such.key"), "{err}");

    // An RSA key (the sandbox root CA's, PKCS#8): named as what it is.
    let rsa = base.replace(
        "certs/evidence/sandbox-signing.key",
        "certs/ca/qtsp-root.key",
    );
    let (code, err) = check("rsa", rsa);
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("RSA"), "{err}");

    // Checkpoints with nothing to sign them.
    let unsigned = without_evidence(base.clone())
        + "\n[audit]\nfile = \"/tmp/a.jsonl\"\ncheckpoints = \"/tmp/c.jsonl\"\n";
    let (code, err) = check("unsigned", unsigned);
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("audit.checkpoints needs [evidence] signing_key"),
        "{err}"
    );

    let origin = base.clone() + "\n[audit]\nfile = \"/tmp/a.jsonl\"\norigin = \"two words\"\n";
    let (code, err) = check("origin", origin);
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("audit.origin `two words`"), "{err}");
}

#[test]
fn a_previous_key_retired_in_the_future_listed_twice_or_still_signing_is_refused() {
    let dir = scratch("previous-keys");
    let old = SigningKey::from_pem(&SigningKey::generate_pem(Alg::EdDsa)).expect("key");
    let old_pem = dir.join("old.pub.pem");
    std::fs::write(&old_pem, old.public().to_pem()).expect("write");
    let current_pem = dir.join("current.pub.pem");
    std::fs::write(&current_pem, sandbox_key().public().to_pem()).expect("write");
    let refused = |entries: String| {
        let config = test_config(|t| {
            t.replace(
                "[evidence]\n",
                &format!("[evidence]\nprevious_keys = [{entries}]\n"),
            )
        });
        let evidence = config.evidence.as_ref().expect("[evidence]");
        psp_gateway::app::previous_keys(&config, evidence).expect_err("refused")
    };
    let entry = |path: &Path, retired: &str| {
        format!(
            "{{ path = \"{}\", retired = \"{retired}\" }}",
            path.display()
        )
    };
    let e = refused(entry(&old_pem, "2999-01-01T00:00:00Z"));
    assert!(
        matches!(e, EvidenceConfigError::RetiredInTheFuture { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("is in the future"), "{e}");
    let e = refused(format!(
        "{}, {}",
        entry(&old_pem, "2026-11-01T00:00:00Z"),
        entry(&old_pem, "2026-10-01T00:00:00Z")
    ));
    assert!(matches!(e, EvidenceConfigError::ListedTwice { .. }), "{e}");
    let e = refused(entry(&current_pem, "2026-11-01T00:00:00Z"));
    assert!(
        matches!(e, EvidenceConfigError::SigningKeyRetired { .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("this is the signing key's public key"),
        "{e}"
    );
}
