//! Refreshes cut short (issue 27): `trust fetch` and `register fetch` killed with SIGKILL at
//! points spread over the whole of a fetch (downloading, verifying, writing, renaming), round
//! after round, each round publishing a new version. After every kill the data on the disk
//! is a whole version, the last stored or the new one, never a part: the LOTL verifies with
//! its own pivots (rounds alternate between a LOTL signed by the pinned key and one reached
//! through two pivots, so a LOTL stored without its pivots would not verify), the Czech list
//! verifies, and the register is byte for byte one of the published ZIPs. A last fetch that
//! runs to its end stores the newest version and leaves no temporary file of the killed
//! writers. Then `serve` starts from what is on the disk with the list host gone.
//!
//! `serve` refreshes through the same code (`trust::refresh`, `register::fetch_eba`), so
//! killing the CLI is killing a refresh; the CLI is a process of its own, which makes the
//! kill a real SIGKILL at an unknown instruction. Each test is bounded: 12 rounds of at most
//! a few seconds each.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::lotl_world::{World, in_days, lotl_config};
use http::StatusCode;
use psp_testkit::server::Files;

const BIN: &str = env!("CARGO_BIN_EXE_psp-gateway");
const ROUNDS: u64 = 12;

fn bin(args: &[&str]) -> Output {
    Command::new(BIN)
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

/// Runs `args` to its end; returns how long it took.
fn timed(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = bin(args);
    (out, started.elapsed())
}

/// Round `round`'s kill: a point in its slot of 1.2 × `full` (slots spread the kills over the
/// whole fetch and a little past it), randomly within the slot.
fn kill_point(round: u64, full: Duration) -> Duration {
    let span = full.as_micros() as u64 * 6 / 5;
    let slot = span / ROUNDS;
    Duration::from_micros(slot * (round - 1) + common::random_below(slot))
}

/// Starts `args` and kills it (SIGKILL) `after`; whether it had ended by then.
fn killed_after(args: &[&str], after: Duration) -> bool {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    std::thread::sleep(after);
    let ended = child.try_wait().expect("try_wait").is_some();
    let _ = child.kill();
    child.wait().expect("reaped");
    ended
}

/// Every file under `dir` whose name ends in `.tmp`.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(".tmp") {
                found.push(path);
            }
        }
    }
    found
}

fn sequence_of(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    psp_service::trust::tsl::parse(&bytes).ok()?.sequence_number
}

/// What the rounds left, for the report: the version stored before (`old`) or the new one
/// (`new`), and how many fetches had ended by the time of their kill (`ended`).
#[derive(Default, Debug)]
struct Tally {
    old: u32,
    new: u32,
    ended: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_fetch_killed_at_any_point_leaves_a_lotl_with_its_pivots_and_whole_lists() {
    let w = World::new("refresh-killed");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    // Pivot 10 (signed by the pinned k0) announces k1; pivot 11 (signed by k1) announces k2.
    let p10 = files.url("/eu-lotl-pivot-10.xml");
    let p11 = files.url("/eu-lotl-pivot-11.xml");
    files.put(
        "/eu-lotl-pivot-10.xml",
        w.lotl(10, &w.k0, &[&w.k1], &[], &cz_url),
    );
    files.put(
        "/eu-lotl-pivot-11.xml",
        w.lotl(11, &w.k1, &[&w.k2], std::slice::from_ref(&p10), &cz_url),
    );
    // Round r: LOTL 20 + r and Czech list 100 + r; odd rounds' LOTL is signed by k2 and
    // verifies only through both pivots, even rounds' by k0 with none.
    let publish = |round: u64| {
        let lotl = if round % 2 == 1 {
            w.lotl(
                20 + round,
                &w.k2,
                &[&w.k2],
                &[p11.clone(), p10.clone()],
                &cz_url,
            )
        } else {
            w.lotl(20 + round, &w.k0, &[&w.k0], &[], &cz_url)
        };
        files.put("/lotl.xml", lotl);
        files.put("/cz.xml", w.cz(100 + round, in_days(30), &w.cz));
    };
    let dir = w.dir().to_owned();
    let config = trust_config(&w, &files, "");
    let config_arg = config.to_str().expect("UTF-8").to_owned();
    let fetch = ["trust", "fetch", "--config", config_arg.as_str()];
    let status = ["trust", "status", "--config", config_arg.as_str()];
    let (lotl_file, cz_file) = (
        dir.join("cache/eu/lotl.xml"),
        dir.join("cache/eu/lists/CZ.xml"),
    );

    // Round 1 (odd: through pivots) runs to its end: the time a whole fetch takes.
    publish(1);
    let (first, full) = timed(&fetch);
    assert!(first.status.success(), "{}", text(&first));
    let mut stored = (sequence_of(&lotl_file), sequence_of(&cz_file));
    assert_eq!(stored, (Some(21), Some(101)));

    let mut tally = Tally::default();
    for round in 2..=ROUNDS + 1 {
        publish(round);
        let after = kill_point(round - 1, full);
        if killed_after(&fetch, after) {
            tally.ended += 1;
        }
        // Each document is the one stored before or the new one, whole, and verifies.
        let now = (sequence_of(&lotl_file), sequence_of(&cz_file));
        let lotl_ok = now.0 == stored.0 || now.0 == Some(20 + round);
        let cz_ok = now.1 == stored.1 || now.1 == Some(100 + round);
        assert!(
            lotl_ok && cz_ok,
            "round {round}, killed after {after:?}: stored {now:?}, before {stored:?}"
        );
        if now.0 == Some(20 + round) {
            tally.new += 1;
        } else {
            tally.old += 1;
        }
        stored = now;
        let shown = bin(&status);
        let table = String::from_utf8_lossy(&shown.stdout).into_owned();
        assert!(
            shown.status.success() && table.contains("2 of 2 lists used"),
            "round {round}, killed after {after:?} (of a {full:?} fetch): {}",
            text(&shown)
        );
    }
    eprintln!(
        "{ROUNDS} fetches killed over 1.2 × {full:?}: {} left the LOTL stored before, {} the new one ({} had ended)",
        tally.old, tally.new, tally.ended
    );

    // A fetch that runs to its end stores the newest and removes what the killed left.
    let last = ROUNDS + 2;
    publish(last);
    let done = bin(&fetch);
    assert!(done.status.success(), "{}", text(&done));
    assert_eq!(
        (sequence_of(&lotl_file), sequence_of(&cz_file)),
        (Some(20 + last), Some(100 + last))
    );
    let left = temporaries(&dir.join("cache"));
    assert!(left.is_empty(), "temporaries left behind: {left:?}");

    // serve starts from the disk with the list host gone.
    drop(files);
    let toml = format!(
        "{}\n[admin]\nlisten = \"127.0.0.1:0\"\n\n[[registers.files]]\npath = \"{}\"\nformat = \"native\"\n",
        std::fs::read_to_string(&config).expect("config"),
        common::root().join("registers/sandbox/XX.json").display()
    );
    let config = psp_gateway::Config::from_toml(&toml, &config, dir.clone()).expect("valid");
    let running = common::service::start(config).await;
    let admin = running.admin.expect("admin listener");
    let ready = common::service::send(admin, http::Method::GET, "/readyz", &[]).await;
    assert_eq!(ready.status, StatusCode::OK, "{:?}", ready.body);
    assert_eq!(
        ready.json()["trustedLists"]["used"],
        2,
        "{:#}",
        ready.json()
    );
    running.stop().await;
}

/// [`lotl_config`] in `w`'s directory for `files`' `/lotl.xml`, pinned to `k0`.
fn trust_config(w: &World, files: &Files, extra: &str) -> PathBuf {
    lotl_config(w.dir(), &files.url("/lotl.xml"), &w.k0.cert_pem, extra)
}

/// A list host that answers garbage, serves a document past the size cap, or answers nothing
/// at all: each `trust fetch` fails (exit 75) naming why, within its round's budget (three
/// download time limits of 1 s here), and the last good LOTL and list stay in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_host_that_answers_garbage_too_much_or_nothing_keeps_the_last_good_lists() {
    let w = World::new("refresh-host-faults");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/lotl.xml", w.lotl(20, &w.k0, &[&w.k0], &[], &cz_url));
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    let config = trust_config(&w, &files, "fetch_timeout_secs = 1");
    let config_arg = config.to_str().expect("UTF-8").to_owned();
    let fetch = ["trust", "fetch", "--config", config_arg.as_str()];
    let status = ["trust", "status", "--config", config_arg.as_str()];
    let (lotl_file, cz_file) = (
        w.dir().join("cache/eu/lotl.xml"),
        w.dir().join("cache/eu/lists/CZ.xml"),
    );
    let done = bin(&fetch);
    assert!(done.status.success(), "{}", text(&done));
    let good = (sequence_of(&lotl_file), sequence_of(&cz_file));
    assert_eq!(good, (Some(20), Some(100)));

    // Garbage where the list was: an HTML page, then a list cut in half.
    let whole = w.cz(101, in_days(30), &w.cz);
    for (what, body, says) in [
        (
            "an HTML page",
            b"<html><body>503 Service Unavailable</body></html>".to_vec(),
            "CZ    FAILED: signature refused: signature structure: the root element is not TrustServiceStatusList",
        ),
        (
            "half a list",
            whole[..whole.len() / 2].to_vec(),
            "CZ    FAILED: not a readable XML document",
        ),
        // One byte past the 32 MiB cap: refused at the cap, not read whole.
        (
            "33 MiB",
            vec![b' '; 32 * 1024 * 1024 + 1],
            "the response body exceeds the 33554432-byte limit",
        ),
    ] {
        files.put("/cz.xml", body);
        let (failed, took) = timed(&fetch);
        assert_eq!(failed.status.code(), Some(75), "{what}: {}", text(&failed));
        assert!(text(&failed).contains(says), "{what}: {}", text(&failed));
        assert!(took < Duration::from_secs(10), "{what}: {took:?}");
        assert_eq!(
            (sequence_of(&lotl_file), sequence_of(&cz_file)),
            good,
            "{what}"
        );
        let shown = bin(&status);
        assert!(shown.status.success(), "{what}: {}", text(&shown));
    }

    // A host that answers nothing: the round ends at its deadline (3 × 1 s), both documents
    // fail, both stay.
    files.hold();
    let (held, took) = timed(&fetch);
    assert_eq!(held.status.code(), Some(75), "{}", text(&held));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "a held host ended the fetch after {took:?}"
    );
    assert_eq!((sequence_of(&lotl_file), sequence_of(&cz_file)), good);
    let shown = bin(&status);
    let table = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.status.success() && table.contains("2 of 2 lists used"),
        "{}",
        text(&shown)
    );
    eprintln!(
        "held host: trust fetch ended after {took:?}:\n{}",
        text(&held)
    );
}

/// `entities` entities in the EBA register's shape (one payment institution in 50, the rest
/// agents), `tag` in every name so each version's bytes differ.
fn register_json(entities: usize, tag: u64) -> Vec<u8> {
    let mut out = String::with_capacity(entities * 220);
    out.push_str(r#"[[{"__EBA_Disclaimer":{"text":"generated for a test"}}],["#);
    for i in 0..entities {
        if i > 0 {
            out.push(',');
        }
        if i % 50 == 0 {
            out.push_str(&format!(
                r#"{{"CA_OwnerID":"DE_BAFIN","EntityCode":"DE_BAFIN!{i}","EntityType":"PSD_PI","Properties":[{{"ENT_NAM":"PI {i} of version {tag}"}},{{"ENT_NAT_REF_COD":"{i}"}},{{"ENT_AUT":["2019-01-01"]}}],"Services":[{{"DE":["PS_070","PS_080"]}}],"__EBA_EntityVersion":"20260816000000000"}}"#
            ));
        } else {
            out.push_str(&format!(
                r#"{{"CA_OwnerID":"FR_ACPR","EntityCode":"PSD_PI!FR_ACPR!1376!{i}","EntityType":"PSD_AG","Properties":[{{"ENT_NAM":"Agent {i} of version {tag}"}},{{"DER_CHI_ENT_AUT":"Active"}}],"__EBA_EntityVersion":"20260816000000000"}}"#
            ));
        }
    }
    out.push_str("]]");
    out.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_fetch_killed_at_any_point_leaves_one_published_register_whole() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("faults_refresh/register");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let files = Files::start().await;
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[revocation]\nallow_destinations = \"loopback\"\n\n[[registers.files]]\npath = \"eba.zip\"\nformat = \"eba\"\nurl = \"{}\"\n",
            files.url("/register/api/filemetadata")
        ),
    )
    .expect("config");
    let config_arg = config.to_str().expect("UTF-8").to_owned();
    let fetch = ["register", "fetch", "--config", config_arg.as_str()];
    let target = dir.join("eba.zip");
    // 20,000 entities: a few MB of JSON, so that writing and loading take a while.
    let versions: Vec<Vec<u8>> = (0..=ROUNDS + 2)
        .map(|v| common::eba::zip_of(&register_json(20_000, v)))
        .collect();

    common::eba::publish_whole(&files, &versions[1]);
    let (first, full) = timed(&fetch);
    assert!(first.status.success(), "{}", text(&first));
    let mut stored = 1;
    assert!(std::fs::read(&target).expect("stored") == versions[1]);

    let mut tally = Tally::default();
    for round in 2..=ROUNDS + 1 {
        common::eba::publish_whole(&files, &versions[round as usize]);
        let after = kill_point(round - 1, full);
        if killed_after(&fetch, after) {
            tally.ended += 1;
        }
        let now = std::fs::read(&target).expect("the register file is never missing");
        if now == versions[round as usize] {
            tally.new += 1;
            stored = round as usize;
        } else {
            assert!(
                now == versions[stored],
                "round {round}, killed after {after:?} (of a {full:?} fetch): the register file is neither version {stored} nor {round} ({} bytes)",
                now.len()
            );
            tally.old += 1;
        }
    }
    eprintln!(
        "{ROUNDS} register fetches killed over 1.2 × {full:?}: {} kept the register stored before, {} stored the new one ({} had ended)",
        tally.old, tally.new, tally.ended
    );

    let last = ROUNDS as usize + 2;
    common::eba::publish_whole(&files, &versions[last]);
    let done = bin(&fetch);
    assert!(done.status.success(), "{}", text(&done));
    assert!(std::fs::read(&target).expect("stored") == versions[last]);
    let left = temporaries(&dir);
    assert!(left.is_empty(), "temporaries left behind: {left:?}");
}
