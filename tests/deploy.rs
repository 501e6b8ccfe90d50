//! The deployment files, checked by tools no one here wrote: `systemd-analyze verify` on the
//! unit (Debian package `systemd`) and `kubernetes-validate --strict` on the manifests (PyPI;
//! scripts/test installs both), and the manifests' configuration parsed by psp-gateway itself.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_systemd_unit_verifies_and_is_hardened() {
    let unit =
        std::fs::read_to_string(root().join("deploy/systemd/psp-gateway.service")).expect("unit");
    for needed in [
        "ExecReload=/bin/kill -HUP $MAINPID",
        "ExecStartPre=/usr/local/bin/psp-gateway config check",
        "RestartPreventExitStatus=78",
        "StateDirectory=psp-gateway",
        "NoNewPrivileges=true",
        "ProtectSystem=strict",
        "CapabilityBoundingSet=",
        "SystemCallFilter=@system-service",
        "MemoryDenyWriteExecute=true",
    ] {
        assert!(unit.contains(needed), "the unit lacks {needed}");
    }
    // systemd-analyze checks the executables exist: point them at the binary just built.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deploy_systemd");
    std::fs::create_dir_all(&dir).expect("dir");
    let copy = dir.join("psp-gateway.service");
    std::fs::write(
        &copy,
        unit.replace(
            "/usr/local/bin/psp-gateway",
            env!("CARGO_BIN_EXE_psp-gateway"),
        ),
    )
    .expect("write");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .expect("systemd-analyze runs (Debian package systemd; scripts/test installs it)");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.trim().is_empty(),
        "systemd-analyze verify has remarks:\n{said}"
    );
}

#[test]
fn the_kubernetes_manifests_validate_and_their_configuration_is_valid() {
    let path = root().join("deploy/kubernetes/psp-gateway.yaml");
    // Run as a module: a pip-installed script may not be on PATH yet (pyenv shims).
    let out = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict"])
        .arg(&path)
        .output()
        .expect("kubernetes-validate runs (PyPI; scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let text = std::fs::read_to_string(&path).expect("manifests");
    let docs: Vec<serde_json::Value> = text
        .split("\n---\n")
        .map(|d| serde_norway::from_str(d).expect("YAML"))
        .collect();
    let of_kind = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    of_kind("PodDisruptionBudget");
    let policy = of_kind("NetworkPolicy");
    assert!(policy["spec"]["policyTypes"].to_string().contains("Egress"));
    // The admin port (metrics, readiness, audit and evidence endpoints) is not open to every
    // source: each ingress rule that names it names its sources too.
    let ingress = policy["spec"]["ingress"].as_array().expect("ingress rules");
    let admin_rules: Vec<_> = ingress
        .iter()
        .filter(|rule| rule["ports"].to_string().contains("9090"))
        .collect();
    assert!(
        !admin_rules.is_empty(),
        "the admin port is reachable by someone"
    );
    for rule in admin_rules {
        assert!(
            rule["from"].as_array().is_some_and(|from| !from.is_empty()),
            "the admin port is open to every source: {rule}"
        );
    }

    let pod = &of_kind("Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(container["resources"]["limits"]["memory"].is_string());
    assert!(
        container["volumeMounts"]
            .to_string()
            .contains("/var/lib/psp-gateway"),
        "a writable data volume for what the service fetches"
    );

    // The configuration in the ConfigMap is one psp-gateway accepts, listens on all
    // addresses in the container, and holds no register (the service fetches it).
    let config_text = of_kind("ConfigMap")["data"]["gateway.toml"]
        .as_str()
        .expect("gateway.toml")
        .to_owned();
    assert!(config_text.len() < 64 * 1024);
    let config =
        psp_gateway::Config::from_toml(&config_text, Path::new("gateway.toml"), root().to_owned())
            .unwrap_or_else(|e| panic!("the ConfigMap's gateway.toml: {e}"));
    assert_eq!(
        config
            .gateway
            .as_ref()
            .expect("gateway")
            .listen
            .expect("gateway.listen")
            .ip()
            .to_string(),
        "0.0.0.0"
    );
    assert_eq!(
        config
            .admin
            .as_ref()
            .expect("admin")
            .listen
            .ip()
            .to_string(),
        "0.0.0.0"
    );
    assert!(config.registers.files.iter().all(|f| f.url.is_some()));
}
