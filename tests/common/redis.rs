//! A real Redis (Debian's `redis-server`, installed by scripts/test) for the shared-state
//! tests: started on a loopback port in a temporary directory from a configuration file, with
//! an ACL user and a password (the `default` user off), optionally TLS only (certificates made
//! here with rcgen); stopped, paused (SIGSTOP), resumed and restarted empty on request; killed
//! on drop.
//!
//! The port: redis-server cannot take a bound socket from its parent, so a free port is found
//! by binding `127.0.0.1:0` and closing it just before Redis starts (another process could take
//! it in between; on a test machine that does not happen in practice, and the start then
//! fails loudly rather than silently).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The ACL user the gateway logs in as.
pub const USER: &str = "gateway";
/// Its password (written to `password` in the directory, for `password_file`).
pub const PASSWORD: &str = "correct-horse-battery-staple";

/// A user for the tests' own look at the keys (`redis-cli`), never the gateway's.
const ADMIN: &str = "inspector";
const ADMIN_PASSWORD: &str = "inspector-password";

/// The commands the gateway's user may run, and no others: the minimal ACL docs/replicas.md
/// gives (the scripts' own commands, EVALSHA, and SCRIPT LOAD after a restart).
pub const ACL: &str = "+get +set +time +hmget +hset +pexpire +del +evalsha +script|load";

/// How long Redis may take to listen after it is started.
const START_BUDGET: Duration = Duration::from_secs(10);

/// TLS material of a TLS-only Redis: the CA that issued its certificate, and a CA that did not.
pub struct RedisTls {
    /// PEM of the CA that issued the server's certificate.
    pub ca: PathBuf,
    /// PEM of another CA: a client trusting only it cannot verify the server.
    pub wrong_ca: PathBuf,
}

pub struct RedisServer {
    dir: PathBuf,
    pub addr: SocketAddr,
    child: Option<Child>,
    pub tls: Option<RedisTls>,
}

impl RedisServer {
    /// A Redis on plain TCP.
    pub fn start() -> RedisServer {
        RedisServer::start_with(false, false)
    }

    /// A Redis that speaks TLS only (`tls-port`; the plain port is off).
    pub fn start_tls() -> RedisServer {
        RedisServer::start_with(true, false)
    }

    fn start_with(tls: bool, cluster: bool) -> RedisServer {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("psp-gateway-redis-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("redis dir");
        std::fs::write(dir.join("password"), format!("{PASSWORD}\n")).expect("password file");
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
            l.local_addr().expect("addr").port()
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let tls = tls.then(|| write_tls(&dir));
        let ports = if tls.is_some() {
            format!(
                "port 0\ntls-port {port}\ntls-cert-file {d}/server.pem\ntls-key-file {d}/server.key\n\
                 tls-ca-cert-file {d}/ca.pem\ntls-auth-clients no\n",
                d = dir.display()
            )
        } else {
            format!("port {port}\n")
        };
        let cluster = if cluster {
            "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 5000\n"
        } else {
            ""
        };
        let conf = format!(
            "bind 127.0.0.1\n{ports}{cluster}dir {d}\nsave \"\"\nappendonly no\ndaemonize no\n\
             logfile {d}/redis.log\nuser default off\nuser {USER} on >{PASSWORD} ~test-*:* ~{{test-*:logins}}:* {ACL}\n\
             user {ADMIN} on >{ADMIN_PASSWORD} ~* +@all\n",
            d = dir.display()
        );
        std::fs::write(dir.join("redis.conf"), conf).expect("redis.conf");
        let mut server = RedisServer {
            dir,
            addr,
            child: None,
            tls,
        };
        server.run();
        server
    }

    /// The directory (password file, certificates, configuration, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The URL of this Redis (no credentials in it).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://{}", self.addr)
    }

    fn run(&mut self) {
        let child = Command::new("redis-server")
            .arg(self.dir.join("redis.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs (Debian package redis-server; scripts/test installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + START_BUDGET;
        while TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {} within {START_BUDGET:?}: {}",
                self.addr,
                std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs one command with `redis-cli` as the inspecting user (plain TCP only); its output.
    pub fn cli(&self, args: &[&str]) -> String {
        assert!(self.tls.is_none(), "cli() speaks plain TCP");
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.addr.port().to_string()])
            .args([
                "--user",
                ADMIN,
                "--pass",
                ADMIN_PASSWORD,
                "--no-auth-warning",
            ])
            .args(args)
            .output()
            .expect("redis-cli runs (Debian package redis-tools, with redis-server)");
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Kills Redis (its data is gone: nothing is saved).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = signal(&child, "CONT");
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }

    /// SIGSTOP: connections are accepted by the kernel, nothing is answered.
    pub fn pause(&self) {
        if let Some(child) = &self.child {
            signal(child, "STOP").expect("SIGSTOP");
        }
    }

    /// SIGCONT.
    pub fn resume(&self) {
        if let Some(child) = &self.child {
            signal(child, "CONT").expect("SIGCONT");
        }
    }
}

/// A Redis Cluster of `n` masters on loopback (no replicas), every slot assigned by
/// `redis-cli --cluster create`, each node with the same users as [`RedisServer`].
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(n: usize) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..n)
            .map(|_| RedisServer::start_with(false, true))
            .collect();
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr.to_string()).collect();
        let out = Command::new("redis-cli")
            .args([
                "--user",
                ADMIN,
                "--pass",
                ADMIN_PASSWORD,
                "--no-auth-warning",
            ])
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli runs");
        assert!(out.status.success(), "redis-cli --cluster create: {out:?}");
        let deadline = Instant::now() + START_BUDGET;
        for node in &nodes {
            while !node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                assert!(Instant::now() < deadline, "the cluster did not become ok");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        RedisCluster { nodes }
    }

    /// The nodes as `cluster_nodes` lists them.
    pub fn node_list(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.to_string()).collect()
    }

    /// The node serving the slot of `key` (`CLUSTER KEYSLOT`, then `CLUSTER SLOTS`' owner).
    pub fn owner_of(&self, key: &str) -> SocketAddr {
        let slot: u16 = self.nodes[0]
            .cli(&["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("a slot");
        let shards = self.nodes[0].cli(&["CLUSTER", "SLOTS"]);
        // redis-cli prints each range as: start, end, then the master's ip, port, id, ...
        let lines: Vec<&str> = shards.lines().collect();
        let mut i = 0;
        while i + 3 < lines.len() {
            if let (Ok(start), Ok(end)) = (lines[i].parse::<u16>(), lines[i + 1].parse::<u16>())
                && (start..=end).contains(&slot)
            {
                let port: u16 = lines[i + 3].parse().expect("a port");
                return SocketAddr::from(([127, 0, 0, 1], port));
            }
            i += 1;
        }
        panic!("no owner of slot {slot} in {shards}");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn signal(child: &Child, name: &str) -> std::io::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("kill -{name}: {status}")))
    }
}

/// A CA, a server certificate for 127.0.0.1 issued by it, and another CA.
fn write_tls(dir: &Path) -> RedisTls {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test Redis CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().expect("server key");
    let mut server_params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
    server_params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress([127, 0, 0, 1].into()));
    let server = server_params
        .signed_by(&server_key, &issuer)
        .expect("server certificate");
    let other_key = rcgen::KeyPair::generate().expect("other CA key");
    let mut other_params =
        rcgen::CertificateParams::new(Vec::<String>::new()).expect("other CA params");
    other_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    other_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "another CA");
    let other = other_params.self_signed(&other_key).expect("other CA");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("ca.pem");
    std::fs::write(dir.join("wrong-ca.pem"), other.pem()).expect("wrong-ca.pem");
    std::fs::write(dir.join("server.pem"), server.pem()).expect("server.pem");
    std::fs::write(dir.join("server.key"), server_key.serialize_pem()).expect("server.key");
    RedisTls {
        ca: dir.join("ca.pem"),
        wrong_ca: dir.join("wrong-ca.pem"),
    }
}
