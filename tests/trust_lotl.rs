//! The EU list of the lists followed end to end, from a local HTTP server on 127.0.0.1: the
//! real 2019 LOTL authorising the real Czech list and its QWAC; lists signed here by
//! `xmlsec1` for refreshes, replays, pivots and a broken pivot chain; a server that is down;
//! and `/readyz` following a list's `NextUpdate`.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use common::data;
use common::lotl_world::{CZ_2019, World, in_days, lotl_config, rfc3339};
use common::xmlsec::{Scratch, b64, rsa_signer, sign_list, strip_signature};
use http::StatusCode;
use psp_service::trust::lotl;
use psp_testkit::server::Files;
use time::OffsetDateTime;

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

fn pem(der: &[u8]) -> String {
    let body = b64(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).expect("ASCII"))
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

const LOTL_2019: &str = "trusted-lists/eu-lotl_seq248_2019-09-04.xml";

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(data(rel)).expect("shared data")
}

/// Where the real 2019 LOTL says the CZ list is.
fn cz_location_2019() -> String {
    let list = psp_service::trust::tsl::parse(&read(LOTL_2019)).expect("parses");
    lotl::national_pointers(&list, Some(&["CZ".to_owned()]))[0]
        .location
        .clone()
}

/// The real lists are years past their NextUpdate: these runs grant ten years of grace,
/// explicitly, and check at a time when the lists were current.
const TEN_YEARS: &str = "next_update_grace_secs = 315360000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_lotl_authorises_the_real_czech_list_and_its_qwac_from_a_local_server() {
    let scratch = Scratch::new("lotl-real");
    let dir = &scratch.0;
    let files = Files::start().await;
    files.put("/eu-lotl.xml", read(LOTL_2019));
    files.put("/cz.xml", read(CZ_2019));
    let signer = lotl::signer_of(&read(LOTL_2019)).expect("the real LOTL verifies");
    let pinned = dir.join("oj-signers.pem");
    std::fs::write(&pinned, pem(&signer.der)).expect("write pinned");
    // The LOTL points to the CZ list on the Czech authority's server; the mirror reads it
    // from ours. Only where it is read changes: it must verify all the same.
    let mirror = format!(
        "{TEN_YEARS}\nmirrors = [{{ prefix = \"{}\", to = \"{}\" }}]",
        cz_location_2019(),
        files.url("/cz.xml")
    );
    let config = lotl_config(dir, &files.url("/eu-lotl.xml"), &pinned, &mirror);
    let config_arg = config.to_str().expect("UTF-8 path");

    let fetch = tokio::task::spawn_blocking({
        let c = config_arg.to_owned();
        move || bin(&["trust", "fetch", "--config", &c])
    })
    .await
    .expect("join");
    assert!(fetch.status.success(), "{}", text(&fetch));
    let out = text(&fetch);
    assert!(out.contains("LOTL  ok: sequence 248 stored"), "{out}");
    assert!(out.contains("CZ    ok: sequence 77 stored"), "{out}");
    assert!(dir.join("cache/eu/lists/CZ.xml").exists());

    let status = bin(&["trust", "status", "--config", config_arg]);
    assert!(status.status.success(), "{}", text(&status));
    let table = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(table.contains("Patrick Kremer"), "{table}");
    assert!(table.contains("authorised by the LOTL for CZ"), "{table}");
    assert!(table.contains("2 of 2 lists used"), "{table}");

    // The real QWAC, as of a day when the lists were current, offline (no CRL or OCSP).
    let cert = data("psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem");
    let check = bin(&[
        "check",
        "--config",
        config_arg,
        "--cert",
        cert.to_str().expect("path"),
        "--jurisdiction",
        "CZ",
        "--at",
        "2020-01-15T00:00:00Z",
        "--offline",
    ]);
    assert!(check.status.success(), "{}", text(&check));
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).expect("JSON");
    assert_eq!(report["eIDAS"]["validity"]["validQTSP"], true, "{report:#}");
    assert_eq!(
        report["eIDAS"]["validity"]["validSignature"], true,
        "{report:#}"
    );
    assert_eq!(
        report["eIDAS"]["data"]["QTSPCommonName"],
        "I.CA SSL EV CA/RSA 10/2017"
    );

    // Now the server offers a Czech list signed by a key the LOTL does not name for CZ: the
    // fetch fails for CZ, says why, and the last good list stays in use.
    let scratch2 = Scratch::new("lotl-real-attacker");
    let attacker = rsa_signer(&scratch2.0, "attacker");
    let forged = sign_list(
        &scratch2.0,
        "cz-forged",
        &strip_signature(&String::from_utf8(read(CZ_2019)).expect("UTF-8")),
        &attacker,
    );
    files.put("/cz.xml", forged);
    let refused = bin(&["trust", "fetch", "--config", config_arg]);
    assert_eq!(refused.status.code(), Some(75), "{}", text(&refused));
    let out = text(&refused);
    assert!(
        out.contains("CN=Test attacker signer") && out.contains("the LOTL authorises for CZ"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(dir.join("cache/eu/lists/CZ.xml")).expect("cached"),
        read(CZ_2019),
        "the last good list stays"
    );
    // The DSS-made tampered copy: refused for its digest, the last good list stays.
    files.put("/cz.xml", read("trusted-lists/CZ-tl_seq77_broken-sig.xml"));
    let broken = bin(&["trust", "fetch", "--config", config_arg]);
    assert_eq!(broken.status.code(), Some(75), "{}", text(&broken));
    assert!(
        text(&broken).contains("digest mismatch"),
        "{}",
        text(&broken)
    );
    // Someone with write access to the cache swaps the stored list for an edited one: every
    // load verifies again, so it is not used, and status says why.
    let stored = dir.join("cache/eu/lists/CZ.xml");
    std::fs::write(&stored, read("trusted-lists/CZ-tl_seq77_broken-sig.xml")).expect("write");
    let status = bin(&["trust", "status", "--config", config_arg]);
    assert_eq!(status.status.code(), Some(69), "{}", text(&status));
    let table = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        table.contains("NOT USED: signature refused") && table.contains("1 of 2 lists used"),
        "{table}"
    );
    std::fs::write(&stored, read(CZ_2019)).expect("restore");
    // The server goes away: both fetches fail, both last good copies stay in use.
    drop(files);
    let down = bin(&["trust", "fetch", "--config", config_arg]);
    assert_eq!(down.status.code(), Some(75), "{}", text(&down));
    let out = text(&down);
    assert!(
        out.contains("LOTL  FAILED: fetching http://127.0.0.1:"),
        "{out}"
    );
    let status = bin(&["trust", "status", "--config", config_arg]);
    assert!(status.status.success(), "{}", text(&status));
    let table = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(table.contains("2 of 2 lists used"), "{table}");
    assert!(
        table.contains("last fetch:") && table.contains("failed"),
        "{table}"
    );
}

async fn fetch(config: &Path) -> Output {
    let c = config.to_owned();
    tokio::task::spawn_blocking(move || {
        bin(&["trust", "fetch", "--config", c.to_str().expect("UTF-8")])
    })
    .await
    .expect("join")
}

fn cached_sequence(dir: &Path, file: &str) -> Option<u64> {
    let bytes = std::fs::read(dir.join("cache/eu").join(file)).ok()?;
    psp_service::trust::tsl::parse(&bytes).ok()?.sequence_number
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_stores_a_new_sequence_and_refuses_a_replayed_or_stale_list() {
    let w = World::new("lotl-refresh");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/lotl.xml", w.lotl(1, &w.k0, &[&w.k0], &[], &cz_url));
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    let config = lotl_config(w.dir(), &files.url("/lotl.xml"), &w.k0.cert_pem, "");

    let first = fetch(&config).await;
    assert!(first.status.success(), "{}", text(&first));
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(100));

    files.put("/cz.xml", w.cz(101, in_days(30), &w.cz));
    let second = fetch(&config).await;
    assert!(second.status.success(), "{}", text(&second));
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(101));

    // An older list, validly signed, replayed: refused, 101 stays.
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    let replay = fetch(&config).await;
    assert_eq!(replay.status.code(), Some(75), "{}", text(&replay));
    assert!(
        text(&replay).contains("sequence 100 is older than the stored sequence 101"),
        "{}",
        text(&replay)
    );
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(101));

    // A newer list that is already past its NextUpdate: not stored.
    files.put("/cz.xml", w.cz(102, in_days(-1), &w.cz));
    let stale = fetch(&config).await;
    assert_eq!(stale.status.code(), Some(75), "{}", text(&stale));
    assert!(
        text(&stale).contains("already past its NextUpdate"),
        "{}",
        text(&stale)
    );
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(101));

    // A list signed by the Czech key but naming another territory: the LOTL authorised that
    // key for CZ only.
    let sk = String::from_utf8(w.cz(104, in_days(30), &w.cz)).expect("UTF-8");
    let sk = strip_signature(&sk).replace(
        "<SchemeTerritory>CZ</SchemeTerritory>",
        "<SchemeTerritory>SK</SchemeTerritory>",
    );
    files.put("/cz.xml", sign_list(w.dir(), "sk-as-cz", &sk, &w.cz));
    let wrong_territory = fetch(&config).await;
    assert_eq!(
        wrong_territory.status.code(),
        Some(75),
        "{}",
        text(&wrong_territory)
    );
    assert!(
        text(&wrong_territory).contains("the list names territory SK"),
        "{}",
        text(&wrong_territory)
    );
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(101));

    // The LOTL re-signed by a key nobody pinned or announced: refused; the stored one stays
    // and still authorises the CZ list.
    files.put("/lotl.xml", w.lotl(2, &w.k2, &[&w.k2], &[], &cz_url));
    files.put("/cz.xml", w.cz(103, in_days(30), &w.cz));
    let unpinned = fetch(&config).await;
    assert_eq!(unpinned.status.code(), Some(75), "{}", text(&unpinned));
    assert!(
        text(&unpinned).contains("which is not pinned, and none of its 0 pivot LOTLs"),
        "{}",
        text(&unpinned)
    );
    assert_eq!(cached_sequence(w.dir(), "lotl.xml"), Some(1));
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(103));
}

/// Issue 40 finding 8: a genuinely signed list with sequence number `u64::MAX` was accepted
/// and, the record only rising, refused every later genuine list until `sequences.json` was
/// edited. A step of more than 1,000 above the record is refused now, and the next genuine
/// list is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_list_whose_sequence_leaps_to_the_maximum_is_refused_and_freezes_nothing() {
    let w = World::new("lotl-leap");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/lotl.xml", w.lotl(1, &w.k0, &[&w.k0], &[], &cz_url));
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    let config = lotl_config(w.dir(), &files.url("/lotl.xml"), &w.k0.cert_pem, "");
    let first = fetch(&config).await;
    assert!(first.status.success(), "{}", text(&first));
    for leap in [u64::MAX, 100 + 1_001] {
        files.put("/cz.xml", w.cz(leap, in_days(30), &w.cz));
        let leaped = fetch(&config).await;
        assert_eq!(leaped.status.code(), Some(75), "{}", text(&leaped));
        assert!(
            text(&leaped).contains(&format!(
                "sequence {leap} is more than 1000 above sequence 100"
            )),
            "{}",
            text(&leaped)
        );
        assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(100));
    }
    // The publisher's next genuine list (and a step of exactly 1,000) is taken.
    files.put("/cz.xml", w.cz(1_100, in_days(30), &w.cz));
    let next = fetch(&config).await;
    assert!(next.status.success(), "{}", text(&next));
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(1_100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pivots_carry_trust_from_the_pinned_key_oldest_first_and_a_broken_link_keeps_the_old_lotl()
{
    let w = World::new("lotl-pivots");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    // The Commission moved from k0 (pinned) to k1, then to k2. Pivot 10, signed by k0,
    // announces k1; pivot 11, signed by k1, announces k2; the current LOTL is signed by k2
    // and lists both pivots, newest first.
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
    files.put(
        "/lotl.xml",
        w.lotl(12, &w.k2, &[&w.k2], &[p11.clone(), p10.clone()], &cz_url),
    );
    let config = lotl_config(w.dir(), &files.url("/lotl.xml"), &w.k0.cert_pem, "");
    let ok = fetch(&config).await;
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(
        text(&ok).contains("sequence 12 stored, verified through 2 pivots"),
        "{}",
        text(&ok)
    );
    let status = bin(&[
        "trust",
        "status",
        "--config",
        config.to_str().expect("UTF-8"),
    ]);
    assert!(status.status.success(), "{}", text(&status));
    let table = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        table.contains("CN=Test k2 signer") && table.contains("through pivots"),
        "{table}"
    );

    // A LOTL 13 signed by k2 but listing only pivot 10: k0 → k1, and k1 never announced
    // k2. The chain is broken: LOTL 13 is refused, LOTL 12 stays and is still used.
    files.put(
        "/lotl.xml",
        w.lotl(13, &w.k2, &[&w.k2], std::slice::from_ref(&p10), &cz_url),
    );
    let broken = fetch(&config).await;
    assert_eq!(broken.status.code(), Some(75), "{}", text(&broken));
    assert!(
        text(&broken).contains("which is not among the 1 certificates announced by pivot"),
        "{}",
        text(&broken)
    );
    assert_eq!(cached_sequence(w.dir(), "lotl.xml"), Some(12));
    // A pivot edited after signing (a key swapped into its announcement) breaks it too.
    let mut edited = String::from_utf8(w.lotl(10, &w.k0, &[&w.k1], &[], &cz_url)).expect("UTF-8");
    edited = edited.replace(&b64(&w.k1.cert_der), &b64(&w.k2.cert_der));
    files.put("/eu-lotl-pivot-10.xml", edited.into_bytes());
    files.put("/lotl.xml", w.lotl(14, &w.k2, &[&w.k2], &[p10], &cz_url));
    let tampered = fetch(&config).await;
    assert_eq!(tampered.status.code(), Some(75), "{}", text(&tampered));
    assert!(
        text(&tampered).contains("digest mismatch"),
        "{}",
        text(&tampered)
    );
    assert_eq!(cached_sequence(w.dir(), "lotl.xml"), Some(12));
    let status = bin(&[
        "trust",
        "status",
        "--config",
        config.to_str().expect("UTF-8"),
    ]);
    assert!(status.status.success(), "{}", text(&status));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_fetches_at_start_and_readyz_follows_the_lists_next_update() {
    let w = World::new("lotl-readyz");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/lotl.xml", w.lotl(1, &w.k0, &[&w.k0], &[], &cz_url));
    // The Czech list becomes stale 15 seconds from now (time to sign it and start).
    let soon = OffsetDateTime::now_utc() + time::Duration::seconds(15);
    files.put("/cz.xml", w.cz(100, soon, &w.cz));
    let path = lotl_config(w.dir(), &files.url("/lotl.xml"), &w.k0.cert_pem, "");
    // /readyz also wants a register: the sandbox's.
    let text = format!(
        "{}\n[admin]\nlisten = \"127.0.0.1:0\"\n\n[[registers.files]]\npath = \"{}\"\nformat = \"native\"\n",
        std::fs::read_to_string(&path).expect("config"),
        common::root().join("registers/sandbox/XX.json").display()
    );
    let config = psp_gateway::Config::from_toml(&text, &path, w.dir().to_owned()).expect("valid");
    let running = common::service::start(config).await;
    let admin = running.admin.expect("admin listener");

    // Nothing cached at start: serve fetches at once, then becomes ready.
    let ready = psp_testkit::wait::until_some("ready", Duration::from_secs(10), || async {
        let r = common::service::send(admin, http::Method::GET, "/readyz", &[]).await;
        (r.status == StatusCode::OK).then(|| r.json())
    })
    .await;
    assert_eq!(ready["trustedLists"]["used"], 2, "{ready:#}");
    assert!(ready["trustedIssuers"].as_u64().expect("count") > 0);

    // The real Czech QWAC's issuer is on the (re-signed) real Czech list: approved now.
    let qwac = Arc::new(
        psp_cert::cert::PspCertificate::parse(&read(
            "psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem",
        ))
        .expect("parses"),
    );
    let check = || {
        running.service.check(
            qwac.clone(),
            Arc::new(Vec::new()),
            "CZ".parse().expect("code"),
            OffsetDateTime::now_utc(),
        )
    };
    let before = check().await;
    assert!(before.validity().valid_qtsp, "{:#?}", before.explanation());
    // From now on the server answers nothing: the refresh round that starts at the CZ
    // list's NextUpdate cannot end, so no reload replaces the snapshot in time.
    files.hold();

    // Past the CZ list's NextUpdate, /readyz says so without waiting for a reload. A wait on
    // the wall clock: the service judges NextUpdate by OffsetDateTime::now_utc, not by tokio's
    // clock, so a paused clock cannot stand in for it.
    let left = soon - OffsetDateTime::now_utc() + time::Duration::seconds(1);
    tokio::time::sleep(Duration::try_from(left).unwrap_or(Duration::ZERO)).await;
    let r = common::service::send(admin, http::Method::GET, "/readyz", &[]).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let body = r.json();
    let problems = body["problems"].to_string();
    assert!(
        problems.contains("CZ") && problems.contains("past its NextUpdate"),
        "{body:#}"
    );
    // And the same snapshot approves nothing from that instant (not from the cache either).
    let after = check().await;
    assert!(!after.validity().valid_qtsp, "{:#?}", after.explanation());
    let stale: Vec<_> = after
        .errors()
        .iter()
        .filter(|e| e.code.as_str() == "trusted_list_stale")
        .collect();
    assert_eq!(stale.len(), 1, "{:#?}", after.errors());
    assert!(
        stale[0].title.contains("past its NextUpdate"),
        "{}",
        stale[0].title
    );
    // The round is still held: stopping would wait for it, so the runtime ends it instead.
    drop(running);
}

#[test]
fn check_with_lotl_authorises_a_list_through_the_lotl_or_refuses_it() {
    let scratch = Scratch::new("check-lotl");
    let dir = &scratch.0;
    let config = dir.join("empty.toml");
    std::fs::write(&config, "").expect("write");
    let signer = lotl::signer_of(&read(LOTL_2019)).expect("verifies");
    let pinned = dir.join("lotl-signer.pem");
    std::fs::write(&pinned, pem(&signer.der)).expect("write");
    let cert = data("psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem");
    let check = |lotl_signer: &Path, list: &Path| {
        bin(&[
            "check",
            "--config",
            config.to_str().expect("path"),
            "--cert",
            cert.to_str().expect("path"),
            "--jurisdiction",
            "CZ",
            "--at",
            "2020-01-15T00:00:00Z",
            "--offline",
            "--lotl",
            data(LOTL_2019).to_str().expect("path"),
            "--lotl-signer",
            lotl_signer.to_str().expect("path"),
            "--trust",
            list.to_str().expect("path"),
        ])
    };
    // The LOTL, verified with its signer pinned, authorises the Czech list's signer.
    let ok = check(&pinned, &data(CZ_2019));
    assert!(ok.status.success(), "{}", text(&ok));
    let report: serde_json::Value = serde_json::from_slice(&ok.stdout).expect("JSON");
    assert_eq!(report["eIDAS"]["validity"]["validQTSP"], true, "{report:#}");
    assert!(
        text(&ok).contains("authorised for CZ by the LOTL"),
        "{}",
        text(&ok)
    );
    // The Czech list re-signed by another key: the LOTL does not authorise it.
    let attacker = rsa_signer(dir, "attacker");
    let forged = dir.join("cz-forged.xml");
    std::fs::write(
        &forged,
        sign_list(
            dir,
            "cz-forged",
            &strip_signature(&String::from_utf8(read(CZ_2019)).expect("UTF-8")),
            &attacker,
        ),
    )
    .expect("write");
    let refused = check(&pinned, &forged);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("not among the")
            && text(&refused).contains("the LOTL authorises for CZ"),
        "{}",
        text(&refused)
    );
    // The LOTL with a signer that is not its own pinned: refused before any list is read.
    let refused = check(&attacker.cert_pem, &data(CZ_2019));
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("not pinned"), "{}", text(&refused));
}

/// A refresher as `trust fetch` makes one, allowed to reach 127.0.0.1.
fn loopback_refresher() -> psp_service::trust::refresh::Refresher {
    psp_service::trust::refresh::Refresher::new(psp_service::trust::refresh::FetchSettings {
        allow: psp_service::fetch::AllowDestinations::Loopback,
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(20),
        mirrors: Vec::new(),
        refresh_interval: Duration::from_secs(3600),
    })
}

fn lotl_spec(w: &World, location: String) -> psp_service::trust::LotlSpec {
    psp_service::trust::LotlSpec {
        location,
        signers: vec![w.k0.cert_pem.clone()],
        signer_sha256: Vec::new(),
        territories: Some(vec!["CZ".to_owned()]),
        cache_dir: w.dir().join("cache"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pivot_locations_of_an_unverified_lotl_are_never_opened_as_files_nor_followed_to_another_server()
 {
    let w = World::new("lotl-file-pivots");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    // A genuine pivot signed by the pinned k0, announcing k2, lying in a local file; and a
    // FIFO, which would hold a reader forever. The LOTL, signed by k2 (not pinned), names
    // both as its pivots.
    let pivot = w.dir().join("eu-lotl-pivot-10.xml");
    std::fs::write(&pivot, w.lotl(10, &w.k0, &[&w.k2], &[], &cz_url)).expect("write");
    let fifo = w.dir().join("fifo-pivot.xml");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // Newest first: followed oldest first, the plain path would be read first.
    let pivots = [
        format!("file://{}", pivot.display()),
        fifo.display().to_string(),
        pivot.display().to_string(),
    ];
    files.put("/lotl.xml", w.lotl(12, &w.k2, &[&w.k2], &pivots, &cz_url));
    let spec = lotl_spec(&w, files.url("/lotl.xml"));
    let fetched = tokio::time::timeout(
        // Not a timing assertion: a FIFO opened for reading would hang the test forever.
        Duration::from_secs(120),
        loopback_refresher().fetch_source(
            "eu",
            &spec,
            time::Duration::ZERO,
            OffsetDateTime::now_utc(),
            &mut |_| {},
        ),
    )
    .await
    .expect("the fetch ends: the FIFO is never opened")
    .expect("pins readable");
    let lotl = fetched.log.lotl.expect("LOTL attempt");
    assert!(!lotl.ok, "{lotl:?}");
    assert!(
        lotl.message.contains("is not an http or https URL")
            && lotl.message.contains("never opened as files"),
        "{lotl:?}"
    );
    // Nothing stored: the genuine pivot in the file did not carry trust.
    assert_eq!(cached_sequence(w.dir(), "lotl.xml"), None);
    assert_eq!(fetched.stored, 0);

    // The same genuine pivot on another server (another origin): not followed either.
    let elsewhere = Files::start().await;
    elsewhere.put(
        "/eu-lotl-pivot-10.xml",
        std::fs::read(&pivot).expect("the pivot"),
    );
    let p10 = elsewhere.url("/eu-lotl-pivot-10.xml");
    files.put("/lotl.xml", w.lotl(13, &w.k2, &[&w.k2], &[p10], &cz_url));
    let fetched = loopback_refresher()
        .fetch_source(
            "eu",
            &spec,
            time::Duration::ZERO,
            OffsetDateTime::now_utc(),
            &mut |_| {},
        )
        .await
        .expect("pins readable");
    let lotl = fetched.log.lotl.expect("LOTL attempt");
    assert!(!lotl.ok, "{lotl:?}");
    assert!(
        lotl.message.contains("is not on the LOTL's own server"),
        "{lotl:?}"
    );
    assert_eq!(cached_sequence(w.dir(), "lotl.xml"), None);
}

/// The trust list a LOTL source gives, loaded from its cache at `at`.
fn load_source(
    spec: &psp_service::trust::LotlSpec,
    at: OffsetDateTime,
) -> psp_service::trust::TrustList {
    psp_service::trust::load(
        &[psp_service::trust::SourceSpec {
            name: "eu".to_owned(),
            qtsp_source: psp_service::trust::QtspSource::Eidas,
            reported_jurisdiction: "EEA".to_owned(),
            valid_for: ["CZ".parse().expect("code")].into_iter().collect(),
            qc_compliance: None,
            untyped: None,
            issuers: Vec::new(),
            trusted_lists: Vec::new(),
            lotl: Some(spec.clone()),
            next_update_grace: time::Duration::ZERO,
        }],
        at,
    )
    .expect("loads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_national_list_stops_approving_when_the_lotl_that_authorised_it_passes_its_next_update() {
    let w = World::new("lotl-deadline");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    // The LOTL is due again in one day, the Czech list in thirty.
    let lotl_next = (in_days(1)).replace_nanosecond(0).expect("whole second");
    files.put(
        "/lotl.xml",
        w.lotl_until(1, &w.k0, &[&w.k0], &[], &cz_url, lotl_next),
    );
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    let spec = lotl_spec(&w, files.url("/lotl.xml"));
    let outcome = loopback_refresher()
        .fetch_source(
            "eu",
            &spec,
            time::Duration::ZERO,
            OffsetDateTime::now_utc(),
            &mut |_| {},
        )
        .await
        .expect("pins readable");
    assert_eq!(
        (outcome.stored, outcome.failures),
        (2, 0),
        "{:?}",
        outcome.log
    );
    let trust = load_source(&spec, OffsetDateTime::now_utc());
    assert!(!trust.issuers().is_empty());
    for i in 0..trust.issuers().len() {
        let d = trust.deadline(i).expect("a list's issuer has a deadline");
        assert_eq!(d.until, lotl_next, "{d:?}");
        assert!(d.list.contains("LOTL"), "{d:?}");
        assert!(trust.fresh_at(i, lotl_next).is_ok());
        let refused = trust
            .fresh_at(i, lotl_next + time::Duration::SECOND)
            .expect_err("stale");
        assert!(refused.to_string().contains("the LOTL"), "{refused}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_with_a_lotl_past_its_next_update_uses_none_of_its_lists() {
    let w = World::new("check-stale-lotl");
    let cz = w.dir().join("cz.xml");
    std::fs::write(&cz, w.cz(100, in_days(30), &w.cz)).expect("write");
    let config = w.dir().join("empty.toml");
    std::fs::write(&config, "").expect("write");
    let check = |lotl: &Path| {
        bin(&[
            "check",
            "--config",
            config.to_str().expect("path"),
            "--cert",
            data("psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem")
                .to_str()
                .expect("path"),
            "--jurisdiction",
            "CZ",
            "--offline",
            "--lotl",
            lotl.to_str().expect("path"),
            "--lotl-signer",
            w.k0.cert_pem.to_str().expect("path"),
            "--trust",
            cz.to_str().expect("path"),
        ])
    };
    let valid_qtsp = |o: &Output| {
        let report: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("JSON ({e}): {}", text(o)));
        report["eIDAS"]["validity"]["validQTSP"].clone()
    };
    // A current LOTL authorises the Czech list: the real QWAC's issuer is approved.
    let fresh = w.dir().join("lotl-fresh.xml");
    std::fs::write(
        &fresh,
        w.lotl(1, &w.k0, &[&w.k0], &[], "https://cz.example/tl.xml"),
    )
    .expect("write");
    let ok = check(&fresh);
    assert_eq!(valid_qtsp(&ok), true, "{}", text(&ok));
    // The same LOTL, due an hour ago: none of its lists is used.
    let stale = w.dir().join("lotl-stale.xml");
    std::fs::write(
        &stale,
        w.lotl_until(
            2,
            &w.k0,
            &[&w.k0],
            &[],
            "https://cz.example/tl.xml",
            OffsetDateTime::now_utc() - time::Duration::hours(1),
        ),
    )
    .expect("write");
    let refused = check(&stale);
    assert_eq!(valid_qtsp(&refused), false, "{}", text(&refused));
    assert!(
        text(&refused).contains("the LOTL that authorises it is not used: past its NextUpdate"),
        "{}",
        text(&refused)
    );
}

/// Fetches `spec` in process; the CZ attempt's message, and whether it was stored.
async fn fetch_cz(spec: &psp_service::trust::LotlSpec) -> (bool, String) {
    let outcome = loopback_refresher()
        .fetch_source(
            "eu",
            spec,
            time::Duration::ZERO,
            OffsetDateTime::now_utc(),
            &mut |_| {},
        )
        .await
        .expect("pins readable");
    let cz = outcome.log.lists.get("CZ").expect("a CZ attempt").clone();
    (cz.ok, cz.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_signed_outside_the_signers_validity_issued_in_the_future_or_without_a_sequence_are_refused()
 {
    let w = World::new("lotl-admission");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/lotl.xml", w.lotl(1, &w.k0, &[&w.k0], &[], &cz_url));
    files.put("/cz.xml", w.cz(100, in_days(30), &w.cz));
    let spec = lotl_spec(&w, files.url("/lotl.xml"));
    let (stored, message) = fetch_cz(&spec).await;
    assert!(stored, "{message}");

    // Issued (as the list says) in 2019, before the signer's certificate existed.
    let issued_2019 = |xml: String| {
        let at = xml.find("<ListIssueDateTime>").expect("issue date");
        let end = xml.find("</ListIssueDateTime>").expect("issue date end");
        format!(
            "{}<ListIssueDateTime>2019-08-23T08:00:00Z{}",
            &xml[..at],
            &xml[end..]
        )
    };
    files.put("/cz.xml", w.cz_edited(101, in_days(30), &w.cz, issued_2019));
    let (stored, message) = fetch_cz(&spec).await;
    assert!(!stored);
    assert!(
        message.contains(
            "whose certificate was not valid at the list's ListIssueDateTime 2019-08-23T08:00:00Z"
        ),
        "{message}"
    );

    // Issued tomorrow: beyond the clock-skew budget.
    let tomorrow = rfc3339(in_days(1));
    files.put(
        "/cz.xml",
        w.cz_edited(102, in_days(30), &w.cz, |xml| {
            let at = xml.find("<ListIssueDateTime>").expect("issue date");
            let end = xml.find("</ListIssueDateTime>").expect("issue date end");
            format!("{}<ListIssueDateTime>{tomorrow}{}", &xml[..at], &xml[end..])
        }),
    );
    let (stored, message) = fetch_cz(&spec).await;
    assert!(!stored);
    assert!(message.contains("is in the future"), "{message}");

    // No TSLSequenceNumber: it would replace sequence 100 and blind the replay check.
    files.put(
        "/cz.xml",
        w.cz_edited(103, in_days(30), &w.cz, |xml| {
            xml.replace("<TSLSequenceNumber>103</TSLSequenceNumber>", "")
        }),
    );
    let (stored, message) = fetch_cz(&spec).await;
    assert!(!stored);
    assert!(message.contains("no TSLSequenceNumber"), "{message}");
    assert_eq!(cached_sequence(w.dir(), "lists/CZ.xml"), Some(100));
    let trust = load_source(&spec, OffsetDateTime::now_utc());
    assert!(trust.list_problems(OffsetDateTime::now_utc()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_genuine_list_put_in_the_cache_is_not_used_and_does_not_lower_the_bar() {
    let w = World::new("lotl-cache-rollback");
    let files = Files::start().await;
    let cz_url = files.url("/cz.xml");
    files.put("/lotl.xml", w.lotl(1, &w.k0, &[&w.k0], &[], &cz_url));
    let old = w.cz(100, in_days(30), &w.cz);
    files.put("/cz.xml", old.clone());
    let spec = lotl_spec(&w, files.url("/lotl.xml"));
    assert!(fetch_cz(&spec).await.0);
    files.put("/cz.xml", w.cz(101, in_days(30), &w.cz));
    assert!(fetch_cz(&spec).await.0);
    let now = OffsetDateTime::now_utc();
    assert!(!load_source(&spec, now).issuers().is_empty());

    // Sequence 100, genuinely signed and still fresh, copied over the stored 101.
    std::fs::write(w.dir().join("cache/eu/lists/CZ.xml"), &old).expect("write");
    let trust = load_source(&spec, now);
    assert!(trust.issuers().is_empty(), "the older list is not used");
    let problems = trust.list_problems(now).join("\n");
    assert!(
        problems.contains("sequence 100 is older than sequence 101, accepted before")
            && problems.contains("rollback"),
        "{problems}"
    );
    // Nor does it lower the bar for the next fetch: 100 served again is still refused.
    files.put("/cz.xml", old);
    let (stored, message) = fetch_cz(&spec).await;
    assert!(!stored);
    assert!(message.contains("rollback"), "{message}");
}
