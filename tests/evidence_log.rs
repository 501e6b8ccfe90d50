//! The audit log against an attacker (issue 26 §2): a real log with signed checkpoints is
//! written in-process (`AuditLog` with a `CheckpointSpec`), its files are tampered with as
//! an attacker with write access to them would, and `psp-gateway audit verify` (the binary)
//! must name each case: exit status and message. Inclusion proofs (`audit prove`) verify,
//! and a tampered one does not; the checkpoints' signed notes verify with an independent
//! verifier (scripts/evidence/verify.py, pyca/cryptography); a restart goes on from the
//! last checkpoint, and a file cut below it does not open.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use psp_cert::hex;
use psp_service::evidence::{Alg, Jwks, SigningKey, note_sign};
use psp_service::telemetry::audit::checkpoint::{CheckpointLine, CheckpointSpec};
use psp_service::telemetry::audit::{AuditLog, GENESIS, Options};
use serde_json::{Map, Value, json};

const ORIGIN: &str = "psp-gateway.test/audit";
/// Records in the logs built here, and how often a checkpoint is signed.
const RECORDS: u64 = 23;
const EVERY: u64 = 5;

/// A directory of its own for one test's files, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("psp-evidence-log-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, bytes).expect("write a scratch file");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn key(alg: Alg) -> Arc<SigningKey> {
    Arc::new(SigningKey::from_pem(&SigningKey::generate_pem(alg)).expect("a generated key loads"))
}

/// The key file an auditor is given: the JWKS as /.well-known/jwks.json serves it.
fn jwks_file(s: &Scratch, name: &str, key: &SigningKey) -> PathBuf {
    s.write(name, Jwks::new([key.public()]).to_json().as_bytes())
}

/// The key file as a PEM public key.
fn pem_file(s: &Scratch, name: &str, key: &SigningKey) -> PathBuf {
    s.write(name, key.public().to_pem().as_bytes())
}

fn spec(checkpoints: &Path, key: &Arc<SigningKey>) -> CheckpointSpec {
    CheckpointSpec {
        file: checkpoints.to_owned(),
        copy: None,
        every_records: EVERY,
        // Never due by time here: the tests decide when checkpoints are signed.
        every: Duration::from_secs(3600),
        origin: ORIGIN.to_owned(),
        key: Arc::clone(key),
        previous: Vec::new(),
    }
}

fn open(path: &Path, spec: Option<CheckpointSpec>) -> AuditLog {
    AuditLog::open_with(
        path,
        Options {
            checkpoints: spec,
            ..Options::default()
        },
    )
    .expect("the audit log opens")
}

/// Record `i`'s fields (as a check's record, with a fixed time).
fn fields(i: u64, tag: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("auth_number".into(), json!(format!("PSDXX-{tag}-{i:06}")));
    m.insert("message".into(), json!("check"));
    m.insert("time".into(), json!("2026-11-25T12:00:00Z"));
    m.insert("verdict".into(), json!("allow"));
    m
}

/// Appends records `from..=to`, each followed by what the sync thread does (`tick`).
fn append(log: &AuditLog, from: u64, to: u64) {
    for i in from..=to {
        log.append(fields(i, "TEST")).expect("append");
        log.tick();
    }
}

/// A log of [`RECORDS`] records in `audit.jsonl`, checkpointed every [`EVERY`] records and
/// at close, in `checkpoints.jsonl`.
struct Built {
    log: PathBuf,
    checkpoints: PathBuf,
    key: Arc<SigningKey>,
    jwks: PathBuf,
}

fn build(s: &Scratch, alg: Alg) -> Built {
    let key = key(alg);
    let (log, checkpoints) = (s.path("audit.jsonl"), s.path("checkpoints.jsonl"));
    let audit = open(&log, Some(spec(&checkpoints, &key)));
    append(&audit, 1, RECORDS);
    audit.close().expect("close");
    let jwks = jwks_file(s, "jwks.json", &key);
    Built {
        log,
        checkpoints,
        key,
        jwks,
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).expect("write");
}

/// The hash the next record's `prev` holds: SHA-256, hex, of the line without its end.
fn line_hash(line: &str) -> String {
    hex::lower(&hex::sha256(line.as_bytes()))
}

/// `line` with its `prev` replaced (the writer puts `seq` then `prev` first).
fn with_prev(line: &str, prev: &str) -> String {
    let v: Value = serde_json::from_str(line).expect("a record");
    let old = v["prev"].as_str().expect("prev");
    line.replacen(
        &format!("\"prev\":\"{old}\""),
        &format!("\"prev\":\"{prev}\""),
        1,
    )
}

/// An attacker's rewrite: every `prev` recomputed, so the chain holds again.
fn rechain(lines: &[String]) -> Vec<String> {
    let mut prev = GENESIS.to_owned();
    lines
        .iter()
        .map(|l| {
            let l = with_prev(l, &prev);
            prev = line_hash(&l);
            l
        })
        .collect()
}

fn checkpoint_lines(path: &Path) -> Vec<CheckpointLine> {
    lines(path)
        .iter()
        .map(|l| serde_json::from_str(l).expect("a checkpoint line"))
        .collect()
}

fn psp_gateway<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// `audit verify FILES --checkpoints CP --key KEY [extra…]`.
fn verify(files: &[&Path], checkpoints: &Path, key: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&OsStr> = vec!["audit".as_ref(), "verify".as_ref()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    args.extend([
        "--checkpoints".as_ref(),
        checkpoints.as_os_str(),
        "--key".as_ref(),
        key.as_os_str(),
    ]);
    args.extend(extra.iter().map(|e| OsStr::new(*e)));
    psp_gateway(&args)
}

/// The exit status is `code` and stdout or stderr contains each of `says`.
#[track_caller]
fn expect(o: &Output, code: i32, says: &[&str]) {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let text = format!("{stdout}{stderr}");
    for s in says {
        assert!(
            text.contains(s),
            "{s:?} not said; stdout: {stdout}\nstderr: {stderr}"
        );
    }
}

#[test]
fn an_untouched_log_verifies_across_a_rotation_and_says_how_many_records_are_covered() {
    let s = Scratch::new("untouched");
    let key = key(Alg::Es256);
    let (log, cp) = (s.path("audit.jsonl"), s.path("checkpoints.jsonl"));
    let audit = open(&log, Some(spec(&cp, &key)));
    append(&audit, 1, 12);
    // A rotation: the file moved away, the log reopened (SIGHUP); a checkpoint of the 12.
    let rotated = s.path("audit.jsonl.1");
    std::fs::rename(&log, &rotated).expect("rotate");
    audit.reopen().expect("reopen");
    append(&audit, 13, RECORDS);
    audit.close().expect("close");
    let sizes: Vec<u64> = checkpoint_lines(&cp).iter().map(|c| c.size).collect();
    assert_eq!(sizes, [5, 10, 12, 17, 22, 23]);

    for keys in [
        jwks_file(&s, "jwks.json", &key),
        pem_file(&s, "key.pem", &key),
    ] {
        let o = verify(&[&rotated, &log], &cp, &keys, &[]);
        expect(
            &o,
            0,
            &[
                "against 6 signed checkpoint(s): 23 records, the first 23 covered by the last checkpoint",
            ],
        );
    }
    // Files given newest first break the chain.
    let o = verify(&[&log, &rotated], &cp, &s.path("jwks.json"), &[]);
    expect(&o, 65, &["seq 1 where 24 was expected"]);
}

#[test]
fn an_edited_record_is_named() {
    let s = Scratch::new("edited");
    let b = build(&s, Alg::Es256);
    let mut l = lines(&b.log);
    // Record 7: one field's value changed, still valid JSON.
    l[6] = l[6].replace("\"verdict\":\"allow\"", "\"verdict\":\"deny\"");
    assert!(serde_json::from_str::<Value>(&l[6]).is_ok());
    write_lines(&b.log, &l);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &[
            "audit.jsonl: line 8: prev is not the hash of the record before it: that record was edited",
        ],
    );

    // The last record has no record after it to name it: its checkpoint does.
    let mut l = lines(&b.log);
    l[6] = l[6].replace("\"verdict\":\"deny\"", "\"verdict\":\"allow\"");
    let last = l.len() - 1;
    l[last] = l[last].replace("\"verdict\":\"allow\"", "\"verdict\":\"deny\"");
    write_lines(&b.log, &l);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &[
            "replaced or rewritten: the first 23 records are not the ones checkpoint 5 was signed over",
        ],
    );
}

#[test]
fn a_removed_record_is_named() {
    let s = Scratch::new("removed");
    let b = build(&s, Alg::Es256);
    let mut l = lines(&b.log);
    l.remove(6);
    write_lines(&b.log, &l);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &["audit.jsonl: line 7: seq 8 where 7 was expected: a record is missing or out of order"],
    );
}

#[test]
fn reordered_records_are_named() {
    let s = Scratch::new("reordered");
    let b = build(&s, Alg::Es256);
    let mut l = lines(&b.log);
    l.swap(6, 7);
    write_lines(&b.log, &l);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &["audit.jsonl: line 7: seq 8 where 7 was expected: a record is missing or out of order"],
    );
}

#[test]
fn a_forged_record_after_the_last_checkpoint_is_refused_unless_the_tail_is_allowed() {
    let s = Scratch::new("appended");
    let b = build(&s, Alg::Es256);
    let mut l = lines(&b.log);
    // The chain is right: `prev` is the hash of the last line, as the writer computes it.
    let prev = line_hash(l.last().expect("records"));
    let forged = format!(
        "{{\"seq\":24,\"prev\":\"{prev}\",\"auth_number\":\"PSDXX-FORGED-000024\",\"message\":\"check\",\"time\":\"2026-11-25T12:00:00Z\",\"verdict\":\"allow\"}}"
    );
    l.push(forged);
    write_lines(&b.log, &l);
    // The chain alone holds.
    let o = psp_gateway(&["audit".as_ref(), "verify".as_ref(), b.log.as_os_str()]);
    expect(&o, 0, &["audit chain unbroken: 24 records"]);

    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &["records 24 to 24 are after the last checkpoint (23 records): no signature covers them"],
    );
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &["--allow-tail"]);
    expect(
        &o,
        0,
        &[
            "24 records, the first 23 covered by the last checkpoint; 1 after it not yet covered (accepted: --allow-tail)",
        ],
    );
}

#[test]
fn a_truncated_tail_is_named_with_the_checkpoint_size_and_the_records_held() {
    let s = Scratch::new("truncated");
    let b = build(&s, Alg::Es256);
    let mut l = lines(&b.log);
    l.truncate(20);
    write_lines(&b.log, &l);
    // The chain alone cannot see it.
    let o = psp_gateway(&["audit".as_ref(), "verify".as_ref(), b.log.as_os_str()]);
    expect(&o, 0, &["audit chain unbroken: 20 records"]);

    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &[
            "truncated: checkpoint 5 was signed over 23 records at ",
            ", and the files hold 20",
        ],
    );
}

#[test]
fn a_replaced_file_with_a_consistent_chain_of_the_same_length_is_a_root_mismatch() {
    let s = Scratch::new("replaced");
    let b = build(&s, Alg::Es256);
    // Another log, no checkpoints, the same number of records, other contents.
    let other = s.path("other.jsonl");
    let forger = open(&other, None);
    for i in 1..=RECORDS {
        forger.append(fields(i, "FORGED")).expect("append");
    }
    drop(forger);
    std::fs::rename(&other, &b.log).expect("replace");
    assert_eq!(lines(&b.log).len() as u64, RECORDS);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &[
            "replaced or rewritten: the first 5 records are not the ones checkpoint 1 was signed over",
            "(its root does not match)",
        ],
    );
}

#[test]
fn a_missing_file_in_a_rotation_sequence_is_named() {
    let s = Scratch::new("missing");
    let key = key(Alg::EdDsa);
    let (log, cp) = (s.path("audit.jsonl"), s.path("checkpoints.jsonl"));
    let audit = open(&log, Some(spec(&cp, &key)));
    // Two rotations (as logrotate does: .1 becomes .2, the current file .1).
    append(&audit, 1, 8);
    std::fs::rename(&log, s.path("audit.jsonl.1")).expect("rotate");
    audit.reopen().expect("reopen");
    append(&audit, 9, 16);
    std::fs::rename(s.path("audit.jsonl.1"), s.path("audit.jsonl.2")).expect("rotate");
    std::fs::rename(&log, s.path("audit.jsonl.1")).expect("rotate");
    audit.reopen().expect("reopen");
    append(&audit, 17, RECORDS);
    audit.close().expect("close");
    let jwks = jwks_file(&s, "jwks.json", &key);
    let (oldest, middle) = (s.path("audit.jsonl.2"), s.path("audit.jsonl.1"));
    let o = verify(&[&oldest, &middle, &log], &cp, &jwks, &[]);
    expect(&o, 0, &["23 records, the first 23 covered"]);

    std::fs::remove_file(&middle).expect("remove");
    let o = verify(&[&oldest, &log], &cp, &jwks, &[]);
    expect(
        &o,
        65,
        &["audit.jsonl: line 1: seq 17 where 9 was expected: a record is missing or out of order"],
    );
    // The oldest file left out: the tree cannot be computed, and that is said.
    let o = verify(&[&log], &cp, &jwks, &[]);
    expect(
        &o,
        65,
        &["the first file given starts at record 17: give every file from the first"],
    );
    // Named as given, it is a file that cannot be read.
    let o = verify(&[&oldest, &middle, &log], &cp, &jwks, &[]);
    expect(&o, 66, &["audit.jsonl.1", "cannot read"]);
}

#[test]
fn a_forged_checkpoint_or_the_wrong_key_is_refused() {
    let s = Scratch::new("forged-checkpoint");
    let b = build(&s, Alg::Es256);
    let original = lines(&b.checkpoints);
    let mut last: CheckpointLine = serde_json::from_str(&original[4]).expect("a checkpoint");
    let text = last.note.split("\n\n").next().expect("text").to_owned() + "\n";

    // The same text, signed by another key under the same name.
    let attacker = key(Alg::Es256);
    last.note = note_sign(&attacker, ORIGIN, &text).expect("sign");
    let mut forged = original.clone();
    forged[4] = serde_json::to_string(&last).expect("json");
    write_lines(&b.checkpoints, &forged);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &[
            "checkpoint 5 (23 records): its signature does not verify with the keys given",
            "the note has no signature from psp-gateway.test/audit with key ID",
        ],
    );

    // The root edited, the real signature kept.
    let mut edited: CheckpointLine = serde_json::from_str(&original[4]).expect("a checkpoint");
    let root = edited.note.lines().nth(2).expect("root").to_owned();
    let mut bytes = STANDARD.decode(&root).expect("base64");
    bytes[0] ^= 1;
    edited.note = edited.note.replacen(&root, &STANDARD.encode(bytes), 1);
    let mut forged = original.clone();
    forged[4] = serde_json::to_string(&edited).expect("json");
    write_lines(&b.checkpoints, &forged);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &[
            "checkpoint 5 (23 records): its signature does not verify with the keys given",
            "does not verify over the note text",
        ],
    );

    // The untouched checkpoints, checked with another key's file (JWKS or PEM).
    write_lines(&b.checkpoints, &original);
    for wrong in [
        jwks_file(&s, "wrong.json", &attacker),
        pem_file(&s, "wrong.pem", &key(Alg::EdDsa)),
    ] {
        let o = verify(&[&b.log], &b.checkpoints, &wrong, &[]);
        expect(
            &o,
            65,
            &[
                "checkpoint 1 (5 records): its signature does not verify with the keys given",
                "the note has no signature from",
            ],
        );
    }
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(&o, 0, &["23 records"]);
}

#[test]
fn since_an_old_checkpoint_proves_the_log_extends_it_and_refuses_rewritten_history() {
    let s = Scratch::new("since");
    let b = build(&s, Alg::EdDsa);
    // The auditor kept the first checkpoint line (5 records) off the host.
    let old = s.write("kept-checkpoint.json", lines(&b.checkpoints)[0].as_bytes());
    let o = verify(
        &[&b.log],
        &b.checkpoints,
        &b.jwks,
        &["--since", old.to_str().expect("utf-8")],
    );
    expect(
        &o,
        0,
        &[
            "23 records, the first 23 covered",
            "the log extends the checkpoint of 5 records: it holds 23 records, and the RFC 9162 consistency proof from 5 to 23 verifies",
        ],
    );
    // The kept note alone (not the checkpoint-file line) does as well.
    let note: CheckpointLine = serde_json::from_str(&lines(&b.checkpoints)[0]).expect("cp");
    let old_note = s.write("kept-note", note.note.as_bytes());
    let o = psp_gateway(&[
        "audit".as_ref(),
        "verify".as_ref(),
        b.log.as_os_str(),
        "--since".as_ref(),
        old_note.as_os_str(),
        "--key".as_ref(),
        b.jwks.as_os_str(),
    ]);
    expect(&o, 0, &["consistency proof from 5 to 23 verifies"]);
    // The last checkpoint kept: the log holds no more, and nothing less.
    let newest = s.write(
        "kept-newest.json",
        lines(&b.checkpoints)
            .last()
            .expect("a checkpoint")
            .as_bytes(),
    );
    let o = psp_gateway(&[
        "audit".as_ref(),
        "verify".as_ref(),
        b.log.as_os_str(),
        "--since".as_ref(),
        newest.as_os_str(),
        "--key".as_ref(),
        b.jwks.as_os_str(),
    ]);
    expect(
        &o,
        0,
        &["consistency proof from 23 to 23 verifies (0 hashes)"],
    );

    // The attacker edits record 3, recomputes the whole chain, and replaces the checkpoint
    // file with checkpoints of the rewritten log signed with a key of their own.
    let mut l = lines(&b.log);
    l[2] = l[2].replace("\"verdict\":\"allow\"", "\"verdict\":\"deny\"");
    let l = rechain(&l);
    write_lines(&b.log, &l);
    let o = psp_gateway(&["audit".as_ref(), "verify".as_ref(), b.log.as_os_str()]);
    expect(&o, 0, &["audit chain unbroken: 23 records"]);
    let attacker = key(Alg::EdDsa);
    let forged_cp = s.path("forged-checkpoints.jsonl");
    let forger = open(&s.path("forged.jsonl"), Some(spec(&forged_cp, &attacker)));
    for line in &l {
        let mut v: Map<String, Value> = serde_json::from_str(line).expect("record");
        v.remove("seq");
        v.remove("prev");
        forger.append(v).expect("append");
        forger.tick();
    }
    forger.close().expect("close");
    assert_eq!(
        lines(&s.path("forged.jsonl")),
        l,
        "the forger's log is the rewritten one"
    );
    std::fs::rename(&forged_cp, &b.checkpoints).expect("replace the checkpoints");

    // The replaced checkpoints are not signed by the gateway's key.
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &[]);
    expect(
        &o,
        65,
        &["checkpoint 1 (5 records): its signature does not verify with the keys given"],
    );
    // And the checkpoint the auditor kept is not extended by the rewritten log.
    let o = psp_gateway(&[
        "audit".as_ref(),
        "verify".as_ref(),
        b.log.as_os_str(),
        "--since".as_ref(),
        old.as_os_str(),
        "--key".as_ref(),
        b.jwks.as_os_str(),
    ]);
    expect(
        &o,
        65,
        &[
            "replaced or rewritten: the first 5 records are not the ones the checkpoint kept from before (--since) was signed over at ",
            "(its root does not match)",
        ],
    );
    // Checked with the attacker's key, the kept checkpoint is refused by its signature.
    let o = psp_gateway(&[
        "audit".as_ref(),
        "verify".as_ref(),
        b.log.as_os_str(),
        "--since".as_ref(),
        old.as_os_str(),
        "--key".as_ref(),
        jwks_file(&s, "attacker.json", &attacker).as_os_str(),
    ]);
    expect(
        &o,
        65,
        &[
            "the checkpoint kept from before (--since): its signature does not verify with the keys given (the note has no signature from",
        ],
    );
    // A log cut below the kept checkpoint.
    write_lines(&b.log, &l[..3]);
    let o = psp_gateway(&[
        "audit".as_ref(),
        "verify".as_ref(),
        b.log.as_os_str(),
        "--since".as_ref(),
        old.as_os_str(),
        "--key".as_ref(),
        b.jwks.as_os_str(),
    ]);
    expect(
        &o,
        65,
        &[
            "truncated: the checkpoint kept from before (--since) was signed over 5 records at ",
            ", and the files hold 3",
        ],
    );
}

fn prove(s: &Scratch, b: &Built, seq: u64) -> Value {
    let o = psp_gateway(&[
        "audit".as_ref(),
        "prove".as_ref(),
        seq.to_string().as_ref(),
        b.log.as_os_str(),
        "--checkpoints".as_ref(),
        b.checkpoints.as_os_str(),
    ]);
    expect(&o, 0, &[]);
    let _ = s;
    serde_json::from_slice(&o.stdout).expect("the proof is JSON")
}

fn verify_proof(s: &Scratch, proof: &Value, key: &Path) -> Output {
    let file = s.write("proof.json", proof.to_string().as_bytes());
    psp_gateway(&[
        "audit".as_ref(),
        "verify".as_ref(),
        "--proof".as_ref(),
        file.as_os_str(),
        "--key".as_ref(),
        key.as_os_str(),
    ])
}

#[test]
fn an_inclusion_proof_verifies_and_a_tampered_one_does_not() {
    let s = Scratch::new("inclusion");
    let b = build(&s, Alg::Es256);
    let proof = prove(&s, &b, 7);
    assert_eq!(proof["index"], 6);
    assert_eq!(
        proof["tree_size"], 10,
        "the first checkpoint that covers record 7"
    );
    assert_eq!(proof["record"].as_str(), Some(lines(&b.log)[6].as_str()));
    let o = verify_proof(&s, &proof, &b.jwks);
    expect(
        &o,
        0,
        &["record 7 is in the log `psp-gateway.test/audit` of 10 records"],
    );

    // The record's text.
    let mut p = proof.clone();
    p["record"] = json!(
        proof["record"]
            .as_str()
            .expect("record")
            .replace("\"verdict\":\"allow\"", "\"verdict\":\"deny\"")
    );
    let o = verify_proof(&s, &p, &b.jwks);
    expect(
        &o,
        65,
        &["inclusion proof not verified: the record is not in the signed tree"],
    );

    // Its position.
    let mut p = proof.clone();
    p["index"] = json!(7);
    let o = verify_proof(&s, &p, &b.jwks);
    expect(
        &o,
        65,
        &["inclusion proof not verified: the record's seq is not 8"],
    );
    // Its position and the seq in its text, both moved: the path does not lead to the root.
    let mut p = proof.clone();
    p["index"] = json!(7);
    p["record"] = json!(proof["record"].as_str().expect("record").replacen(
        "{\"seq\":7,",
        "{\"seq\":8,",
        1
    ));
    let o = verify_proof(&s, &p, &b.jwks);
    expect(
        &o,
        65,
        &["inclusion proof not verified: the record is not in the signed tree"],
    );

    // The tree size it claims.
    let mut p = proof.clone();
    p["tree_size"] = json!(23);
    let o = verify_proof(&s, &p, &b.jwks);
    expect(
        &o,
        65,
        &["the proof is for a tree of 23 records, the checkpoint states 10"],
    );
    // A position past the signed tree (the record's seq moved with it): refused.
    let mut p = proof.clone();
    p["index"] = json!(u64::MAX - 1);
    p["record"] = json!(proof["record"].as_str().expect("record").replacen(
        "{\"seq\":7,",
        &format!("{{\"seq\":{},", u64::MAX),
        1
    ));
    let o = verify_proof(&s, &p, &b.jwks);
    expect(
        &o,
        65,
        &[
            "inclusion proof not verified: the record's position 18446744073709551614 is past the signed tree of 10 records",
        ],
    );

    // The largest position there is: refused, no overflow (it was a panic, exit 101).
    let mut p = proof.clone();
    p["index"] = json!(u64::MAX);
    let o = verify_proof(&s, &p, &b.jwks);
    expect(
        &o,
        65,
        &[
            "inclusion proof not verified: the record's position 18446744073709551615 is past the signed tree of 10 records",
        ],
    );

    // One bit of one hash of the path.
    let mut p = proof.clone();
    let h = p["proof"][0].as_str().expect("a hash").to_owned();
    let mut bytes = STANDARD.decode(&h).expect("base64");
    bytes[31] ^= 0x80;
    p["proof"][0] = json!(STANDARD.encode(bytes));
    let o = verify_proof(&s, &p, &b.jwks);
    expect(
        &o,
        65,
        &["inclusion proof not verified: the record is not in the signed tree"],
    );

    // Another key.
    let other = jwks_file(&s, "other.json", &key(Alg::Es256));
    let o = verify_proof(&s, &proof, &other);
    expect(
        &o,
        65,
        &["inclusion proof not verified: the note has no signature from psp-gateway.test/audit"],
    );
}

/// verify.py's verdict on `note` for the public key of `key` under `name`.
fn verify_py_note(s: &Scratch, key: &SigningKey, name: &str, note: &str) -> Result<(), String> {
    let pem = pem_file(s, "note-key.pem", key);
    let file = s.write("note", note.as_bytes());
    common::evidence_py::verdict(&[
        "note".as_ref(),
        pem.as_os_str(),
        name.as_ref(),
        file.as_os_str(),
    ])
    .map(drop)
}

#[test]
fn the_last_checkpoint_verifies_with_an_independent_verifier_for_both_algorithms() {
    for alg in [Alg::Es256, Alg::EdDsa] {
        let s = Scratch::new(&format!("python-{}", alg.jws_name()));
        let b = build(&s, alg);
        let last = checkpoint_lines(&b.checkpoints)
            .pop()
            .expect("a checkpoint");
        assert_eq!(last.size, RECORDS);
        assert_eq!(
            verify_py_note(&s, &b.key, ORIGIN, &last.note),
            Ok(()),
            "{alg:?}"
        );

        // The size changed in the text: refused.
        let tampered = last.note.replacen("\n23\n", "\n24\n", 1);
        assert_ne!(tampered, last.note);
        let why = verify_py_note(&s, &b.key, ORIGIN, &tampered).expect_err("refused");
        assert!(
            why.starts_with(&format!("the signature of {ORIGIN} ("))
                && why.ends_with("does not verify"),
            "{alg:?}: {why}"
        );
        // Another key under the same name: refused.
        let why = verify_py_note(&s, &key(alg), ORIGIN, &last.note).expect_err("refused");
        assert!(
            why.starts_with(&format!("no signature from {ORIGIN} with key ID")),
            "{alg:?}: {why}"
        );
    }
}

#[test]
fn a_restart_goes_on_from_the_last_checkpoint_and_a_file_cut_below_it_does_not_open() {
    let s = Scratch::new("restart");
    let key = key(Alg::Es256);
    let (log, cp) = (s.path("audit.jsonl"), s.path("checkpoints.jsonl"));
    let audit = open(&log, Some(spec(&cp, &key)));
    append(&audit, 1, 12);
    audit.close().expect("close");
    drop(audit);
    // Started again with the same checkpoints.
    let audit = open(&log, Some(spec(&cp, &key)));
    append(&audit, 13, RECORDS);
    audit.close().expect("close");
    drop(audit);
    // The restart opened with a record of what it found (a clean stop at checkpoint 12),
    // signed at once (13); records 13 to 23 became 14 to 24.
    let sizes: Vec<u64> = checkpoint_lines(&cp).iter().map(|c| c.size).collect();
    assert_eq!(sizes, [5, 10, 12, 13, 18, 23, 24]);
    let opened: Value = serde_json::from_str(&lines(&log)[12]).expect("json");
    assert_eq!(opened["message"], "audit_log_opened", "{opened}");
    assert_eq!(opened["clean_stop"], true, "{opened}");
    assert_eq!(opened["checkpoint"], 12, "{opened}");
    assert_eq!(opened["synced_seq"], 12, "{opened}");
    assert!(opened.get("set_aside_file").is_none(), "{opened}");
    let jwks = jwks_file(&s, "jwks.json", &key);
    let o = verify(&[&log], &cp, &jwks, &[]);
    expect(
        &o,
        0,
        &["24 records, the first 24 covered by the last checkpoint"],
    );

    // A file replaced by another chain of as many records: the log does not start on it.
    let original = lines(&log);
    let other = s.path("other.jsonl");
    let forger = open(&other, None);
    for i in 1..=RECORDS + 1 {
        forger.append(fields(i, "FORGED")).expect("append");
    }
    drop(forger);
    std::fs::rename(&other, &log).expect("replace");
    let e = AuditLog::open_with(
        &log,
        Options {
            checkpoints: Some(spec(&cp, &key)),
            ..Options::default()
        },
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        e.contains(
            "record 24 is not the record checkpoint 24 was signed over: the file was replaced"
        ),
        "{e}"
    );
    write_lines(&log, &original);

    // The file's tail cut below the last checkpoint: the log does not start on it.
    let mut l = lines(&log);
    l.truncate(20);
    write_lines(&log, &l);
    let e = AuditLog::open_with(
        &log,
        Options {
            checkpoints: Some(spec(&cp, &key)),
            ..Options::default()
        },
    )
    .err()
    .expect("refused");
    let e = e.to_string();
    assert!(
        e.contains("the file ends at record 20, but checkpoint 24"),
        "{e}"
    );
    assert!(e.contains("records were removed from its end"), "{e}");
}

#[test]
fn a_checkpoint_line_torn_by_a_crash_does_not_swallow_the_next_checkpoint() {
    let s = Scratch::new("torn-checkpoint");
    let key = key(Alg::Es256);
    let (log, cp) = (s.path("audit.jsonl"), s.path("checkpoints.jsonl"));
    let audit = open(&log, Some(spec(&cp, &key)));
    append(&audit, 1, 12);
    drop(audit);
    // A crash while the checkpoint of 12 was being written: part of its line, no line end.
    let mut bytes = std::fs::read(&cp).expect("read");
    bytes.extend_from_slice(b"{\"size\":12,\"time\":\"2026-");
    std::fs::write(&cp, &bytes).expect("write");
    // The restart takes the tree up from the last whole checkpoint (10); records 11 and 12,
    // which no checkpoint covers, are set aside, and its record (11) is signed at once.
    let audit = open(&log, Some(spec(&cp, &key)));
    append(&audit, 13, RECORDS);
    audit.close().expect("close");
    drop(audit);
    let text = std::fs::read_to_string(&cp).expect("read");
    let whole: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<CheckpointLine>(l).ok())
        .map(|c| c.size)
        .collect();
    assert_eq!(whole, [5, 10, 11, 16, 21, 22], "{text}");
    // The torn line stays, named and passed over as a torn record is; the log verifies.
    let jwks = jwks_file(&s, "jwks.json", &key);
    let o = verify(&[&log], &cp, &jwks, &[]);
    expect(
        &o,
        0,
        &[
            "checkpoints.jsonl line 3: a torn checkpoint line",
            "records 11 to 12 were after the last checkpoint",
            "22 records, the first 22 covered by the last checkpoint",
        ],
    );
    // A line that is not cut short but is no checkpoint is still refused.
    let mut garbage = std::fs::read(&cp).expect("read");
    garbage.extend_from_slice(b"{\"size\":1}garbage\n");
    let other = s.write("garbage.jsonl", &garbage);
    let o = verify(&[&log], &other, &jwks, &[]);
    expect(&o, 65, &["garbage.jsonl line 8: not a checkpoint"]);
    // `audit repair --checkpoints` moves the torn line aside; the file then reads whole.
    let o = psp_gateway(&[
        "audit".as_ref(),
        "repair".as_ref(),
        log.as_os_str(),
        "--checkpoints".as_ref(),
        cp.as_os_str(),
    ]);
    expect(&o, 0, &["1 torn checkpoint line(s) of"]);
    let o = verify(&[&log], &cp, &jwks, &[]);
    expect(&o, 0, &["22 records, the first 22 covered"]);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("torn checkpoint line"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let moved: Vec<_> = std::fs::read_dir(&s.0)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("checkpoints.jsonl.torn-")
        })
        .collect();
    assert_eq!(moved.len(), 1);
    assert_eq!(
        std::fs::read(moved[0].path()).expect("read"),
        b"{\"size\":12,\"time\":\"2026-\n"
    );
}

#[test]
fn after_a_key_rotation_the_log_goes_on_when_the_old_key_is_among_the_previous_keys() {
    let s = Scratch::new("rotation");
    let (old, new) = (key(Alg::Es256), key(Alg::EdDsa));
    let (log, cp) = (s.path("audit.jsonl"), s.path("checkpoints.jsonl"));
    let audit = open(&log, Some(spec(&cp, &old)));
    append(&audit, 1, 12);
    audit.close().expect("close");
    drop(audit);

    // The new key alone does not vouch for the last checkpoint: the log does not start.
    let e = AuditLog::open_with(
        &log,
        Options {
            checkpoints: Some(spec(&cp, &new)),
            ..Options::default()
        },
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        e.contains("verifies with the signing key or a previous key"),
        "{e}"
    );

    // A previous key retired before it signed the last checkpoint does not vouch for it
    // (a stolen retired key signs nothing that counts).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64;
    let mut too_early = spec(&cp, &new);
    too_early.previous = vec![old.public().retired_at(now - 3600)];
    let e = AuditLog::open_with(
        &log,
        Options {
            checkpoints: Some(too_early),
            ..Options::default()
        },
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("within its life"), "{e}");

    // With the old public key among the previous keys, retired now, it goes on, signing
    // with the new.
    let mut rotated = spec(&cp, &new);
    rotated.previous = vec![old.public().retired_at(now + 2)];
    let audit = open(&log, Some(rotated));
    append(&audit, 13, RECORDS);
    audit.close().expect("close");
    drop(audit);
    // A JWKS with both keys verifies every checkpoint, old and new.
    let both = s.path("both.json");
    std::fs::write(
        &both,
        psp_service::evidence::Jwks::new([old.public(), new.public()]).to_json(),
    )
    .expect("write");
    let o = verify(&[&log], &cp, &both, &[]);
    expect(
        &o,
        0,
        &["24 records, the first 24 covered by the last checkpoint"],
    );
    // The new key alone does not verify the old checkpoints.
    let only_new = jwks_file(&s, "new.json", &new);
    let o = verify(&[&log], &cp, &only_new, &[]);
    expect(&o, 65, &["does not verify with the keys given"]);

    // The published set says when the old key was retired: its checkpoints from before
    // verify, and one it signs after (a stolen key, dated after the rotation) does not.
    let published = s.path("published.json");
    std::fs::write(
        &published,
        psp_service::evidence::Jwks::new([new.public(), old.public().retired_at(now + 2)])
            .to_json(),
    )
    .expect("write");
    let o = verify(&[&log], &cp, &published, &[]);
    expect(&o, 0, &["24 records"]);
    let mut lines_cp = lines(&cp);
    let mut forged: CheckpointLine = serde_json::from_str(&lines_cp[0]).expect("a checkpoint");
    let later = time::OffsetDateTime::from_unix_timestamp(now + 120)
        .expect("time")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format");
    let root = forged
        .note
        .lines()
        .nth(2)
        .expect("the root line")
        .to_owned();
    let text = format!("{ORIGIN}\n{}\n{root}\ntime {later}\n", forged.size);
    forged.note = note_sign(&old, ORIGIN, &text).expect("sign");
    forged.time = later;
    lines_cp.push(serde_json::to_string(&forged).expect("json"));
    let forged_file = s.path("forged-checkpoints.jsonl");
    write_lines(&forged_file, &lines_cp);
    let o = verify(&[&log], &forged_file, &published, &[]);
    expect(&o, 65, &["after key", "was retired"]);
}

/// A request record (`gateway decision`) naming `id` with `decision`.
fn request_record(id: &str, decision: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("decision".into(), json!(decision));
    m.insert("decision_id".into(), json!(id));
    m.insert("message".into(), json!("gateway decision"));
    m.insert("time".into(), json!("2026-11-25T12:00:00Z"));
    m
}

#[test]
fn each_request_record_stands_with_the_signed_decision_it_names() {
    let s = Scratch::new("decisions");
    let key = key(Alg::Es256);
    let jws = psp_service::evidence::sign_compact(&key, "psp-decision+json", b"{}", 1_764_000_000);
    let id = hex::lower(&hex::sha256(jws.as_bytes())[..16]);
    let signed = |id: &str| {
        let mut m = Map::new();
        m.insert("decision_id".into(), json!(id));
        m.insert("decision_jws".into(), json!(jws));
        m.insert("message".into(), json!("gateway decision signed"));
        m.insert("signed_decision".into(), json!("refuse"));
        m.insert("time".into(), json!("2026-11-25T12:00:00Z"));
        m
    };
    let write = |name: &str, records: Vec<Map<String, Value>>| {
        let path = s.path(name);
        let log = open(&path, None);
        for r in records {
            log.append(r).expect("append");
        }
        path
    };
    let run = |path: &Path| psp_gateway(&["audit".as_ref(), "verify".as_ref(), path.as_os_str()]);

    let honest = write(
        "honest.jsonl",
        vec![signed(&id), request_record(&id, "refuse")],
    );
    expect(&run(&honest), 0, &["audit chain unbroken: 2 records"]);

    // A refusal recorded as a permit, re-chained: the chain holds, the decision does not.
    let flipped = write(
        "flipped.jsonl",
        vec![signed(&id), request_record(&id, "permit")],
    );
    expect(
        &run(&flipped),
        65,
        &[&format!(
            "the record says permit, the signed decision {id} it names says refuse"
        )],
    );
    // A request record naming a decision no record signed.
    let unknown = write(
        "unknown.jsonl",
        vec![request_record(&"0".repeat(32), "permit")],
    );
    expect(&run(&unknown), 65, &["which no record before it signed"]);
    // A signed decision whose id is not its JWS's hash.
    let misnamed = write("misnamed.jsonl", vec![signed(&"f".repeat(32))]);
    expect(&run(&misnamed), 65, &["is not the hash of its JWS"]);
}

#[test]
fn a_report_over_an_edited_log_says_not_verified_and_fails() {
    let s = Scratch::new("report");
    let b = build(&s, Alg::Es256);
    let report = |extra: &[&OsStr]| {
        let out = s.path("report.html");
        let mut args: Vec<&OsStr> = vec![
            "audit".as_ref(),
            "report".as_ref(),
            b.log.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ];
        args.extend_from_slice(extra);
        let o = psp_gateway(&args);
        (o, std::fs::read_to_string(&out).unwrap_or_default())
    };
    let with_keys = [
        "--checkpoints".as_ref(),
        b.checkpoints.as_os_str(),
        "--key".as_ref(),
        b.jwks.as_os_str(),
    ];
    // Without checkpoints: written, every figure marked unverified.
    let (o, html) = report(&[]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        html.contains("Unverified: every figure below counts the records as they are"),
        "{html}"
    );
    // The untouched log: verified before counting.
    let (o, html) = report(&with_keys);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        html.contains("Verified before counting: 23 records"),
        "{html}"
    );
    // An edited log, re-chained: the report says so, and the command fails.
    let edited: Vec<String> = lines(&b.log)
        .iter()
        .map(|l| l.replace("PSDXX-TEST-000003", "PSDXX-FORGED-0003"))
        .collect();
    write_lines(&b.log, &rechain(&edited));
    let (o, html) = report(&with_keys);
    assert_eq!(
        o.status.code(),
        Some(65),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        html.contains("NOT VERIFIED: the files do not stand up"),
        "{html}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("replaced or rewritten"));
}

#[test]
fn a_checkpoint_of_another_log_signed_by_the_same_key_is_refused() {
    let s = Scratch::new("origin");
    let b = build(&s, Alg::Es256);
    // Another deployment, same key, same records: its checkpoint verifies and its root
    // matches, but it is another log's statement.
    let mut l = lines(&b.checkpoints);
    let mut other: CheckpointLine = serde_json::from_str(&l[0]).expect("a checkpoint");
    let text = other.note.split("\n\n").next().expect("text").to_owned() + "\n";
    let text = text.replacen(ORIGIN, "other.example/audit", 1);
    other.note = note_sign(&b.key, "other.example/audit", &text).expect("sign");
    l.push(serde_json::to_string(&other).expect("json"));
    let spliced = s.path("spliced.jsonl");
    write_lines(&spliced, &l);
    let o = verify(&[&b.log], &spliced, &b.jwks, &[]);
    expect(
        &o,
        65,
        &[
            "is of another log: its origin is `other.example/audit`, this log's is `psp-gateway.test/audit`",
        ],
    );
    // --origin pins it: the log's own checkpoints under another origin are refused too.
    let o = verify(
        &[&b.log],
        &b.checkpoints,
        &b.jwks,
        &["--origin", "bank.example/audit"],
    );
    expect(&o, 65, &["checkpoint 1 is of another log"]);
    let o = verify(&[&b.log], &b.checkpoints, &b.jwks, &["--origin", ORIGIN]);
    expect(&o, 0, &["23 records"]);
}

// ---------------------------------------------------------------------------------------
// The fresh-eyes attack of issue 38 (docs/attacks/evidence.md): each break, as a test
// ---------------------------------------------------------------------------------------

/// `spec` with a copy of the checkpoints (and its high-water mark) in `copy`.
fn spec_with_copy(checkpoints: &Path, copy: &Path, key: &Arc<SigningKey>) -> CheckpointSpec {
    let mut s = spec(checkpoints, key);
    s.copy = Some(copy.to_owned());
    s
}

fn reopen(log: &Path, spec: CheckpointSpec) -> Result<AuditLog, String> {
    AuditLog::open_with(
        log,
        Options {
            checkpoints: Some(spec),
            ..Options::default()
        },
    )
    .map_err(|e| e.to_string())
}

#[test]
fn b1_an_old_checkpoint_appended_or_the_file_reordered_never_sets_signed_records_aside() {
    let s = Scratch::new("b1");
    let b = build(&s, Alg::Es256);
    let original = lines(&b.checkpoints);
    for (name, doctored) in [
        (
            "appended",
            [original.clone(), vec![original[0].clone()]].concat(),
        ),
        (
            "reversed",
            original.iter().rev().cloned().collect::<Vec<_>>(),
        ),
    ] {
        write_lines(&b.checkpoints, &doctored);
        let before = lines(&b.log);
        let audit = reopen(&b.log, spec(&b.checkpoints, &b.key)).expect("opens");
        audit.close().expect("close");
        drop(audit);
        let after = lines(&b.log);
        assert_eq!(
            after[..before.len()],
            before[..],
            "{name}: signed records kept"
        );
        let opened: Value = serde_json::from_str(&after[before.len()]).expect("json");
        assert_eq!(
            opened["checkpoint"],
            before.len() as u64,
            "{name}: {opened}"
        );
        assert_eq!(opened["clean_stop"], true, "{name}: {opened}");
        assert!(opened.get("set_aside_file").is_none(), "{name}: {opened}");
        // Put the log back as built for the next round.
        write_lines(&b.log, &before);
        write_lines(&b.checkpoints, &original);
        let mark = cp_mark(&b.checkpoints);
        let mut m: Value =
            serde_json::from_str(&std::fs::read_to_string(&mark).expect("mark")).expect("json");
        m["seq"] = json!(RECORDS);
        m["chain_head"] = json!(line_hash(before.last().expect("a record")));
        m["clean"] = json!(true);
        std::fs::write(&mark, m.to_string()).expect("write");
    }
    // The latest checkpoints removed after a clean stop: refused, not a fork.
    write_lines(&b.checkpoints, &original[..2]);
    let e = reopen(&b.log, spec(&b.checkpoints, &b.key))
        .err()
        .expect("refused");
    assert!(e.contains("checkpoints were removed"), "{e}");
}

fn cp_mark(checkpoints: &Path) -> PathBuf {
    psp_service::telemetry::audit::checkpoint::mark_path(checkpoints)
}

#[test]
fn b2_a_rewritten_mark_beside_the_checkpoints_does_not_outvote_the_copys() {
    let s = Scratch::new("b2");
    let key = key(Alg::Es256);
    let (log, cp, copy) = (
        s.path("audit.jsonl"),
        s.path("checkpoints.jsonl"),
        s.path("copy/checkpoints.jsonl"),
    );
    let audit = open(&log, Some(spec_with_copy(&cp, &copy, &key)));
    append(&audit, 1, 12);
    drop(audit); // a crash: 10 covered, 11 and 12 synced (the marks say 12)
    let mut l = lines(&log);
    l[11] = l[11].replace("PSDXX-TEST-000012", "PSDXX-EVIL-000012");
    let l = rechain(&l);
    write_lines(&log, &l);
    // The attacker rewrites the mark beside the checkpoints to name the forgery.
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(cp_mark(&cp)).expect("mark")).expect("json");
    m["chain_head"] = json!(line_hash(&l[11]));
    std::fs::write(cp_mark(&cp), m.to_string()).expect("write");
    let audit = reopen(&log, spec_with_copy(&cp, &copy, &key)).expect("opens");
    drop(audit);
    let opened: Value = serde_json::from_str(&lines(&log)[10]).expect("json");
    assert_eq!(opened["message"], "audit_log_opened");
    assert_eq!(opened["synced_record_matches"], false, "{opened}");
}

#[test]
fn b9_a_file_moved_away_while_the_service_was_down_is_not_taken_for_a_loss() {
    let s = Scratch::new("b9");
    let key = key(Alg::Es256);
    let (log, cp) = (s.path("audit.jsonl"), s.path("checkpoints.jsonl"));
    let audit = open(&log, Some(spec(&cp, &key)));
    append(&audit, 1, 12);
    drop(audit); // a crash: records 11 and 12 synced after checkpoint 10
    std::fs::rename(&log, s.path("audit.jsonl.1")).expect("logrotate's move");
    let e = reopen(&log, spec(&cp, &key)).err().expect("refused");
    assert!(
        e.contains("records 11 to 12 were synced after checkpoint 10") && e.contains("moved away"),
        "{e}"
    );
    // Put back, it opens (the two records set aside), and verifies.
    std::fs::rename(s.path("audit.jsonl.1"), &log).expect("back");
    let audit = reopen(&log, spec(&cp, &key)).expect("opens");
    audit.close().expect("close");
    drop(audit);
    let jwks = jwks_file(&s, "jwks.json", &key);
    let o = verify(&[&log], &cp, &jwks, &[]);
    expect(&o, 0, &["records 11 to 12 were after the last checkpoint"]);
}

#[test]
fn b7_a_request_record_is_held_to_the_decisions_signature_and_subject() {
    let s = Scratch::new("b7");
    let key = key(Alg::Es256);
    let stranger = self::key(Alg::Es256);
    let decision = |signer: &SigningKey, verdict: &str, cert: &str| {
        let payload =
            json!({"decision": verdict, "psp": {"certificateSha256": cert}, "site": "xx"});
        let jws = psp_service::evidence::sign_compact(
            signer,
            "psp-decision+json",
            payload.to_string().as_bytes(),
            1_764_000_000,
        );
        let id = hex::lower(&hex::sha256(jws.as_bytes())[..16]);
        let mut m = Map::new();
        m.insert("decision_id".into(), json!(id));
        m.insert("decision_jws".into(), json!(jws));
        m.insert("message".into(), json!("gateway decision signed"));
        m.insert("signed_decision".into(), json!(verdict));
        m.insert("time".into(), json!("2026-11-25T12:00:00Z"));
        (id, m)
    };
    let request = |id: &str, verdict: &str, cert: &str| {
        let mut m = request_record(id, verdict);
        m.insert("fingerprint".into(), json!(cert));
        m.insert("site".into(), json!("xx"));
        m
    };
    let (cert_a, cert_b) = ("a".repeat(64), "b".repeat(64));
    let run = |name: &str, records: Vec<Map<String, Value>>| {
        let (log, cp) = (
            s.path(&format!("{name}.jsonl")),
            s.path(&format!("{name}-cp.jsonl")),
        );
        let audit = open(&log, Some(spec(&cp, &key)));
        for r in records {
            audit.append(r).expect("append");
        }
        audit.close().expect("close");
        drop(audit);
        let jwks = jwks_file(&s, "b7-jwks.json", &key);
        verify(&[&log], &cp, &jwks, &[])
    };
    // A refused PSP's record made to name another PSP's permit: the subjects differ.
    let (permit_a, signed_a) = decision(&key, "permit", &cert_a);
    let o = run(
        "other-psp",
        vec![signed_a, request(&permit_a, "permit", &cert_b)],
    );
    expect(
        &o,
        65,
        &["the record's fingerprint is bbbb", "is about aaaa"],
    );
    // A decision signed by a key not in the set: not a signed decision of this gateway.
    let (forged, signed_forged) = decision(&stranger, "permit", &cert_b);
    let o = run(
        "forged",
        vec![signed_forged, request(&forged, "permit", &cert_b)],
    );
    expect(&o, 65, &["does not verify with the keys given"]);
    // The honest pair verifies.
    let (ok, signed_ok) = decision(&key, "refuse", &cert_b);
    let o = run("honest", vec![signed_ok, request(&ok, "refuse", &cert_b)]);
    expect(&o, 0, &["2 records"]);
}

#[test]
fn b8_a_report_does_not_count_records_no_checkpoint_covers_as_verified() {
    let s = Scratch::new("b8");
    let b = build(&s, Alg::Es256);
    // Three records appended after the last checkpoint, chained.
    let forger = AuditLog::open(&b.log).expect("opens");
    for i in 1..=3 {
        forger.append(fields(i, "FORGED")).expect("append");
    }
    drop(forger);
    let out = s.path("report.html");
    let report = |extra: &[&str]| {
        let mut args: Vec<&OsStr> = vec![
            "audit".as_ref(),
            "report".as_ref(),
            b.log.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--checkpoints".as_ref(),
            b.checkpoints.as_os_str(),
            "--key".as_ref(),
            b.jwks.as_os_str(),
        ];
        args.extend(extra.iter().map(OsStr::new));
        let o = psp_gateway(&args);
        (o, std::fs::read_to_string(&out).unwrap_or_default())
    };
    let (o, html) = report(&[]);
    assert_eq!(
        o.status.code(),
        Some(65),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        html.contains("NOT VERIFIED")
            && html.contains("records 24 to 26 are after the last checkpoint"),
        "{html}"
    );
    let (o, html) = report(&["--allow-tail"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        html.contains("the last 3 not yet covered by a checkpoint"),
        "{html}"
    );
}

#[test]
fn a_log_converted_to_crlf_is_not_the_log_signed() {
    let s = Scratch::new("crlf");
    let b = build(&s, Alg::Es256);
    let text = std::fs::read_to_string(&b.log).expect("read");
    std::fs::write(&b.log, text.replace('\n', "\r\n")).expect("write");
    for o in [
        verify(&[&b.log], &b.checkpoints, &b.jwks, &[]),
        psp_gateway(&["audit".as_ref(), "verify".as_ref(), b.log.as_os_str()]),
    ] {
        expect(&o, 65, &["line 1: the line ends in CR LF"]);
    }
    // The independent root (hashlib alone) of the converted bytes is not the signed root;
    // of the file as written, it is.
    let root_of = |path: &Path| {
        let out = Command::new(common::evidence_py::python())
            .arg(common::root().join("scripts/evidence/verify.py"))
            .args(["root".as_ref(), "23".as_ref(), path.as_os_str()])
            .output()
            .expect("verify.py root");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let signed = checkpoint_lines(&b.checkpoints)
        .last()
        .expect("a checkpoint")
        .note
        .lines()
        .nth(2)
        .expect("root line")
        .to_owned();
    assert_ne!(root_of(&b.log), signed);
    std::fs::write(&b.log, text).expect("write back");
    assert_eq!(root_of(&b.log), signed);
}
