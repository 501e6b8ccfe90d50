//! The evidence signatures checked by verifiers no one here wrote: detached JWS with an
//! unencoded payload by jwcrypto, signed notes by pyca/cryptography alone
//! (`scripts/evidence/verify.py`, pinned in `scripts/evidence/requirements.txt`, installed by
//! scripts/test into `target/evidence-venv`).
//!
//! Each "it verifies" is next to the attacks on it (a tampered payload, another key, `alg:
//! none`, algorithm substitution, a forged kid), and each attack must be refused by both
//! verifiers, for the reason the test names: a verifier that says no for the wrong reason
//! would hide a bug behind a passing test.

mod common;

use std::ffi::OsStr;
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use psp_service::evidence::{
    Alg, JwkError, Jwks, JwsError, JwsVerified, NoteError, PublicKey, SigningKey, note_sign,
    note_verify, sign_detached, verify_detached,
};
use serde_json::{Value, json};

/// A fixed signing time: 2025-11-24T16:00:00Z.
const IAT: i64 = 1_764_000_000;

const NOTE_NAME: &str = "psp-gateway.example/evidence";

/// A directory of its own for one test's files, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("psp-evidence-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).expect("write a scratch file");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// verify.py's verdict: `Ok` for `valid`, `Err(why)` for `refused: why`.
fn verify_py(args: &[&OsStr]) -> Result<(), String> {
    common::evidence_py::verdict(args).map(drop)
}

/// jwcrypto's verdict on `jws` over `payload` with `jwks_json`.
fn jwcrypto(scratch: &Scratch, jwks_json: &str, payload: &[u8], jws: &str) -> Result<(), String> {
    let jwks = scratch.write("jwks.json", jwks_json.as_bytes());
    let payload = scratch.write("payload", payload);
    verify_py(&[
        "jws".as_ref(),
        jwks.as_os_str(),
        payload.as_os_str(),
        jws.as_ref(),
    ])
}

/// pyca/cryptography's verdict on `note` for `public` under `name`.
fn cryptography(
    scratch: &Scratch,
    public: &PublicKey,
    name: &str,
    note: &str,
) -> Result<(), String> {
    let pem = scratch.write("key.pem", public.to_pem().as_bytes());
    let note = scratch.write("note", note.as_bytes());
    verify_py(&[
        "note".as_ref(),
        pem.as_os_str(),
        name.as_ref(),
        note.as_os_str(),
    ])
}

fn key(alg: Alg) -> SigningKey {
    SigningKey::from_pem(&SigningKey::generate_pem(alg)).expect("a generated key loads")
}

/// A detached JWS of any `header` and `signature`.
fn hand_built(header: &Value, signature: &[u8]) -> String {
    format!(
        "{}..{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

/// The RFC 7797 signing input of `header` over `payload`.
fn signing_input(header: &Value, payload: &[u8]) -> Vec<u8> {
    [
        URL_SAFE_NO_PAD.encode(header.to_string()).as_bytes(),
        b".",
        payload,
    ]
    .concat()
}

fn header(alg: &str, kid: &str) -> Value {
    json!({"alg": alg, "kid": kid, "b64": false, "crit": ["b64"], "iat": IAT})
}

/// jwcrypto's log line for key `kid` found but its signature not verifying.
fn signature_failed(kid: &str) -> String {
    format!("Key [{kid}] failed: [InvalidJWSSignature('Verification failed')]")
}

/// jwcrypto's log line for key `kid` found but the header's alg not allowed (verify.py
/// allows ES256 and EdDSA only).
fn alg_not_allowed(kid: &str) -> String {
    format!("Key [{kid}] failed: [InvalidJWSOperation('Algorithm not allowed')]")
}

/// Raw bytes, dots and a newline: an unencoded payload must survive all of them.
const PAYLOAD: &[u8] = b"{\"psp\":\"PSDGB-FCA-123456\",\"decision\":\"allow\"}\n.\xff\x00";

#[test]
fn detached_jws_of_both_algorithms_verify_with_jwcrypto() {
    let scratch = Scratch::new("jws-valid");
    let (es, ed) = (key(Alg::Es256), key(Alg::EdDsa));
    // A published set in rotation: both keys, each found by its kid. verify.py also checks
    // that every kid is jwcrypto's RFC 7638 thumbprint, which cross-checks ours for EC.
    let jwks = Jwks::new([es.public(), ed.public()]);
    for signer in [&es, &ed] {
        let jws = sign_detached(signer, PAYLOAD, IAT, None);
        assert_eq!(
            verify_detached(&jwks, &jws, PAYLOAD),
            Ok(JwsVerified {
                kid: signer.kid(),
                alg: signer.alg(),
                iat: IAT,
                question: None,
            })
        );
        assert_eq!(
            jwcrypto(&scratch, &jwks.to_json(), PAYLOAD, &jws),
            Ok(()),
            "{}",
            signer.alg()
        );
    }
}

#[test]
fn a_tampered_payload_is_refused_by_both() {
    let scratch = Scratch::new("jws-tampered");
    for alg in [Alg::Es256, Alg::EdDsa] {
        let signer = key(alg);
        let jwks = Jwks::new([signer.public()]);
        let jws = sign_detached(&signer, PAYLOAD, IAT, None);
        let tampered = b"{\"psp\":\"PSDGB-FCA-123456\",\"decision\":\"deny\"}\n.\xff\x00";
        assert_eq!(
            verify_detached(&jwks, &jws, tampered),
            Err(JwsError::BadSignature { kid: signer.kid() })
        );
        let why = jwcrypto(&scratch, &jwks.to_json(), tampered, &jws).unwrap_err();
        assert!(
            why.contains(&signature_failed(&signer.kid())),
            "{alg}: {why}"
        );
    }
}

#[test]
fn a_jws_checked_against_another_keys_jwks_is_refused_by_both() {
    let scratch = Scratch::new("jws-wrong-key");
    for alg in [Alg::Es256, Alg::EdDsa] {
        let (signer, other) = (key(alg), key(alg));
        let jwks = Jwks::new([other.public()]);
        let jws = sign_detached(&signer, PAYLOAD, IAT, None);
        assert_eq!(
            verify_detached(&jwks, &jws, PAYLOAD),
            Err(JwsError::KidUnknown { kid: signer.kid() })
        );
        let why = jwcrypto(&scratch, &jwks.to_json(), PAYLOAD, &jws).unwrap_err();
        assert!(
            why.contains(&format!("Key ID {} not in key set", signer.kid())),
            "{alg}: {why}"
        );
    }
}

#[test]
fn a_jwks_whose_kid_is_not_the_thumbprint_is_refused_by_both() {
    // Someone who can edit the published set points the signer's kid at their own key.
    let scratch = Scratch::new("jws-forged-kid");
    let (signer, attacker) = (key(Alg::EdDsa), key(Alg::EdDsa));
    let mut jwk = attacker.public().to_jwk();
    jwk["kid"] = json!(signer.kid());
    let forged_set = json!({"keys": [jwk]}).to_string();
    assert!(matches!(
        Jwks::from_json(&forged_set),
        Err(JwkError::KidMismatch { kid, .. }) if kid == signer.kid()
    ));
    // The attacker's signature under the signer's kid: jwcrypto alone would accept it with
    // the forged set, so verify.py checks every kid against jwcrypto's thumbprint.
    let claims = header("EdDSA", &signer.kid());
    let jws = hand_built(&claims, &attacker.sign(&signing_input(&claims, PAYLOAD)));
    let why = jwcrypto(&scratch, &forged_set, PAYLOAD, &jws).unwrap_err();
    assert!(why.contains("thumbprint"), "{why}");
}

#[test]
fn alg_none_is_refused_by_both() {
    let scratch = Scratch::new("jws-none");
    let signer = key(Alg::Es256);
    let jwks = Jwks::new([signer.public()]);
    let unsigned = hand_built(&header("none", &signer.kid()), b"");
    assert_eq!(
        verify_detached(&jwks, &unsigned, PAYLOAD),
        Err(JwsError::AlgNone)
    );
    let why = jwcrypto(&scratch, &jwks.to_json(), PAYLOAD, &unsigned).unwrap_err();
    assert!(why.contains(&alg_not_allowed(&signer.kid())), "{why}");
}

#[test]
fn algorithm_substitution_is_refused_by_both() {
    let scratch = Scratch::new("jws-alg-swap");
    let ed = key(Alg::EdDsa);
    let jwks = Jwks::new([ed.public()]);

    // A genuine Ed25519 signature under a header that claims ES256 for the Ed25519 key.
    let claims_es256 = header("ES256", &ed.kid());
    let swapped = hand_built(
        &claims_es256,
        &ed.sign(&signing_input(&claims_es256, PAYLOAD)),
    );
    assert_eq!(
        verify_detached(&jwks, &swapped, PAYLOAD),
        Err(JwsError::AlgMismatch {
            header: Alg::Es256,
            key: Alg::EdDsa,
            kid: ed.kid()
        })
    );
    // jwcrypto finds the key by kid and fails the Ed25519 signature under ES256.
    let why = jwcrypto(&scratch, &jwks.to_json(), PAYLOAD, &swapped).unwrap_err();
    assert!(why.contains(&signature_failed(&ed.kid())), "{why}");

    // The classic: HS256 keyed with the public key's bytes, which an attacker knows.
    let claims_hs256 = header("HS256", &ed.kid());
    let mac_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, ed.public().raw());
    let mac = ring::hmac::sign(&mac_key, &signing_input(&claims_hs256, PAYLOAD));
    let hs256 = hand_built(&claims_hs256, mac.as_ref());
    assert_eq!(
        verify_detached(&jwks, &hs256, PAYLOAD),
        Err(JwsError::AlgUnsupported {
            alg: "HS256".to_owned()
        })
    );
    let why = jwcrypto(&scratch, &jwks.to_json(), PAYLOAD, &hs256).unwrap_err();
    assert!(why.contains(&alg_not_allowed(&ed.kid())), "{why}");
}

#[test]
fn signed_notes_of_both_algorithms_verify_with_pyca_cryptography() {
    let scratch = Scratch::new("note-valid");
    let text = "psp-gateway.example/evidence\n7\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBrxhEcqd1K4uo+s=\n";
    for alg in [Alg::Es256, Alg::EdDsa] {
        let signer = key(alg);
        let note = note_sign(&signer, NOTE_NAME, text).unwrap();
        assert_eq!(
            note_verify(&note, NOTE_NAME, &signer.public()),
            Ok(text.to_owned())
        );
        assert_eq!(
            cryptography(&scratch, &signer.public(), NOTE_NAME, &note),
            Ok(()),
            "{alg}"
        );
    }
}

#[test]
fn a_tampered_note_and_a_note_checked_with_another_key_are_refused_by_both() {
    let scratch = Scratch::new("note-refused");
    let text = "psp-gateway.example/evidence\n7\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBrxhEcqd1K4uo+s=\n";
    for alg in [Alg::Es256, Alg::EdDsa] {
        let (signer, other) = (key(alg), key(alg));
        let note = note_sign(&signer, NOTE_NAME, text).unwrap();

        let tampered = note.replacen("\n7\n", "\n8\n", 1);
        assert!(matches!(
            note_verify(&tampered, NOTE_NAME, &signer.public()),
            Err(NoteError::BadSignature { .. })
        ));
        let why = cryptography(&scratch, &signer.public(), NOTE_NAME, &tampered).unwrap_err();
        assert!(why.contains("does not verify"), "{alg}: {why}");

        assert!(matches!(
            note_verify(&note, NOTE_NAME, &other.public()),
            Err(NoteError::NoSignatureFromKey { .. })
        ));
        let why = cryptography(&scratch, &other.public(), NOTE_NAME, &note).unwrap_err();
        assert!(why.contains("no signature from"), "{alg}: {why}");
    }
}

// ---------------------------------------------------------------------------------------
// Issue 38: the question an answer answers, and a retired key's life
// ---------------------------------------------------------------------------------------

#[test]
fn the_question_in_a_signed_answer_is_critical_and_checked_by_both() {
    let scratch = Scratch::new("question");
    let signer = key(Alg::Es256);
    let jwks = Jwks::new([signer.public()]);
    let mut question = serde_json::Map::new();
    question.insert("certSha256".into(), "ab".repeat(32).into());
    question.insert("jurisdiction".into(), "XX".into());
    question.insert("fiReferenceId".into(), "R1".into());
    let jws = sign_detached(&signer, PAYLOAD, IAT, Some(&question));
    let ours = verify_detached(&jwks, &jws, PAYLOAD).expect("ours");
    assert_eq!(ours.question.as_ref(), Some(&question));
    assert_eq!(jwcrypto(&scratch, &jwks.to_json(), PAYLOAD, &jws), Ok(()));
    // The question as asked: jwcrypto's header holds it; another question is refused.
    let jwks_file = scratch.write("q-jwks.json", jwks.to_json().as_bytes());
    let payload = scratch.write("q-payload", PAYLOAD);
    let check = |asked: &Value| {
        verify_py(&[
            "jws".as_ref(),
            jwks_file.as_os_str(),
            payload.as_os_str(),
            jws.as_ref(),
            asked.to_string().as_ref(),
        ])
    };
    assert_eq!(
        check(&json!({"certSha256": "ab".repeat(32), "jurisdiction": "XX"})),
        Ok(())
    );
    let why = check(&json!({"certSha256": "cd".repeat(32)})).unwrap_err();
    assert!(why.contains("the answer is about certSha256"), "{why}");
    // A question not marked critical is refused by both (a verifier that ignores it would
    // take the answer for any question).
    let mut header =
        json!({"alg": "ES256", "kid": signer.kid(), "b64": false, "crit": ["b64"], "iat": IAT});
    header["psp_question"] = Value::Object(question.clone());
    let not_critical = hand_built(&header, &signer.sign(&signing_input(&header, PAYLOAD)));
    assert_eq!(
        verify_detached(&jwks, &not_critical, PAYLOAD),
        Err(JwsError::QuestionMalformed)
    );
    let why = jwcrypto(&scratch, &jwks.to_json(), PAYLOAD, &not_critical).unwrap_err();
    assert!(why.contains("psp_question is not listed in crit"), "{why}");
}

#[test]
fn a_retired_key_is_held_to_its_life_by_both_verifiers() {
    let scratch = Scratch::new("retired");
    for alg in [Alg::Es256, Alg::EdDsa] {
        let old = key(alg);
        let published = Jwks::new([old.public().retired_at(IAT + 60)]);
        let json_set = published.to_json();
        assert!(
            json_set.contains("\"retired\":\"2025-11-24T16:01:00Z\""),
            "{json_set}"
        );
        // Signed before the retirement: both accept.
        let before = sign_detached(&old, PAYLOAD, IAT, None);
        assert!(verify_detached(&published, &before, PAYLOAD).is_ok());
        assert_eq!(jwcrypto(&scratch, &json_set, PAYLOAD, &before), Ok(()));
        // Dated after it (a stolen retired key, backdating nothing): both refuse.
        let after = sign_detached(&old, PAYLOAD, IAT + 30 * 86_400, None);
        assert!(matches!(
            verify_detached(&published, &after, PAYLOAD),
            Err(JwsError::Lifetime(_))
        ));
        let why = jwcrypto(&scratch, &json_set, PAYLOAD, &after).unwrap_err();
        assert!(why.contains("after key"), "{alg}: {why}");
        // A live key's signature from the future: both refuse.
        let live = Jwks::new([old.public()]);
        let future = sign_detached(&old, PAYLOAD, time_now() + 30 * 86_400, None);
        assert!(matches!(
            verify_detached(&live, &future, PAYLOAD),
            Err(JwsError::Lifetime(_))
        ));
        let why = jwcrypto(&scratch, &live.to_json(), PAYLOAD, &future).unwrap_err();
        assert!(why.contains("in the future"), "{alg}: {why}");

        // A checkpoint note dated after the retirement: both refuse; before: both accept.
        let note_at = |t: &str| {
            let text =
                format!("{NOTE_NAME}\n7\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBrxhEcqd1K4uo+s=\ntime {t}\n");
            note_sign(&old, NOTE_NAME, &text).expect("sign")
        };
        let retired_key = old.public().retired_at(IAT + 60);
        let early = note_at("2025-11-24T16:00:30Z");
        let late = note_at("2025-12-24T16:00:00Z");
        assert!(
            psp_service::telemetry::audit::proof::open_note(
                &early,
                std::slice::from_ref(&retired_key)
            )
            .is_ok()
        );
        let why = psp_service::telemetry::audit::proof::open_note(
            &late,
            std::slice::from_ref(&retired_key),
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("after key"), "{why}");
        let pem = scratch.write("old.pem", old.public().to_pem().as_bytes());
        let py = |note: &str| {
            let file = scratch.write("retired-note", note.as_bytes());
            verify_py(&[
                "note".as_ref(),
                pem.as_os_str(),
                NOTE_NAME.as_ref(),
                file.as_os_str(),
                "2025-11-24T16:01:00Z".as_ref(),
            ])
        };
        assert_eq!(py(&early), Ok(()));
        let why = py(&late).unwrap_err();
        assert!(why.contains("after the key was retired"), "{alg}: {why}");
    }
}

fn time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

#[test]
fn b5_b6_a_jws_without_kid_or_a_set_listing_a_key_twice_cannot_escape_a_retirement() {
    let scratch = Scratch::new("b5-b6");
    let old = key(Alg::Es256);
    let retired = old.public().retired_at(IAT + 60);
    let set = Jwks::new([retired.clone()]);
    let late = IAT + 3600;
    // B5: no kid (jwcrypto would try every key of the set).
    let header = json!({"alg": "ES256", "b64": false, "crit": ["b64"], "iat": late});
    let no_kid = hand_built(&header, &old.sign(&signing_input(&header, PAYLOAD)));
    assert_eq!(
        verify_detached(&set, &no_kid, PAYLOAD),
        Err(JwsError::KidMissing)
    );
    let why = jwcrypto(&scratch, &set.to_json(), PAYLOAD, &no_kid).unwrap_err();
    assert!(why.contains("names no kid"), "{why}");
    // B6: the key twice, once without its retirement (two sets joined).
    let mut twice: Value = serde_json::from_str(&set.to_json()).expect("json");
    let mut bare = twice["keys"][0].clone();
    bare.as_object_mut().expect("object").remove("retired");
    twice["keys"] = json!([bare, twice["keys"][0].clone()]);
    assert!(matches!(
        Jwks::from_json(&twice.to_string()),
        Err(JwkError::Duplicate { .. })
    ));
    let signed_late = sign_detached(&old, PAYLOAD, late, None);
    let why = jwcrypto(&scratch, &twice.to_string(), PAYLOAD, &signed_late).unwrap_err();
    assert!(why.contains("more than once"), "{why}");
    // A set built from both keeps the strictest life.
    let merged = Jwks::new([old.public(), retired]);
    assert_eq!(merged.keys()[0].retired(), Some(IAT + 60));
}

#[test]
fn a_note_with_two_time_lines_or_a_compact_jws_of_another_type_is_refused_by_both() {
    let scratch = Scratch::new("two-times");
    let signer = key(Alg::EdDsa);
    let text = format!(
        "{NOTE_NAME}\n7\nqINS1GRFhWHwdkUeqLEoP4yEMkTBBrxhEcqd1K4uo+s=\ntime 2025-11-24T16:00:30Z\ntime 2025-12-24T16:00:00Z\n"
    );
    let note = note_sign(&signer, NOTE_NAME, &text).expect("sign");
    let why = psp_service::telemetry::audit::proof::open_note(&note, &[signer.public()])
        .unwrap_err()
        .to_string();
    assert!(why.contains("more than one time line"), "{why}");
    let why = cryptography(&scratch, &signer.public(), NOTE_NAME, &note).unwrap_err();
    assert!(why.contains("more than one time line"), "{why}");
    // A compact JWS typed as a JWT is not a signed decision.
    let jwks = Jwks::new([signer.public()]);
    let jwt = psp_service::evidence::sign_compact(&signer, "JWT", b"{}", IAT);
    assert!(matches!(
        psp_service::evidence::verify_compact(&jwks, &jwt),
        Err(JwsError::NotADecision { .. })
    ));
    let jwks_file = scratch.write("typ-jwks.json", jwks.to_json().as_bytes());
    let why = verify_py(&["compact".as_ref(), jwks_file.as_os_str(), jwt.as_ref()]).unwrap_err();
    assert!(why.contains("not psp-decision+json"), "{why}");
}
