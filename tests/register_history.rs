//! Audits: the registers that were in force, kept with the interval they were in force, and
//! `check --at T` answering with the register of T after it changed, saying which snapshot
//! it used, and saying so when no snapshot covers T.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{at, root};
use psp_service::register::{
    History, RegisterConfig, RegisterFileConfig, RegisterFormat, RegisterSnapshot,
};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("register_history")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

fn sandbox_xx() -> String {
    std::fs::read_to_string(root().join("registers/sandbox/XX.json")).expect("XX.json")
}

/// The sandbox XX register with PSP 000001 withdrawn.
fn withdrawn_xx() -> String {
    let text = sandbox_xx();
    let at = text
        .find("\"legalName\": \"Sandbox Valid PSP\"")
        .expect("000001");
    let (head, tail) = text.split_at(at);
    format!(
        "{head}{}",
        tail.replacen(
            "\"status\": \"Authorised\"",
            "\"status\": \"Unauthorised\"",
            1
        )
    )
}

fn config(dir: &Path) -> RegisterConfig {
    RegisterConfig {
        files: vec![RegisterFileConfig {
            path: dir.join("XX.json"),
            format: RegisterFormat::Native,
            ..RegisterFileConfig::default()
        }],
        history_dir: Some(dir.join("history")),
        ..RegisterConfig::default()
    }
}

fn status_of_000001(snapshot: &RegisterSnapshot) -> String {
    let r = snapshot.register("XX-TEST").expect("XX register");
    r.entity("000001").expect("000001").entries[0]
        .status
        .to_string()
}

#[test]
fn each_content_is_kept_with_the_interval_it_was_in_force_and_pruned_after_the_retention() {
    let dir = scratch("unit");
    let c = config(&dir);
    let history = History::of(&c, Path::new("/")).expect("configured");
    std::fs::write(dir.join("XX.json"), sandbox_xx()).expect("write");
    history
        .record(&c, Path::new("/"), at("2026-03-01T00:00:00Z"))
        .expect("record");
    // The same content again records nothing new.
    history
        .record(&c, Path::new("/"), at("2026-04-01T00:00:00Z"))
        .expect("record");
    assert_eq!(history.entries().expect("entries").len(), 1);
    std::fs::write(dir.join("XX.json"), withdrawn_xx()).expect("write");
    history
        .record(&c, Path::new("/"), at("2026-06-01T00:00:00Z"))
        .expect("record");
    let entries = history.entries().expect("entries");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].until, Some(at("2026-06-01T00:00:00Z")));
    assert_eq!(entries[1].until, None);

    let load = |t: &str| {
        let as_of = history.as_of(&c, Path::new("/"), at(t)).expect("as of");
        let (snapshot, _) =
            psp_service::register::load(&as_of.config, Path::new("/")).expect("loads");
        (snapshot, as_of)
    };
    let (march, as_of) = load("2026-03-03T00:00:00Z");
    assert_eq!(status_of_000001(&march), "Authorised");
    assert_eq!(as_of.used[0].from, at("2026-03-01T00:00:00Z"));
    // The boundary belongs to the new content.
    let (june, _) = load("2026-06-01T00:00:00Z");
    assert_eq!(status_of_000001(&june), "Unauthorised");
    let (_, before) = load("2026-01-01T00:00:00Z");
    assert!(before.config.files.is_empty());
    assert_eq!(before.uncovered, [dir.join("XX.json")]);

    // A content that ended more than the retention ago is pruned with its copy.
    let short = RegisterConfig {
        history_retention_days: Some(30),
        ..c.clone()
    };
    let pruning = History::of(&short, Path::new("/")).expect("configured");
    std::fs::write(dir.join("XX.json"), sandbox_xx()).expect("write");
    pruning
        .record(&short, Path::new("/"), at("2026-08-01T00:00:00Z"))
        .expect("record");
    let entries = pruning.entries().expect("entries");
    assert_eq!(entries.len(), 2, "the March content ended in June: pruned");
    assert_eq!(entries[0].from, at("2026-06-01T00:00:00Z"));
    let copies = std::fs::read_dir(dir.join("history"))
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .map(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .unwrap_or(false)
        })
        .count();
    // index.json, the June copy and the August copy (the March content came back in August
    // under the same digest, so its copy stays).
    assert_eq!(copies, 3);
}

fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .output()
        .expect("runs")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

#[test]
fn check_at_reproduces_the_answer_of_the_register_in_force_then() {
    let dir = scratch("cli");
    let pki = &common::test_pki::test_pki().dir;
    let write_config = |history: bool| {
        let path = dir.join(if history { "with.toml" } else { "without.toml" });
        std::fs::write(
            &path,
            format!(
                r#"
[checks]
valid_jurisdictions = ["XX"]

[registers]
{}

[[registers.files]]
path = "XX.json"
format = "native"

[[trust.sources]]
name = "sandbox-qtsp"
qtsp_source = "EIDAS"
qtsp_jurisdiction = "EEA"
valid_for = ["XX"]

[[trust.sources.issuers]]
pem = "{}"
kinds = ["web", "seal"]
"#,
                if history {
                    "history_dir = \"history\""
                } else {
                    ""
                },
                pki.join("ca/qtsp-issuing.pem").display()
            ),
        )
        .expect("write");
        path
    };
    let with = write_config(true);
    let without = write_config(false);
    // What serve records: the sandbox content from March, the withdrawal from June.
    let c = psp_gateway::Config::load(&with).expect("config");
    let history = History::of(&c.registers, &c.base_dir).expect("history");
    std::fs::write(dir.join("XX.json"), sandbox_xx()).expect("write");
    history
        .record(&c.registers, &c.base_dir, at("2026-03-01T00:00:00Z"))
        .expect("record");
    std::fs::write(dir.join("XX.json"), withdrawn_xx()).expect("write");
    history
        .record(&c.registers, &c.base_dir, at("2026-06-01T00:00:00Z"))
        .expect("record");

    let cert = common::test_pki::test_pki().psp("valid");
    let check = |config: &Path, t: &str| {
        json(&bin(&[
            "check",
            "--config",
            config.to_str().expect("path"),
            "--cert",
            cert.to_str().expect("path"),
            "--jurisdiction",
            "XX",
            "--at",
            t,
            "--offline",
        ]))
    };
    let status = |v: &serde_json::Value| {
        v["homeRegister"]["categoryEntries"][0]["pspAuthStatus"]
            .as_str()
            .unwrap_or("none")
            .to_owned()
    };
    // 3 March: the register said Authorised, though it says Unauthorised now.
    let march = check(&with, "2026-03-03T00:00:00Z");
    assert_eq!(status(&march), "Authorised", "{march:#}");
    assert_eq!(
        march["audit"]["registerSnapshots"][0]["inForceFrom"],
        "2026-03-01T00:00:00Z"
    );
    assert_eq!(
        march["audit"]["registerSnapshots"][0]["inForceUntil"],
        "2026-06-01T00:00:00Z"
    );
    assert!(
        march["audit"]["revocation"]["crl"]
            .as_str()
            .expect("said")
            .contains("not completed")
    );
    let july = check(&with, "2026-07-01T00:00:00Z");
    assert_eq!(status(&july), "Unauthorised", "{july:#}");
    assert_eq!(
        july["audit"]["registerSnapshots"][0]["inForceUntil"],
        serde_json::Value::Null
    );
    // Before the first record: no snapshot covers it, and the blocks say so.
    let january = check(&with, "2026-01-01T00:00:00Z");
    assert_eq!(status(&january), "none", "{january:#}");
    assert!(
        january["homeRegister"]["warning"]
            .to_string()
            .contains("No register snapshot of"),
        "{january:#}"
    );
    assert_eq!(
        january["audit"]["registersNotCovered"][0],
        dir.join("XX.json").display().to_string()
    );
    // Without a history the current register is used, and the audit says so.
    let current = check(&without, "2026-03-03T00:00:00Z");
    assert_eq!(status(&current), "Unauthorised");
    assert!(
        current["audit"]["registers"]
            .as_str()
            .expect("said")
            .contains("no [registers] history_dir"),
        "{current:#}"
    );
}
