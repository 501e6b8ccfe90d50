//! The EBA register fetched as EBA publishes it, from a local HTTP server on 127.0.0.1: the
//! metadata endpoint, then the ZIP it names; a corrupted or mislabelled download keeps the
//! file in place; 330,000 generated entities in the real shape; the service fetching a
//! missing register at start and answering every request while registers are replaced.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use common::eba::{publish, sha256_hex, zip_of, zip_with};
use http::{Method, StatusCode};
use psp_testkit::server::Files;

fn shape_example() -> Vec<u8> {
    std::fs::read(common::data(
        "registers/eba/eba_psd2_register_shape_example.json",
    ))
    .expect("shape example")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("register_fetch")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn write_config(dir: &Path, url: &str) -> PathBuf {
    common::loopback_config(
        dir,
        &format!(
            r#"
[[registers.files]]
path = "eba.zip"
format = "eba"
url = "{url}"
"#
        ),
    )
}

fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn fetch(config: &Path) -> Output {
    let c = config.to_owned();
    tokio::task::spawn_blocking(move || {
        bin(&["register", "fetch", "--config", c.to_str().expect("UTF-8")])
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_zip_is_fetched_verified_and_stored_and_bad_downloads_keep_it() {
    let dir = scratch("cli");
    let files = Files::start().await;
    let good = zip_of(&shape_example());
    publish(&files, &good, &sha256_hex(&good), good.len());
    let config = write_config(&dir, &files.url("/register/api/filemetadata"));

    let ok = fetch(&config).await;
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(text(&ok).contains("entities"), "{}", text(&ok));
    assert_eq!(std::fs::read(dir.join("eba.zip")).expect("stored"), good);
    let check = bin(&[
        "config",
        "check",
        "--config",
        config.to_str().expect("UTF-8"),
    ]);
    assert!(check.status.success(), "{}", text(&check));

    // Each bad download is refused with its reason and eba.zip stays as it was.
    let other = zip_of(
        &String::from_utf8(shape_example())
            .expect("UTF-8")
            .replace("  ", " ")
            .into_bytes(),
    );
    let cases: Vec<(&str, Vec<u8>, String, usize, &str)> = vec![
        (
            "a ZIP that is not the one the metadata hashed",
            other.clone(),
            sha256_hex(&good),
            other.len(),
            "the metadata says",
        ),
        (
            "a size that is not the one announced",
            good.clone(),
            sha256_hex(&good),
            good.len() + 1,
            "the metadata announced",
        ),
        (
            "a ZIP whose JSON does not match its own .sha256",
            zip_with(&shape_example(), &"0".repeat(64)),
            String::new(),
            0,
            "the download is corrupt or was altered",
        ),
        (
            "a truncated ZIP, hashed as truncated",
            good[..good.len() / 2].to_vec(),
            String::new(),
            0,
            "downloaded ZIP refused",
        ),
    ];
    for (what, zip, hash, size, expected) in cases {
        let hash = if hash.is_empty() {
            sha256_hex(&zip)
        } else {
            hash
        };
        let size = if size == 0 { zip.len() } else { size };
        publish(&files, &zip, &hash, size);
        let refused = fetch(&config).await;
        assert_eq!(
            refused.status.code(),
            Some(75),
            "{what}: {}",
            text(&refused)
        );
        assert!(
            text(&refused).contains(expected),
            "{what}: {}",
            text(&refused)
        );
        assert!(text(&refused).contains("the file in place stays"), "{what}");
        assert_eq!(
            std::fs::read(dir.join("eba.zip")).expect("stored"),
            good,
            "{what}: the file in place stays"
        );
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{what}: temporary files left behind");
    }

    // Metadata that points outside its download directory, or to something that is not a
    // ZIP, is refused before any download.
    for relative in ["../../etc/passwd.zip", "/abs/x.zip", "20260816/x.json"] {
        let meta = serde_json::json!({
            "latest_version_relative_zip_path": relative,
            "latest_version_relative_zip_size": "10",
            "sha256_hash": "0".repeat(64),
            "golden_copy_path_context": files.url("/downloads/PSDMD/"),
        });
        files.put("/register/api/filemetadata", meta.to_string().into_bytes());
        let refused = fetch(&config).await;
        assert_eq!(
            refused.status.code(),
            Some(75),
            "{relative}: {}",
            text(&refused)
        );
        assert!(
            text(&refused).contains("is not a relative path to a .zip"),
            "{relative}: {}",
            text(&refused)
        );
    }
    // Not the metadata at all.
    files.put(
        "/register/api/filemetadata",
        b"<html>maintenance</html>".to_vec(),
    );
    let refused = fetch(&config).await;
    assert!(
        text(&refused).contains("not the EBA file metadata"),
        "{}",
        text(&refused)
    );
    assert_eq!(std::fs::read(dir.join("eba.zip")).expect("stored"), good);
}

/// 330,000 entities in the real document's shape: nearly all agents, about a thousand
/// payment and e-money institutions, as in the live file (REGISTER-FORMATS.md).
fn generated(entities: usize) -> Vec<u8> {
    let mut out = String::with_capacity(entities * 220);
    out.push_str(r#"[[{"__EBA_Disclaimer":{"text":"generated for a test"}}],["#);
    for i in 0..entities {
        if i > 0 {
            out.push(',');
        }
        if i % 330 == 0 {
            out.push_str(&format!(
                r#"{{"CA_OwnerID":"DE_BAFIN","EntityCode":"DE_BAFIN!{i}","EntityType":"PSD_PI","Properties":[{{"ENT_NAM":"Generated PI {i}"}},{{"ENT_NAT_REF_COD":"{i}"}},{{"ENT_AUT":["2019-01-01"]}}],"Services":[{{"DE":["PS_070","PS_080"]}},{{"FR":["PS_080"]}}],"__EBA_EntityVersion":"20260816000000000"}}"#
            ));
        } else {
            out.push_str(&format!(
                r#"{{"CA_OwnerID":"FR_ACPR","EntityCode":"PSD_PI!FR_ACPR!1376!{i}","EntityType":"PSD_AG","Properties":[{{"ENT_NAM":"Agent {i}"}},{{"DER_CHI_ENT_AUT":"Active"}}],"__EBA_EntityVersion":"20260816000000000"}}"#
            ));
        }
    }
    out.push_str("]]");
    out.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_thirty_thousand_generated_entities_are_fetched_and_loaded() {
    let dir = scratch("large");
    let files = Files::start().await;
    let json = generated(330_000);
    let zip = zip_of(&json);
    publish(&files, &zip, &sha256_hex(&zip), zip.len());
    let config = write_config(&dir, &files.url("/register/api/filemetadata"));
    let ok = fetch(&config).await;
    assert!(ok.status.success(), "{}", text(&ok));
    // 1,000 institutions kept (every 330th record); the 329,000 agents counted and skipped.
    assert!(text(&ok).contains(", 1000 entities"), "{}", text(&ok));
    eprintln!(
        "generated register: {} MB of JSON, {} MB zipped",
        json.len() / 1_000_000,
        zip.len() / 1_000_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_fetches_a_missing_register_at_start_and_answers_every_request_while_it_is_replaced()
 {
    let files = Files::start().await;
    let good = zip_of(&shape_example());
    publish(&files, &good, &sha256_hex(&good), good.len());
    let dir = scratch("serve");
    let target = dir.join("eba.zip");
    let url = files.url("/register/api/filemetadata");
    let config = common::test_pki::test_config(|t| {
        format!(
            "{t}\n[[registers.files]]\npath = \"{}\"\nformat = \"eba\"\nurl = \"{url}\"\n",
            target.display()
        )
    });
    let sources = config.data_sources();
    let registers = config.registers.clone();
    let base = config.base_dir.clone();
    let allow = config.revocation.allow_destinations;
    assert!(!target.exists());
    let running = common::service::start(config).await;
    assert!(target.exists(), "fetched before the service started");
    let api = running.api.expect("api");
    let admin = running.admin.expect("admin");
    let ready = common::service::send(admin, Method::GET, "/readyz", &[]).await;
    assert_eq!(ready.status, StatusCode::OK, "{:?}", ready.body);
    let body = ready.json();
    assert!(
        body["registerFiles"].to_string().contains("eba.zip"),
        "{body:#}"
    );

    // Requests go on while the register is fetched and swapped, round after round, until at
    // least 5 rounds and 50 answers (bounded at 200 rounds).
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let der = common::load_cert(&common::test_pki::test_pki().psp("valid")).der;
    let eidas = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    let mut load = Vec::new();
    for _ in 0..2 {
        let (stop, eidas, answered) = (stop.clone(), eidas.clone(), answered.clone());
        load.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = common::service::send(
                    api,
                    Method::GET,
                    "/v1/psp/eidas?jurisdiction=XX",
                    &[
                        ("authorization", "Basic c2FuZGJveDpzYW5kYm94"),
                        ("fi_reference_id", "PSDXX-TEST-999999"),
                        ("version", "latest"),
                        ("eidas", &eidas),
                    ],
                )
                .await;
                answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if r.status == StatusCode::OK {
                    ok += 1;
                } else {
                    failed.push(r.status);
                }
            }
            (ok, failed)
        }));
    }
    let fetcher = psp_service::fetch::Fetcher::new(allow, std::time::Duration::from_secs(5));
    let mut rounds = 0;
    while rounds < 200 && (rounds < 5 || answered.load(std::sync::atomic::Ordering::Relaxed) < 50) {
        rounds += 1;
        let round = rounds;
        let done = psp_service::register::fetch_eba(
            &fetcher,
            &registers,
            &registers.files[registers.files.len() - 1],
            &base,
            std::time::Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(done.entities > 0);
        let (s, d) = (running.service.clone(), sources.clone());
        tokio::task::spawn_blocking(move || s.reload(&d))
            .await
            .expect("join")
            .expect("reload");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for task in load {
        let (ok, failed) = task.await.expect("join");
        assert!(
            failed.is_empty(),
            "failed requests during the swaps: {failed:?}"
        );
        total += ok;
    }
    assert!(total >= 50, "{total} requests during {rounds} swaps");
    eprintln!("{total} requests answered 200 during {rounds} fetches and swaps");
    running.stop().await;
}

#[test]
fn a_fetched_register_older_than_its_budget_is_reported_stale_and_a_fresh_one_is_not() {
    use psp_service::register::{RegisterConfig, RegisterFileConfig, RegisterFormat};
    let dir = scratch("age");
    let path = dir.join("eba.zip");
    std::fs::write(&path, zip_of(&shape_example())).expect("write");
    let config = |max_age_hours: Option<u64>| RegisterConfig {
        files: vec![RegisterFileConfig {
            path: path.clone(),
            format: RegisterFormat::Eba,
            url: Some("https://euclid.eba.europa.eu/register/api/filemetadata".into()),
            max_age_hours,
            ..RegisterFileConfig::default()
        }],
        ..RegisterConfig::default()
    };
    let now = std::time::SystemTime::now();
    let (fresh, _) = psp_service::register::load(&config(None), Path::new("/")).expect("loads");
    assert!(fresh.stale_files(now).is_empty());
    // Last replaced 49 hours ago: over the default 48-hour budget of a fetched file.
    let f = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_modified(now - std::time::Duration::from_secs(49 * 3600))
        .expect("set mtime");
    let (old, _) = psp_service::register::load(&config(None), Path::new("/")).expect("loads");
    let stale = old.stale_files(now);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert!(
        stale[0].contains("is 49 h old, over its 48 h budget"),
        "{stale:?}"
    );
    // A configured budget of 72 hours covers it.
    let (covered, _) =
        psp_service::register::load(&config(Some(72)), Path::new("/")).expect("loads");
    assert!(covered.stale_files(now).is_empty());
}
