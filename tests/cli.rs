//! `psp-gateway check` and `psp-gateway config check` as a user runs them.

mod common;

use std::process::{Command, Output};

use common::*;

fn psp_gateway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the binary runs")
}

fn stdout_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn check_prints_the_contract_json_for_the_real_qwac_and_trusted_list() {
    let cert = data("psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem");
    let tl = data("trusted-lists/CZ-tl_seq77_2019-08-23.xml");
    let o = psp_gateway(&[
        "check",
        "--cert",
        cert.to_str().expect("utf-8 path"),
        "--jurisdiction",
        "CZ",
        "--at",
        "2020-01-15T00:00:00Z",
        "--trust",
        tl.to_str().expect("utf-8 path"),
        // The certificate's CRL and OCSP URLs are public hosts: tests send traffic to
        // loopback only.
        "--offline",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v = stdout_json(&o);
    let e = &v["eIDAS"];
    assert_eq!(e["validity"]["validQTSP"], true);
    assert_eq!(e["validity"]["validSignature"], true);
    assert_eq!(e["validity"]["notExpired"], true);
    assert_eq!(e["validity"]["notRevoked"], false);
    assert_eq!(e["data"]["authNumber"], "PSDCZ-CNB-63492555");
    assert_eq!(e["data"]["QTSPCommonName"], "I.CA SSL EV CA/RSA 10/2017");
    assert_eq!(e["data"]["QTSPSource"], "EIDAS");
    assert_eq!(e["data"]["QTSPJurisdiction"], "EEA");
    let codes: Vec<&str> = e["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|x| x["code"].as_str().expect("code"))
        .collect();
    assert_eq!(codes, ["crl_response_error", "ocsp_response_error"]);
    for x in e["errors"].as_array().expect("errors") {
        assert!(x["title"].as_str().expect("title").contains("creditas.cz"));
        assert!(x["title"].as_str().expect("title").contains("--offline"));
        assert!(
            x["link"]
                .as_str()
                .expect("link")
                .ends_with(x["code"].as_str().expect("code"))
        );
    }
}

#[test]
fn check_uses_the_sandbox_configuration_by_default_and_accepts_lower_case_jurisdictions() {
    let o = psp_gateway(&[
        "check",
        "--cert",
        "certs/psp/valid.pem",
        "--jurisdiction",
        "xx",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = stdout_json(&o);
    assert_eq!(v["eIDAS"]["validity"]["validQTSP"], true);
    assert_eq!(v["eIDAS"]["data"]["QTSPSource"], "EIDAS");
    assert_eq!(v["eIDAS"]["data"]["pspSubjectName"], "Sandbox Valid PSP");
}

#[test]
fn check_exits_0_when_flags_are_false() {
    let o = psp_gateway(&[
        "check",
        "--cert",
        "certs/psp/tampered.pem",
        "--jurisdiction",
        "XX",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout_json(&o)["eIDAS"]["validity"]["validSignature"],
        false
    );
}

#[test]
fn check_exits_with_the_sysexits_status_of_each_mistake_and_one_line_naming_it() {
    for (args, code) in [
        // An input file that does not exist: 66.
        (
            vec![
                "check",
                "--cert",
                "does-not-exist.pem",
                "--jurisdiction",
                "XX",
            ],
            66,
        ),
        // An input that is not a certificate: 65.
        (
            vec!["check", "--cert", "gateway.toml", "--jurisdiction", "XX"],
            65,
        ),
        // Command-line mistakes: 64.
        (
            vec![
                "check",
                "--cert",
                "certs/psp/valid.pem",
                "--jurisdiction",
                "XXX",
            ],
            64,
        ),
        (
            vec![
                "check",
                "--cert",
                "certs/psp/valid.pem",
                "--jurisdiction",
                "XX",
                "--at",
                "yesterday",
            ],
            64,
        ),
        // A jurisdiction the configuration does not list, as the endpoint refuses it: 64.
        (
            vec![
                "check",
                "--cert",
                "certs/psp/valid.pem",
                "--jurisdiction",
                "JP",
            ],
            64,
        ),
        // A configuration that cannot be used: 78.
        (
            vec![
                "check",
                "--cert",
                "certs/psp/valid.pem",
                "--jurisdiction",
                "XX",
                "--config",
                "nope.toml",
            ],
            78,
        ),
    ] {
        let o = psp_gateway(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}: nothing on stdout");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.trim().is_empty(), "{args:?}: a message on stderr");
    }
    // The configuration used, then one line naming the problem.
    let o = psp_gateway(&["check", "--cert", "gateway.toml", "--jurisdiction", "XX"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.trim().lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(lines[0], "psp-gateway: configuration ./gateway.toml");
    assert!(lines[1].contains("gateway.toml"), "{err}");
}

#[test]
fn check_without_any_trust_source_says_so_instead_of_answering_every_flag_false() {
    let dir = std::env::temp_dir().join(format!("psp-gateway-cli-nt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("empty.toml");
    std::fs::write(&path, "").expect("write");
    let o = psp_gateway(&[
        "check",
        "--cert",
        "certs/psp/valid.pem",
        "--jurisdiction",
        "DE",
        "--config",
        path.to_str().expect("utf-8"),
    ]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(o.status.code(), Some(78));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no trust source is configured"), "{err}");
}

#[test]
fn config_check_accepts_the_sandbox_configuration() {
    let o = psp_gateway(&["config", "check", "--config", "gateway.toml"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("ok"));
}

#[test]
fn config_check_names_an_unknown_key_and_its_line_and_exits_78() {
    let dir = std::env::temp_dir().join(format!("psp-gateway-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[checks]\nvalid_jurisdictions = [\"EEA\"]\nerror_link_bse = \"x\"\n",
    )
    .expect("write");
    let o = psp_gateway(&["config", "check", "--config", path.to_str().expect("utf-8")]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(o.status.code(), Some(78));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("error_link_bse"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn check_prints_the_register_blocks_of_the_sandbox() {
    let o = psp_gateway(&[
        "check",
        "--cert",
        "certs/psp/gb-tpr.pem",
        "--jurisdiction",
        "gb",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = stdout_json(&o);
    assert_eq!(v["homeRegister"]["ncaName"], "XX-TEST");
    assert_eq!(v["homeRegister"]["registerType"], "Home");
    assert_eq!(
        v["homeRegister"]["categoryEntries"][0]["pspPaymentServices"],
        serde_json::json!([7, 8])
    );
    assert_eq!(v["hostRegister"]["ncaName"], "GB-FCA");
    assert_eq!(v["hostRegister"]["registerType"], "Host");
    assert_eq!(
        v["hostRegister"]["categoryEntries"][0]["passportIn"]["paymentServices"],
        serde_json::json!([7, 8])
    );

    // Same country: no host block (contract rule 1).
    let o = psp_gateway(&[
        "check",
        "--cert",
        "certs/psp/valid.pem",
        "--jurisdiction",
        "XX",
    ]);
    let v = stdout_json(&o);
    assert_eq!(
        v["homeRegister"]["categoryEntries"][0]["pspAuthStatus"],
        "Authorised"
    );
    assert!(v.get("hostRegister").is_none());
}

#[test]
fn register_stats_counts_a_native_file() {
    let o = psp_gateway(&["register", "stats", "registers/sandbox/XX.json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("XX"), "{out}");
    assert!(out.contains("Payment Institution"), "{out}");
}

#[test]
fn check_says_so_when_more_intermediates_are_given_than_a_path_is_built_from() {
    // Nine --chain certificates: the check does not silently use the first eight; it builds
    // no path and says why.
    let ca = root().join("certs/ca/qtsp-issuing.pem");
    let ca = ca.to_str().expect("utf-8 path");
    let mut args = vec![
        "check",
        "--cert",
        "certs/psp/valid.pem",
        "--jurisdiction",
        "XX",
        "--offline",
    ];
    for _ in 0..9 {
        args.extend(["--chain", ca]);
    }
    let o = psp_gateway(&args);
    assert_eq!(o.status.code(), Some(0));
    let v = stdout_json(&o);
    assert_eq!(v["eIDAS"]["validity"]["validQTSP"], false, "{v:#}");
    let codes: Vec<&str> = v["eIDAS"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["code"].as_str())
        .collect();
    assert!(codes.contains(&"chain_too_long"), "{v:#}");
}

#[test]
fn check_with_a_trusted_list_names_its_signer_and_refuses_a_broken_one() {
    let cert = data("psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem");
    let run = |tl: &str| {
        psp_gateway(&[
            "check",
            "--cert",
            cert.to_str().expect("utf-8 path"),
            "--jurisdiction",
            "CZ",
            "--at",
            "2020-01-15T00:00:00Z",
            "--trust",
            data(tl).to_str().expect("utf-8 path"),
            "--offline",
        ])
    };
    let good = run("trusted-lists/CZ-tl_seq77_2019-08-23.xml");
    assert_eq!(good.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&good.stderr);
    assert!(
        stderr.contains("signature verified") && stderr.contains("explicit choice"),
        "the signer is named on stderr: {stderr}"
    );
    let broken = run("trusted-lists/CZ-tl_seq77_broken-sig.xml");
    assert_eq!(broken.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(stderr.contains("digest mismatch"), "{stderr}");
}

/// Runs the binary with a deadline and an address-space limit of its own, so that a test of
/// an endless input stops by itself (and cannot exhaust the machine's memory) even if the bound
/// under test is missing: the child is killed at the deadline and the test then fails.
fn psp_gateway_bounded(args: &[&str]) -> Output {
    psp_gateway_bounded_with_stdin(args, std::process::Stdio::null())
}

fn psp_gateway_bounded_with_stdin(args: &[&str], stdin: std::process::Stdio) -> Output {
    // Budget: a check completes in well under a second; 60 s leaves room for a loaded CI host.
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);
    let mut child = Command::new("sh")
        .arg("-c")
        // 2 GiB of address space: ample for the binary and its threads, far below the host's.
        .arg("ulimit -v 2097152; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .current_dir(root())
        .stdin(stdin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} was still running after {DEADLINE:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn assert_refused_at_the_limit(o: &Output, code: i32, limit: &str, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{what}: {err}");
    assert!(
        err.contains(&format!("{limit}-byte limit")),
        "{what}: the message names the limit: {err}"
    );
    assert!(o.stdout.is_empty(), "{what}: nothing on stdout");
}

#[test]
fn an_endless_device_as_any_input_file_is_refused_at_its_limit_not_read_until_memory_runs_out() {
    let check = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--cert",
            "certs/psp/valid.pem",
            "--jurisdiction",
            "XX",
            "--offline",
        ];
        args.extend_from_slice(extra);
        psp_gateway_bounded(&args)
    };
    let o = psp_gateway_bounded(&["check", "--cert", "/dev/zero", "--jurisdiction", "XX"]);
    assert_refused_at_the_limit(&o, 65, "1048576", "--cert /dev/zero");
    assert_refused_at_the_limit(&check(&["--chain", "/dev/zero"]), 65, "1048576", "--chain");
    // A trust file must be a regular file (a FIFO blocked `config check` and every reload,
    // docs/attacks/proxy-and-data.md): a device is refused before it is read.
    let o = check(&["--trust", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(65), "--trust /dev/zero");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a regular file"),
        "--trust /dev/zero: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_refused_at_the_limit(
        &check(&["--config", "/dev/zero"]),
        78,
        "1048576",
        "--config /dev/zero",
    );
    let o = psp_gateway_bounded(&["config", "check", "--config", "/dev/zero"]);
    assert_refused_at_the_limit(&o, 78, "1048576", "config check --config /dev/zero");
    let o = psp_gateway_bounded(&["audit", "verify", "/dev/zero"]);
    assert_refused_at_the_limit(&o, 65, "1048576", "audit verify /dev/zero");
    let o = psp_gateway_bounded_with_stdin(
        &["credentials", "hash"],
        std::fs::File::open("/dev/zero").expect("/dev/zero").into(),
    );
    assert_refused_at_the_limit(&o, 65, "4096", "credentials hash < /dev/zero");
}

#[test]
fn a_fifo_fed_without_end_as_the_certificate_is_refused_at_the_limit() {
    let dir = std::env::temp_dir().join(format!("psp-gateway-cli-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let fifo = dir.join("cert.pem");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo");
    // The writer feeds Base64-looking text until the reader goes away (EPIPE: Rust ignores
    // SIGPIPE, so the write fails and the thread ends).
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
                return 0u64;
            };
            let chunk = [b'A'; 64 * 1024];
            let mut written = 0u64;
            while f.write_all(&chunk).is_ok() {
                written += chunk.len() as u64;
            }
            written
        })
    };
    let o = psp_gateway_bounded(&[
        "check",
        "--cert",
        fifo.to_str().expect("utf-8 path"),
        "--jurisdiction",
        "XX",
        "--offline",
    ]);
    // Should the binary not have opened the FIFO, a read-write open (which never blocks on
    // Linux) releases the writer from its own open; its writes then fail once this is dropped.
    drop(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo),
    );
    let written = writer.join().expect("writer thread");
    assert_refused_at_the_limit(&o, 65, "1048576", "--cert FIFO");
    assert!(
        written <= 64 * 1024 * 1024,
        "the reader stopped near the limit, not at the end of memory: {written} bytes written"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_at_a_future_time_is_refused_not_answered_from_todays_evidence() {
    let cert = data("psd2-certs/ica_creditas_cz_qwac_psdcz_cnb.pem");
    let tl = data("trusted-lists/CZ-tl_seq77_2019-08-23.xml");
    let o = psp_gateway(&[
        "check",
        "--cert",
        cert.to_str().expect("utf-8 path"),
        "--jurisdiction",
        "CZ",
        "--at",
        "2999-01-15T00:00:00Z",
        "--trust",
        tl.to_str().expect("utf-8 path"),
        "--offline",
    ]);
    assert_eq!(
        o.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is in the future"), "{err}");
    assert!(
        o.stdout.is_empty(),
        "no answer: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}
