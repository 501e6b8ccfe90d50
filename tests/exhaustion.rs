//! Nobody may exhaust the service without credentials (issue 10 section 4): a few hundred
//! concurrent wrong logins against the real service on 127.0.0.1 keep the process's memory
//! within a bound, while a caller with valid (already verified) credentials keeps getting
//! its answers.
//!
//! Each argon2 verification holds 19 MiB; before the cap on concurrent verifications, 100
//! such requests took the process from 11 MB to 1.96 GB of RSS, 300 to 5.87 GB. The service
//! runs inside this test process, so the process's peak resident set (`VmHWM`) is measured
//! around the attack. This file holds one test only, so no other test shares the process's
//! memory while it runs.
//!
//! A second phase (issue 22) floods the login tables with 100,000 wrong logins from 1,000
//! addresses and measures what the tables hold and the memory they take.

mod common;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::service::*;
use common::test_pki::{test_config, test_pki};
use http::{Method, StatusCode};

/// Concurrent wrong logins.
const ATTACKERS: usize = 300;
/// Allowed growth of the peak resident set over the attack. Without the cap the growth was
/// about 19 MiB per concurrent request (5.87 GB for 300); with the cap but argon2 allocating
/// per call, 417 MiB (the allocator kept each verification's memory); with two slots that
/// own their memory, 33 MiB measured (two argon2 memories and 300 connections' buffers).
const MAX_GROWTH_BYTES: u64 = 150 * 1024 * 1024;

const AUTH: &str = "Basic c2FuZGJveDpzYW5kYm94"; // sandbox:sandbox

/// (VmRSS, VmHWM) of this process, in bytes.
fn memory() -> (u64, u64) {
    (
        common::process_memory("VmRSS:"),
        common::process_memory("VmHWM:"),
    )
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_wrong_logins_stay_within_a_memory_bound_and_a_valid_caller_keeps_working() {
    // The peer (127.0.0.1) is a trusted proxy, so every attacker can claim its own source
    // address in X-Forwarded-For, and the per-source login quota does not stop them: the
    // cap on concurrent verifications is what is tested. All connections come from
    // 127.0.0.1, as from a load balancer, so the per-source connection cap is raised.
    let config = test_config(|t| {
        let t = t.replace(
            "rate_limit = { requests = 15000, period_seconds = 300 }",
            "rate_limit = { requests = 15000, period_seconds = 300 }\ntrusted_proxies = [\"127.0.0.1/32\"]",
        );
        format!("{t}\n[limits]\nmax_connections_per_source = 1000\n")
    });
    let api_config = config.api.clone().expect("the sandbox has an [api]");
    let running = start(config).await;
    let addr = running.api.expect("api listening");
    let valid = STANDARD.encode(common::load_cert(&test_pki().psp("valid")).der);
    let caller = |valid: String| async move {
        send(
            addr,
            Method::GET,
            "/v1/psp/eidas?jurisdiction=XX",
            &[
                ("authorization", AUTH),
                ("fi_reference_id", "ref"),
                ("eidas", &valid),
                ("x-forwarded-for", "192.0.2.10"),
            ],
        )
        .await
        .status
    };
    // The caller logs in once (its password is verified and remembered) before the attack.
    assert_eq!(caller(valid.clone()).await, StatusCode::OK);
    let (rss_before, hwm_before) = memory();

    let mut attack = tokio::task::JoinSet::new();
    for i in 0..ATTACKERS {
        attack.spawn(async move {
            // A third guess the caller's user name (the per-user quota stops those after 20),
            // the rest try user names of their own; each from its own source address.
            let credentials = if i % 3 == 0 {
                format!("sandbox:guess{i}")
            } else {
                format!("user{i}:guess")
            };
            let authorization = format!("Basic {}", STANDARD.encode(credentials));
            let source = format!("198.18.{}.{}", i / 250, i % 250 + 1);
            send(
                addr,
                Method::GET,
                "/v1/psp/eidas?jurisdiction=XX",
                &[
                    ("authorization", authorization.as_str()),
                    ("fi_reference_id", "ref"),
                    ("eidas", "AAAA"),
                    ("x-forwarded-for", source.as_str()),
                ],
            )
            .await
        });
    }

    // The valid caller keeps calling while the attack runs (bounded in count).
    let mut caller_statuses = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    while !attack.is_empty() && caller_statuses.len() < 500 {
        caller_statuses.push(caller(valid.clone()).await);
        while let Some(done) = attack.try_join_next() {
            *counts.entry(collect(done)).or_insert(0usize) += 1;
        }
        if caller_statuses.len() >= 5 {
            // Enough evidence from the caller; the next call waits for the next attacking
            // request to be answered (an event, not a fixed pause), so no spinning.
            if let Some(done) = attack.join_next().await {
                *counts.entry(collect(done)).or_insert(0usize) += 1;
            }
        }
    }
    let outcome = tokio::time::timeout(Duration::from_secs(300), async {
        while let Some(done) = attack.join_next().await {
            *counts.entry(collect(done)).or_insert(0usize) += 1;
        }
    })
    .await;
    assert!(outcome.is_ok(), "the attack's requests were all answered");
    let (rss_after, hwm_after) = memory();

    let growth = hwm_after.saturating_sub(hwm_before);
    println!(
        "{ATTACKERS} concurrent wrong logins: VmRSS {:.1} MiB -> {:.1} MiB, VmHWM {:.1} MiB -> {:.1} MiB (growth {:.1} MiB); attack statuses {counts:?}; caller: {} requests, all 200",
        mb(rss_before),
        mb(rss_after),
        mb(hwm_before),
        mb(hwm_after),
        mb(growth),
        caller_statuses.len()
    );
    assert!(
        caller_statuses.iter().all(|s| *s == StatusCode::OK),
        "the valid caller is never refused: {caller_statuses:?}"
    );
    assert!(!caller_statuses.is_empty());
    assert!(
        growth < MAX_GROWTH_BYTES,
        "peak RSS grew by {:.1} MiB (bound {:.1} MiB)",
        mb(growth),
        mb(MAX_GROWTH_BYTES)
    );
    // After the attack the caller still gets through.
    assert_eq!(caller(valid.clone()).await, StatusCode::OK);
    running.stop().await;

    login_tables_under_a_hundred_thousand_wrong_logins(&api_config).await;
}

/// Wrong logins of the second phase, and the addresses they come from (issue 22: "keep it
/// bounded for 100,000 wrong logins from 1,000 addresses").
const FLOOD_ATTEMPTS: u32 = 100_000;
const FLOOD_SOURCES: u32 = 1_000;
/// Allowed growth of the resident set while the login tables hold their 100,000 keys
/// (`api.rate_limit.max_tracked_sources`, the default bound): 9.5 MiB measured (all three
/// tables, 100,000 + 1,000 + 100 keys, the allocator's slack included).
const MAX_TABLE_GROWTH_BYTES: u64 = 64 * 1024 * 1024;

/// The second phase: the login tables with the sandbox's limits, but no source or name ever
/// refused (so that every attempt is verified and tracked: the worst case for the tables),
/// under 100,000 wrong logins for 100 names from 1,000 addresses. A cheap hash (8 KiB, one
/// pass) stands in for the sandbox's, whose argon2 cost the first phase measured.
async fn login_tables_under_a_hundred_thousand_wrong_logins(api: &psp_faces::api::ApiConfig) {
    use psp_faces::api::{AuthFailure, Authenticator, Credential, LoginLimits};
    use std::sync::Arc;
    let cheap = argon2::PasswordHasher::hash_password(
        &argon2::Argon2::new(
            argon2::Algorithm::Argon2id,
            argon2::Version::V0x13,
            argon2::Params::new(8, 1, 1, None).expect("params"),
        ),
        b"sandbox",
    )
    .expect("hash")
    .to_string();
    let defaults = LoginLimits::from_config(api);
    let bound = defaults.max_tracked;
    let auth = Arc::new(Authenticator::new(
        &[Credential {
            username: "sandbox".into(),
            password_hash: cheap,
            roles: Vec::new(),
        }],
        LoginLimits {
            per_source: u32::MAX,
            per_user_and_source: u32::MAX,
            per_user: u32::MAX,
            ..defaults
        },
    ));
    let rss_before = memory().0;
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let auth = auth.clone();
        workers.spawn(async move {
            for i in (worker..FLOOD_ATTEMPTS).step_by(8) {
                let (name, source) = (i / FLOOD_SOURCES, i % FLOOD_SOURCES);
                let credentials = STANDARD.encode(format!("user{name}:guess"));
                let source = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0xc612_0000 + source));
                let result = auth
                    .authenticate(Some(format!("Basic {credentials}").as_bytes()), source)
                    .await;
                assert_eq!(result, Err(AuthFailure::Wrong), "attempt {i}");
            }
        });
    }
    while let Some(worker) = workers.join_next().await {
        worker.expect("worker");
    }
    let rss_after = memory().0;
    let (sources, pairs, names) = auth.tracked();
    let growth = rss_after.saturating_sub(rss_before);
    println!(
        "{FLOOD_ATTEMPTS} wrong logins from {FLOOD_SOURCES} addresses: tables hold {sources} sources, {pairs} (name, source) pairs, {names} names (bound {bound}); VmRSS {:.1} MiB -> {:.1} MiB (growth {:.1} MiB)",
        mb(rss_before),
        mb(rss_after),
        mb(growth)
    );
    assert_eq!(auth.verifications(), u64::from(FLOOD_ATTEMPTS));
    assert!(sources <= bound && pairs <= bound && names <= bound);
    assert_eq!(
        pairs,
        bound.min(FLOOD_ATTEMPTS as usize),
        "every pair is tracked up to the bound"
    );
    assert!(
        growth < MAX_TABLE_GROWTH_BYTES,
        "RSS grew by {:.1} MiB (bound {:.1} MiB)",
        mb(growth),
        mb(MAX_TABLE_GROWTH_BYTES)
    );
}

/// The status of one attacker's reply; only refusals are acceptable.
fn collect(done: Result<Reply, tokio::task::JoinError>) -> u16 {
    let reply = done.expect("attacker task");
    let status = reply.status.as_u16();
    assert!(
        matches!(status, 401 | 429 | 503),
        "an attacker got {status}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    if status == 429 || status == 503 {
        let code = reply.json()["errors"][0]["code"]
            .as_str()
            .expect("code")
            .to_owned();
        assert!(
            code == "login_attempts_exceeded" || code == "server_busy",
            "{status} {code}"
        );
        assert!(reply.headers.contains_key("retry-after"), "{status}");
    }
    status
}
