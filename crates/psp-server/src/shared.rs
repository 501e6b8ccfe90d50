//! Counters shared by the replicas of a fleet through Redis (`[shared_state]`), with a bounded
//! latency and a failure mode per counter kind.
//!
//! ```text
//!  check(key) ─▶ breaker open? ──yes──▶ failure mode ─▶ local (limit / replicas) | open | closed
//!                    │ no                    ▲
//!                    ▼                       │ error, or no answer within `budget_ms`
//!  EVALSHA gcra (SCRIPT LOAD on NOSCRIPT) ───┘
//!                    │ answer
//!                    ▼
//!           allowed | refused (seconds until the next cell, for Retry-After)
//! ```
//!
//! Semantics: the generic cell rate algorithm, as the per-process limiter (`limiter`, governor)
//! computes it, so a fleet with Redis behaves like one process without it. Per key, Redis
//! keeps the theoretical arrival time (TAT) in microseconds; a cell costs `period / requests`;
//! a request is allowed when the TAT after it is at most `period` ahead of now. Read, decided
//! and written in one Lua script (atomic in Redis), with the clock of Redis (`TIME`), so that
//! replicas whose clocks differ agree. The key's time to live is its TAT minus now: a key
//! expires by itself exactly when it is back to full quota, at most one `period` after its last
//! allowed request; a flood from a million source addresses leaves keys that are all gone one
//! period later.
//!
//! The bound, exactly: `requests` at once (a full bucket), then one every `period / requests`.
//! Over any closed interval of length `L`, at most `requests + floor(L * requests / period)`
//! requests are allowed (a token bucket of `requests` cells refilled at `requests / period`);
//! over a long run, `requests` per `period`. So a window of length `period` can see up to
//! `2 * requests` (a full burst at its start and the refill during it): GCRA with a burst of
//! `requests` does not promise "at most `requests` in any `period`" (only a sliding log of
//! every request does, at a memory cost per request). What it does promise is that the excess
//! cannot repeat: a client that took its burst gets one cell per `period / requests` after
//! it, and over `n` periods at most `(n + 1) * requests`. That is the per-process limiter's
//! bound too (governor), shared instead of multiplied by the number of replicas.

use std::fmt::Display;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::limiter::KeyedLimiter;
use crate::redis_link::{CallError, Endpoint, Link};

/// What a counter kind does when Redis does not answer within the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureMode {
    /// Per-process counters with the limit divided by `replicas`.
    Local,
    /// Allow.
    Open,
    /// Refuse (503 with the contract's body).
    Closed,
}

impl FailureMode {
    fn label(self) -> &'static str {
        match self {
            FailureMode::Local => "local",
            FailureMode::Open => "open",
            FailureMode::Closed => "closed",
        }
    }
}

/// `[shared_state]`: Redis for the counters the replicas share. Absent: per-process counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedStateConfig {
    /// `redis://host:port[/db]` or `rediss://` (TLS); no password in it.
    pub url: String,
    /// The ACL user (`AUTH username password`); Redis's `default` user when absent.
    #[serde(default)]
    pub username: Option<String>,
    /// A file holding the password (relative to the configuration file); trailing newlines
    /// are dropped.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// An environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// For `rediss://`: the CA certificates (PEM, relative to the configuration file) the
    /// server is verified against instead of the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Prefix of every key, so that two deployments can share one Redis.
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// How long one connection attempt may take (the reconnect loop retries with backoff).
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// The most a Redis call may add to a request; past it, the failure mode decides.
    #[serde(default = "default_budget_ms")]
    pub budget_ms: u64,
    /// Replicas in the fleet: the `local` failure mode divides each limit by it.
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// Failure mode of the request rate limits.
    #[serde(default = "default_rate_limits_mode")]
    pub rate_limits: FailureMode,
    /// Failure mode of the failed-login quotas.
    #[serde(default = "default_failed_logins_mode")]
    pub failed_logins: FailureMode,
    /// Redis Cluster: every node (`host:port`, as the cluster announces it) the gateway may
    /// be sent to. Empty: one Redis (or a primary behind one address). A redirect (`MOVED`)
    /// to a node not listed is refused: a Redis that could send the gateway, and its
    /// password, anywhere is not trusted to.
    #[serde(default)]
    pub cluster_nodes: Vec<String>,
}

fn default_key_prefix() -> String {
    "psp-gateway".to_owned()
}

/// One second: a loopback or same-zone Redis connects in well under a millisecond; a TLS
/// handshake across zones in a few. Requests never wait for it (they are bounded by
/// `budget_ms`); it only bounds one attempt of the reconnect loop.
fn default_connect_timeout_ms() -> u64 {
    1_000
}

/// 5 ms (issue 25): a same-zone Redis answers in well under 1 ms; the budget leaves room for a
/// slow moment without letting a dead Redis stall requests.
fn default_budget_ms() -> u64 {
    5
}

fn default_replicas() -> u32 {
    1
}

/// A request limit protects capacity: per-process counters keep most of that protection
/// while Redis is away, and refusing every request would turn a Redis outage into an outage.
fn default_rate_limits_mode() -> FailureMode {
    FailureMode::Local
}

/// A login flood must not get through because Redis is down: per-process counters would give
/// an attacker `replicas` times the guesses by spreading them.
fn default_failed_logins_mode() -> FailureMode {
    FailureMode::Closed
}

/// Longest budget accepted: a Redis call is meant to cost a request milliseconds, not seconds.
const MAX_BUDGET_MS: u64 = 1_000;

/// Most replicas accepted: the `local` failure mode divides each limit by it, and a million
/// would leave one request per process.
const MAX_REPLICAS: u32 = 1_000;

/// Longest connection attempt accepted: the start waits for one attempt per node, and a
/// Redis that accepts and never answers (paused) held a start with `u64::MAX` for as long as
/// it was paused (docs/attacks/replicas.md).
const MAX_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Largest password file read: a password, not a file of any size (`/dev/zero` was read until
/// the process was killed).
const MAX_PASSWORD_FILE_BYTES: u64 = 4 * 1024;

/// Why a `[shared_state]` section is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedStateConfigError {
    #[error("shared_state.url must start with redis:// or rediss://")]
    Scheme,
    #[error("shared_state.url cannot be read: {0}")]
    Url(String),
    #[error(
        "shared_state.url must not hold a password: use password_file or password_env (the configuration file is not a secret store)"
    )]
    PasswordInUrl,
    #[error("shared_state: give password_file or password_env, not both")]
    TwoPasswords,
    #[error("shared_state.budget_ms must be between 1 and {MAX_BUDGET_MS}, not {0}")]
    Budget(u64),
    #[error(
        "shared_state.connect_timeout_ms must be between 1 and {MAX_CONNECT_TIMEOUT_MS}, not {0}"
    )]
    ConnectTimeout(u64),
    #[error("shared_state.replicas must be between 1 and {MAX_REPLICAS}")]
    Replicas,
    #[error(
        "shared_state.key_prefix must be non-empty, printable, without spaces and without braces"
    )]
    KeyPrefix,
    #[error("shared_state: the password cannot be read from {from}: {why}")]
    Password { from: String, why: String },
    #[error(
        "shared_state.url: no fragment (redis-rs's #insecure turns off the check of the server's name)"
    )]
    Insecure,
    #[error(
        "shared_state.url: no query (`?password=`, `?protocol=`): the settings are keys of [shared_state], and the URL is printed"
    )]
    Query,
    #[error("shared_state.cluster_nodes: {0:?} is not host:port")]
    ClusterNode(String),
    #[error("shared_state.url: Redis Cluster has database 0 only")]
    ClusterDatabase,
}

impl SharedStateConfig {
    /// Refuses what cannot work, before any port is bound.
    pub fn validate(&self) -> Result<(), SharedStateConfigError> {
        if !(self.url.starts_with("redis://") || self.url.starts_with("rediss://")) {
            return Err(SharedStateConfigError::Scheme);
        }
        let (info, _) = connection_info(&self.url)?;
        if info.redis_settings().password().is_some() {
            return Err(SharedStateConfigError::PasswordInUrl);
        }
        if self.password_file.is_some() && self.password_env.is_some() {
            return Err(SharedStateConfigError::TwoPasswords);
        }
        if self.budget_ms == 0 || self.budget_ms > MAX_BUDGET_MS {
            return Err(SharedStateConfigError::Budget(self.budget_ms));
        }
        if self.connect_timeout_ms == 0 || self.connect_timeout_ms > MAX_CONNECT_TIMEOUT_MS {
            return Err(SharedStateConfigError::ConnectTimeout(
                self.connect_timeout_ms,
            ));
        }
        if self.replicas == 0 || self.replicas > MAX_REPLICAS {
            return Err(SharedStateConfigError::Replicas);
        }
        // Braces would move the keys' hash tag (Redis Cluster's slot) into the prefix.
        if self.key_prefix.is_empty()
            || !self
                .key_prefix
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'{' && b != b'}')
        {
            return Err(SharedStateConfigError::KeyPrefix);
        }
        for node in &self.cluster_nodes {
            if host_port(node).is_none() {
                return Err(SharedStateConfigError::ClusterNode(node.clone()));
            }
        }
        if !self.cluster_nodes.is_empty() && info.redis_settings().db() != 0 {
            return Err(SharedStateConfigError::ClusterDatabase);
        }
        Ok(())
    }

    /// The password from its file (relative to `base_dir`) or variable; `None` when neither
    /// is configured.
    pub fn password(
        &self,
        base_dir: &std::path::Path,
    ) -> Result<Option<String>, SharedStateConfigError> {
        if let Some(file) = &self.password_file {
            let path = base_dir.join(file);
            let refused = |why: String| SharedStateConfigError::Password {
                from: path.display().to_string(),
                why,
            };
            let bytes = psp_cert::bounded::read_regular_file(
                &path,
                MAX_PASSWORD_FILE_BYTES,
                "a password file",
            )
            .map_err(|e| refused(e.to_string()))?;
            let text = String::from_utf8(bytes).map_err(|_| refused("not UTF-8".to_owned()))?;
            return Ok(Some(text.trim_end_matches(['\r', '\n']).to_owned()));
        }
        if let Some(var) = &self.password_env {
            let value = std::env::var(var).map_err(|e| SharedStateConfigError::Password {
                from: format!("${var}"),
                why: e.to_string(),
            })?;
            return Ok(Some(value));
        }
        Ok(None)
    }

    /// The budget as a duration.
    pub fn budget(&self) -> Duration {
        Duration::from_millis(self.budget_ms)
    }
}

/// GCRA in one round trip. KEYS[1]: the counter; ARGV[1]: the cost of a cell (µs); ARGV[2]:
/// the period (µs). Returns `{1, 0}` when allowed, `{0, µs until one more is}` when not.
/// Times are microseconds since the epoch (about 1.8e15, exact in Lua's doubles up to 9e15);
/// `%.0f` writes them without an exponent. Redis 7 replicates a script's effects, so reading
/// `TIME` before a write is allowed.
const GCRA_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cell = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
-- A steady clock never leaves tat more than a period ahead; Redis's clock stepped back did:
-- hold the client no longer than a period.
if tat > now + period then tat = now + period end
local next_tat = tat + cell
local allowed_at = next_tat - period
if allowed_at > now then
  return {0, allowed_at - now}
end
local ttl_ms = math.ceil((next_tat - now) / 1000)
redis.call('SET', KEYS[1], string.format('%.0f', next_tat), 'PX', ttl_ms)
return {1, 0}
";

/// The failed-login ledgers (`api::auth::ledger`'s semantics, shared): per key a hash of `u`,
/// the time its failures will have leaked away, and `l`, the time its last failure was
/// confirmed (µs). Shared by the charge and settle scripts.
const LEDGER_FUNCTIONS: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function load(k, period)
  local v = redis.call('HMGET', k, 'u', 'l')
  local u, l = tonumber(v[1] or '0'), tonumber(v[2] or '0')
  -- Redis's clock stepped back: nothing lies further ahead than a steady clock leaves it.
  if u > now + period then u = now + period end
  if l > now then l = now end
  return u, l
end
local function save(k, u, l, period)
  local keep = math.max(u, l + period) - now
  if keep <= 0 then redis.call('DEL', k) return end
  redis.call('HSET', k, 'u', string.format('%.0f', u), 'l', string.format('%.0f', l))
  redis.call('PEXPIRE', k, math.ceil(keep / 1000))
end
local function over(u, cell, limit)
  if u <= now then return nil end
  if math.ceil((u - now) / cell) >= limit then
    return math.max(u - now - cell * (limit - 1), 1)
  end
  return nil
end
";

/// Charges one login attempt, before its verification, to the ledgers of its source
/// (KEYS[1]), its (user, source) pair (KEYS[2]) and its user name (KEYS[3]); ARGV: the three
/// cells (µs), the three limits, the period (µs). As `api::auth::charge_attempt` does per
/// process: refused (`{0, µs to wait, 1 when the source itself is at its limit}`) when the
/// source or the pair is at its limit, nothing charged; else both charged, the user name charged unless at its limit (then it is under
/// attack), and `{1, 0, pair was clean, under attack}`.
const LOGIN_CHARGE_SCRIPT: &str = r"
local period = tonumber(ARGV[7])
local c1, c2, c3 = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local l1, l2, l3 = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local su, sl = load(KEYS[1], period)
local w = over(su, c1, l1)
if w then return {0, w, 1, 0} end
local pu, pl = load(KEYS[2], period)
w = over(pu, c2, l2)
if w then return {0, w, 0, 0} end
local clean = 0
if pu <= now and pl + period <= now then clean = 1 end
save(KEYS[1], math.max(su, now) + c1, sl, period)
save(KEYS[2], math.max(pu, now) + c2, pl, period)
local uu, ul = load(KEYS[3], period)
local attack = 0
if over(uu, c3, l3) then attack = 1 else save(KEYS[3], math.max(uu, now) + c3, ul, period) end
return {1, 0, clean, attack}
";

/// Settles a charge: ARGV[4] `refund` gives one cell back to each ledger (the password was
/// right, or never verified), `fail` records the failure's time; ARGV[5] `0` when the user
/// name's ledger took no charge; ARGV[1..3] the cells, ARGV[6] the period.
const LOGIN_SETTLE_SCRIPT: &str = r"
local period = tonumber(ARGV[6])
local n = 3
if ARGV[5] == '0' then n = 2 end
for i = 1, n do
  local u, l = load(KEYS[i], period)
  if ARGV[4] == 'refund' then u = math.max(u - tonumber(ARGV[i]), now) else l = now end
  save(KEYS[i], u, l, period)
end
return 1
";

/// One login attempt's ledgers in Redis: the keys, cells and limits of the three quotas.
#[derive(Debug, Clone)]
pub struct LoginLedgers {
    /// Source, (user, source) pair, user name: the key parts after the prefix.
    pub keys: [String; 3],
    /// `requests` of each quota.
    pub limits: [u32; 3],
    pub period: Duration,
}

impl LoginLedgers {
    fn cells_us(&self) -> [u64; 3] {
        let period = u64::try_from(self.period.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        self.limits
            .map(|limit| (period / u64::from(limit.max(1))).max(1))
    }

    fn period_us(&self) -> u64 {
        u64::try_from(self.period.as_micros())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// What Redis made of a login attempt's charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginCharge {
    /// The source or the pair is at its limit: whole seconds to wait, and whether it is the
    /// source itself (then every user name from it is refused); nothing charged.
    Refused { wait: u64, source_wide: bool },
    /// Charged; whether the pair was clean, and whether the user name is under attack (then
    /// it took no charge).
    Charged {
        clean_pair: bool,
        under_attack: bool,
    },
}

/// Whether Redis answered a script with an error of the script's own (an ACL without one of
/// its commands, keys in several cluster slots, an error in the script), rather than the
/// connection failing (I/O, a server loading or down, and any error the client library does
/// not know, such as `WRONGPASS` when the connection logs in).
fn script_refused(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::ResponseError
                | ServerErrorKind::NoScript
                | ServerErrorKind::NoPerm
                | ServerErrorKind::CrossSlot
                | ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::ExecAbort
        )
    )
}

/// Whole seconds to wait from a script's answer in µs, never more than the `period_us` a
/// steady clock can make a client wait (a reply Redis never sends, or a counter written by
/// something else, cannot hold a client longer, nor give a `Retry-After` of 2⁶³ µs).
fn wait_secs(wait_us: i64, period_us: u64) -> u64 {
    u64::try_from(wait_us)
        .unwrap_or(0)
        .min(period_us)
        .div_ceil(1_000_000)
        .max(1)
}

/// After a failed call, calls are skipped (the failure mode decides at once) for this long;
/// the first request after it tries Redis again. Half a second: recovery is seen within a
/// second of Redis answering again, and a dead Redis costs one budget per half second, not
/// one per request.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

/// A call that gets no answer within its budget follows the failure mode alone; the kind
/// switches to its failure mode (and skips Redis for [`RETRY_AFTER_FAILURE`]) only once none
/// of its calls has been answered for this long, counted from the send of the first call
/// that missed. A busy process (a flood of TLS handshakes on the same cores, a scheduler's
/// slice) delays a reply by milliseconds, and must not switch the failure mode on for the
/// half second after it (issue 39); a Redis that stopped answering does so within 50 ms.
const SILENCE_BEFORE_DEGRADED: Duration = Duration::from_millis(50);

/// Why a shared count could not be had within the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// No answer within the budget.
    Timeout,
    /// Redis answered with an error, or there is no connection.
    Error,
    /// A recent failure: not tried (for half a second after a failure, unless a new connection
    /// was made since).
    Skipped,
}

/// A script: its text (loaded on every new connection, and again on `NOSCRIPT`) and its SHA-1.
struct Script {
    code: String,
    hash: String,
}

impl Script {
    fn new(code: String) -> Script {
        let hash = redis::Script::new(&code).get_hash().to_owned();
        Script { code, hash }
    }
}

/// The nodes the counters live on: one, or a Redis Cluster's listed nodes with the slots
/// learned from its redirects.
struct Nodes {
    /// The URL's node first; in a cluster, every `cluster_nodes` entry after it.
    links: Vec<Arc<Link>>,
    cluster: bool,
    /// Cluster: which of `links` serves a slot, as its last `MOVED` said (the URL's node until
    /// then).
    slots: std::sync::Mutex<std::collections::HashMap<u16, usize>>,
}

impl Nodes {
    fn link_for(&self, slot: Option<u16>) -> &Arc<Link> {
        let index = slot
            .and_then(|slot| {
                self.slots
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(&slot)
                    .copied()
            })
            .unwrap_or(0);
        &self.links[index]
    }

    /// The link a `MOVED` names, when it is one of the listed nodes (then remembered for the
    /// slot).
    fn moved(&self, slot: u16, host: &str, port: u16) -> Option<&Arc<Link>> {
        let wanted = node_name(host, port);
        let index = self.links.iter().position(|l| l.name() == wanted)?;
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(slot, index);
        Some(&self.links[index])
    }

    /// `EVALSHA` of `script` on the node that holds `keys`, until `deadline`: loads the script
    /// once on `NOSCRIPT` and follows one `MOVED` to a listed node.
    async fn eval(
        &self,
        script: &Script,
        keys: &[String],
        args: &[String],
        deadline: tokio::time::Instant,
    ) -> Result<redis::Value, CallError> {
        let slot = self
            .cluster
            .then(|| keys.first().map(|k| key_slot(k.as_bytes())))
            .flatten();
        let mut link = self.link_for(slot);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&script.hash).arg(keys.len()).arg(keys).arg(args);
        let (mut loaded, mut redirected) = (false, false);
        loop {
            match link.call(&cmd, deadline).await {
                Err(CallError::Redis(e)) if is(&e, redis::ServerErrorKind::NoScript) && !loaded => {
                    loaded = true;
                    let mut load = redis::cmd("SCRIPT");
                    load.arg("LOAD").arg(&script.code);
                    link.call(&load, deadline).await?;
                }
                Err(CallError::Redis(e))
                    if is(&e, redis::ServerErrorKind::Moved) && !redirected =>
                {
                    redirected = true;
                    // `MOVED <slot> <host>:<port>`.
                    let target = e.redirect_node().and_then(|(node, moved_slot)| {
                        host_port(node).map(|(host, port)| (moved_slot, host, port))
                    });
                    let (Some(_), Some((moved_slot, host, port))) = (slot, target) else {
                        return Err(CallError::Redirect(format!(
                            "redirected ({e}) while shared_state.cluster_nodes is empty: list the cluster's nodes"
                        )));
                    };
                    link = self.moved(moved_slot, &host, port).ok_or_else(|| {
                        CallError::Redirect(format!(
                            "redirected to {}, which is not in shared_state.cluster_nodes",
                            node_name(&host, port)
                        ))
                    })?;
                }
                other => return other,
            }
        }
    }
}

fn is(e: &redis::RedisError, kind: redis::ServerErrorKind) -> bool {
    e.kind() == redis::ErrorKind::Server(kind)
}

/// `host:port`, with brackets around an IPv6 address.
fn node_name(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `host:port` (or `[v6]:port`) split.
fn host_port(node: &str) -> Option<(String, u16)> {
    let (host, port) = node.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    (!host.is_empty() && !host.contains(['/', '@', ' '])).then(|| (host.to_owned(), port))
}

/// Redis Cluster's hash slot of a key: CRC16 (XMODEM) of the key, or of its hash tag (the
/// text between the first `{` and the first `}` after it, when not empty), modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|b| *b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|b| *b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16_xmodem(tagged.unwrap_or(key)) % 16384
}

fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for byte in data {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The connection to Redis of one process, and whether it answers.
pub struct SharedState {
    nodes: Nodes,
    script: Script,
    login_charge: Script,
    login_settle: Script,
    prefix: String,
    budget: Duration,
    replicas: u32,
    rate_limits: FailureMode,
    failed_logins: FailureMode,
    /// Per counter kind ([`CounterKind::index`]): whether its last call was answered (for
    /// `/readyz`, the gauge, and logging once per change of state). One kind's failure (an
    /// ACL that lacks a command only the login scripts use) never decides for the other.
    up: [AtomicBool; 2],
    /// Per counter kind: nanoseconds after `epoch` before which its calls are skipped.
    retry_at: [AtomicU64; 2],
    /// Per counter kind: whether its last failure was its own (Redis answered its script
    /// with an error: a missing ACL permission, `CROSSSLOT`), not the connection's. A
    /// connection's failure ends for every kind as soon as one kind is answered again, or a
    /// new connection is made.
    own_failure: [AtomicBool; 2],
    /// Per counter kind: `connects` when it last failed.
    failed_at_connects: [AtomicU64; 2],
    /// Per counter kind: whether its last failure was a connection that was lost or could not
    /// be made, which a new connection ends. Not a missed budget: a Redis slower than the
    /// budget is as slow on a new connection, and lifting the hold for each new one made every
    /// request pay the budget and a reconnection (docs/attacks/replicas.md).
    lost_connection: [AtomicBool; 2],
    /// Per counter kind: nanoseconds after `epoch` (at least 1) when the first call that
    /// missed its budget since the last answer was sent; 0 while calls are answered.
    unanswered_since: [AtomicU64; 2],
    /// Connections made so far, by every node's link.
    connects: Arc<AtomicU64>,
    epoch: Instant,
}

/// The endpoint of the URL's node (its host and port, the credentials, TLS); the cluster's
/// other nodes are reached the same way at their own host and port.
fn endpoint_of(
    config: &SharedStateConfig,
    password: Option<&str>,
    root_pem: Option<&[u8]>,
) -> Result<Endpoint, SharedStateError> {
    let (info, tls) = connection_info(&config.url).map_err(|e| SharedStateError(e.to_string()))?;
    let mut settings = info.redis_settings().clone();
    if let Some(user) = &config.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    let tls = if tls {
        Some(tls_config(root_pem)?)
    } else {
        None
    };
    let redis::ConnectionAddr::Tcp(host, port) = info.addr() else {
        return Err(SharedStateError(
            "only redis:// and rediss:// are supported".to_owned(),
        ));
    };
    Ok(Endpoint {
        host: host.clone(),
        port: *port,
        tls,
        settings,
        connect_timeout: Duration::from_millis(config.connect_timeout_ms),
    })
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedState")
            .field(
                "nodes",
                &self
                    .nodes
                    .links
                    .iter()
                    .map(|l| l.name())
                    .collect::<Vec<_>>(),
            )
            .field("budget", &self.budget)
            .field("replicas", &self.replicas)
            .field("rate_limits", &self.rate_limits)
            .field("failed_logins", &self.failed_logins)
            .finish_non_exhaustive()
    }
}

/// Why the shared state cannot be set up (a configuration the client library refuses).
#[derive(Debug, thiserror::Error)]
#[error("shared_state: {0}")]
pub struct SharedStateError(String);

impl SharedState {
    /// Prepares the connections; they are made in the background (and by
    /// [`SharedState::connect`] at start-up), so that a Redis down at start-up does not stop
    /// the gateway (the failure modes decide until it answers). `root_pem`: the CA
    /// certificates (PEM) a `rediss://` server is verified against instead of the system's
    /// roots. Needs a Tokio runtime.
    pub fn new(
        config: &SharedStateConfig,
        password: Option<String>,
        root_pem: Option<Vec<u8>>,
    ) -> Result<Arc<SharedState>, SharedStateError> {
        config
            .validate()
            .map_err(|e| SharedStateError(e.to_string()))?;
        let endpoint = endpoint_of(config, password.as_deref(), root_pem.as_deref())?;
        let script = Script::new(GCRA_SCRIPT.to_owned());
        let login_charge = Script::new(format!("{LEDGER_FUNCTIONS}{LOGIN_CHARGE_SCRIPT}"));
        let login_settle = Script::new(format!("{LEDGER_FUNCTIONS}{LOGIN_SETTLE_SCRIPT}"));
        let codes = vec![
            script.code.clone(),
            login_charge.code.clone(),
            login_settle.code.clone(),
        ];
        let connects = Arc::new(AtomicU64::new(0));
        let mut links = vec![Link::new(endpoint.clone(), connects.clone(), codes.clone())];
        for node in &config.cluster_nodes {
            let (h, p) = host_port(node)
                .ok_or_else(|| SharedStateError(format!("cluster node {node:?}")))?;
            if links.iter().all(|l| l.name() != node_name(&h, p)) {
                let mut node = endpoint.clone();
                (node.host, node.port) = (h, p);
                links.push(Link::new(node, connects.clone(), codes.clone()));
            }
        }
        let state = SharedState {
            nodes: Nodes {
                links,
                cluster: !config.cluster_nodes.is_empty(),
                slots: std::sync::Mutex::new(std::collections::HashMap::new()),
            },
            script,
            login_charge,
            login_settle,
            prefix: config.key_prefix.clone(),
            budget: config.budget(),
            replicas: config.replicas,
            rate_limits: config.rate_limits,
            failed_logins: config.failed_logins,
            // Unknown until the first call: counted as up so that the first failure is
            // logged.
            up: [AtomicBool::new(true), AtomicBool::new(true)],
            retry_at: [AtomicU64::new(0), AtomicU64::new(0)],
            own_failure: [AtomicBool::new(false), AtomicBool::new(false)],
            failed_at_connects: [AtomicU64::new(0), AtomicU64::new(0)],
            lost_connection: [AtomicBool::new(false), AtomicBool::new(false)],
            unanswered_since: [AtomicU64::new(0), AtomicU64::new(0)],
            connects,
            epoch: Instant::now(),
        };
        crate::telemetry::metrics::metrics().shared_state_up.set(1);
        crate::telemetry::metrics::metrics()
            .shared_state_configured
            .set(1);
        Ok(Arc::new(state))
    }

    /// Connects to every node now (each bounded by `connect_timeout_ms`), so that the first
    /// requests find a connection; a node that cannot be reached is retried in the background
    /// and logged. Returns why each node that failed did (`node: cause`).
    pub async fn connect(&self) -> Vec<String> {
        let mut failed = Vec::new();
        for link in &self.nodes.links {
            if let Err(why) = link.connect_now().await {
                tracing::warn!(node = link.name(), error = %why, "shared state (Redis): not connected at start; the failure modes decide until it is");
                failed.push(format!("{}: {why}", link.name()));
            }
        }
        failed
    }

    /// Whether the last call of every counter kind was answered within the budget
    /// (`/readyz`).
    pub fn is_up(&self) -> bool {
        self.up.iter().all(|up| up.load(Ordering::Relaxed))
    }

    /// The budget of one call.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The failure mode of a counter kind.
    pub fn mode(&self, kind: CounterKind) -> FailureMode {
        match kind {
            CounterKind::RateLimits => self.rate_limits,
            CounterKind::FailedLogins => self.failed_logins,
        }
    }

    /// Replicas in the fleet (the `local` mode divides limits by it).
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Takes one cell of `requests` per `period` for `table:key` in Redis: `Ok(Ok(()))`
    /// allowed, `Ok(Err(secs))` refused until then, `Err` when Redis did not decide within the
    /// budget.
    pub async fn take(
        &self,
        table: &str,
        key: &str,
        requests: u32,
        period: Duration,
    ) -> Result<Result<(), u64>, Unavailable> {
        let requests = requests.max(1);
        let period_us = u64::try_from(period.as_micros()).unwrap_or(u64::MAX).max(1);
        let cell_us = (period_us / u64::from(requests)).max(1);
        let keys = [format!("{}:{table}:{key}", self.prefix)];
        let args = [cell_us.to_string(), period_us.to_string()];
        let (allowed, wait_us) = self
            .run::<(i64, i64)>(CounterKind::RateLimits, &self.script, &keys, &args)
            .await?;
        Ok(if allowed == 1 {
            Ok(())
        } else {
            Err(wait_secs(wait_us, period_us))
        })
    }

    /// Runs `script` for a counter of `kind` within the budget (measured from the call, with
    /// no password work on the threads that wait for it: `api::auth`'s workers), keeping that
    /// kind's state (up or degraded) current.
    async fn run<T: redis::FromRedisValue>(
        &self,
        kind: CounterKind,
        script: &Script,
        keys: &[String],
        args: &[String],
    ) -> Result<T, Unavailable> {
        let i = kind.index();
        if self.now_nanos() < self.retry_at[i].load(Ordering::Relaxed) {
            // A lost connection holds calls back until a new connection is made.
            let reconnected = self.lost_connection[i].load(Ordering::Relaxed)
                && self.connects.load(Ordering::Relaxed)
                    != self.failed_at_connects[i].load(Ordering::Relaxed);
            if !reconnected {
                return Err(Unavailable::Skipped);
            }
        }
        let sent = self.now_nanos().max(1);
        let deadline = tokio::time::Instant::now() + self.budget;
        match self.nodes.eval(script, keys, args, deadline).await {
            Ok(value) => match T::from_redis_value(value) {
                Ok(value) => {
                    self.answered(kind);
                    Ok(value)
                }
                Err(e) => {
                    self.failed(kind, &format!("an answer of the wrong shape: {e}"), true);
                    Err(Unavailable::Error)
                }
            },
            Err(CallError::Timeout) => {
                if self.silent_for_long(kind, sent) {
                    self.failed(kind, "no answer within the budget for 50 ms", false);
                }
                Err(Unavailable::Timeout)
            }
            Err(CallError::Redis(e)) => {
                let own = script_refused(&e);
                self.failed(kind, &e.to_string(), own);
                self.lost_connection[kind.index()].store(
                    !own && !matches!(e.kind(), redis::ErrorKind::Server(_)),
                    Ordering::Relaxed,
                );
                Err(Unavailable::Error)
            }
            Err(e @ CallError::NotConnected(_)) => {
                // No connection within the budget: as a missed budget (a connection ended by
                // one is being made again), until the silence lasts.
                if self.silent_for_long(kind, sent) {
                    self.failed(kind, &e.to_string(), false);
                    self.lost_connection[kind.index()].store(true, Ordering::Relaxed);
                }
                Err(Unavailable::Error)
            }
            Err(e @ CallError::Redirect(_)) => {
                self.failed(kind, &e.to_string(), false);
                Err(Unavailable::Error)
            }
        }
    }

    /// Records a call of `kind` sent at `sent` that got no answer within its budget, and
    /// says whether the kind has now gone unanswered for [`SILENCE_BEFORE_DEGRADED`].
    fn silent_for_long(&self, kind: CounterKind, sent: u64) -> bool {
        let since = &self.unanswered_since[kind.index()];
        let first = match since.compare_exchange(0, sent, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => sent,
            Err(earlier) => earlier.min(sent),
        };
        let silence = u64::try_from(SILENCE_BEFORE_DEGRADED.as_nanos()).unwrap_or(u64::MAX);
        self.now_nanos().saturating_sub(first) >= silence
    }

    /// The keys of a login attempt's three ledgers, with one hash tag: the charge and settle
    /// scripts use all three, which Redis Cluster allows only within one slot.
    fn login_keys(&self, ledgers: &LoginLedgers) -> [String; 3] {
        ledgers
            .keys
            .each_ref()
            .map(|k| format!("{{{}:logins}}:{k}", self.prefix))
    }

    /// Charges a login attempt to its three ledgers in one round trip (see
    /// `LOGIN_CHARGE_SCRIPT`), within the budget.
    pub async fn charge_login(&self, ledgers: &LoginLedgers) -> Result<LoginCharge, Unavailable> {
        let keys = self.login_keys(ledgers);
        let mut args: Vec<String> = ledgers.cells_us().iter().map(u64::to_string).collect();
        args.extend(ledgers.limits.iter().map(|l| l.max(&1).to_string()));
        args.push(ledgers.period_us().to_string());
        let (charged, wait_us, clean, attack) = self
            .run::<(i64, i64, i64, i64)>(
                CounterKind::FailedLogins,
                &self.login_charge,
                &keys,
                &args,
            )
            .await?;
        Ok(if charged == 1 {
            LoginCharge::Charged {
                clean_pair: clean == 1,
                under_attack: attack == 1,
            }
        } else {
            LoginCharge::Refused {
                wait: wait_secs(wait_us, ledgers.period_us()),
                source_wide: clean == 1,
            }
        })
    }

    /// Settles a charge: `refund` when the password was right (or never verified), else
    /// records the failure. Within the budget; when Redis does not answer, a refund is lost
    /// (the charge leaks away within the period, erring towards refusing) and so is the
    /// failure's time (the pair may look clean to the slow lane once more).
    pub async fn settle_login(
        &self,
        ledgers: &LoginLedgers,
        refund: bool,
        user_charged: bool,
    ) -> Result<(), Unavailable> {
        let keys = self.login_keys(ledgers);
        let mut args: Vec<String> = ledgers.cells_us().iter().map(u64::to_string).collect();
        args.push(if refund { "refund" } else { "fail" }.to_owned());
        args.push(if user_charged { "1" } else { "0" }.to_owned());
        args.push(ledgers.period_us().to_string());
        self.run::<i64>(CounterKind::FailedLogins, &self.login_settle, &keys, &args)
            .await
            .map(|_| ())
    }

    /// Counts a decision taken by the failure mode of `kind` and returns the mode.
    pub fn fall_back(&self, kind: CounterKind) -> FailureMode {
        let mode = self.mode(kind);
        crate::telemetry::metrics::metrics()
            .shared_state_fallbacks
            .get_or_create(&crate::telemetry::metrics::FallbackLabels {
                kind: kind.label().to_owned(),
                mode: mode.label().to_owned(),
            })
            .inc();
        mode
    }

    fn failed(&self, kind: CounterKind, why: &str, own: bool) {
        let i = kind.index();
        let retry = self
            .now_nanos()
            .saturating_add(u64::try_from(RETRY_AFTER_FAILURE.as_nanos()).unwrap_or(u64::MAX));
        self.retry_at[i].store(retry, Ordering::Relaxed);
        self.own_failure[i].store(own, Ordering::Relaxed);
        self.failed_at_connects[i].store(self.connects.load(Ordering::Relaxed), Ordering::Relaxed);
        self.lost_connection[i].store(false, Ordering::Relaxed);
        if self.up[i].swap(false, Ordering::Relaxed) {
            crate::telemetry::metrics::metrics().shared_state_up.set(0);
            crate::telemetry::metrics::metrics()
                .shared_state_degradations
                .get_or_create(&crate::telemetry::metrics::KindLabels {
                    kind: kind.label().to_owned(),
                })
                .inc();
            tracing::warn!(
                kind = kind.label(),
                error = why,
                "shared state (Redis) degraded for this kind of counter: it follows its failure mode"
            );
        }
    }

    fn answered(&self, kind: CounterKind) {
        self.unanswered_since[kind.index()].store(0, Ordering::Relaxed);
        // The connection answers: a kind that failed for the connection's sake (not its own
        // script's) is answered again too.
        for other in [CounterKind::RateLimits, CounterKind::FailedLogins] {
            let i = other.index();
            let again = if other == kind {
                !self.up[i].swap(true, Ordering::Relaxed)
            } else {
                !self.own_failure[i].load(Ordering::Relaxed)
                    && !self.up[i].swap(true, Ordering::Relaxed)
            };
            if again {
                self.retry_at[i].store(0, Ordering::Relaxed);
                tracing::info!(
                    kind = other.label(),
                    "shared state (Redis) answers again for this kind of counter: it is shared"
                );
            }
        }
        if self.is_up() {
            crate::telemetry::metrics::metrics().shared_state_up.set(1);
        }
    }
}

/// The kinds of shared counters, each with its failure mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterKind {
    RateLimits,
    FailedLogins,
}

impl CounterKind {
    /// Its place in the per-kind state of [`SharedState`].
    fn index(self) -> usize {
        match self {
            CounterKind::RateLimits => 0,
            CounterKind::FailedLogins => 1,
        }
    }

    fn label(self) -> &'static str {
        match self {
            CounterKind::RateLimits => "rate_limits",
            CounterKind::FailedLogins => "failed_logins",
        }
    }
}

/// A refusal by a [`SharedLimiter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Over the quota: whole seconds until the next cell (for `Retry-After`).
    Limited(u64),
    /// Redis did not decide and the failure mode is `closed`.
    Unavailable,
}

/// A rate limit counted in Redis, or per process when `[shared_state]` is absent.
pub enum SharedLimiter<K: Hash + Eq + Clone> {
    /// Per process (today's behaviour; synchronous, no cost).
    Local(KeyedLimiter<K>),
    /// In Redis, with the failure mode's fallback.
    Shared {
        state: Arc<SharedState>,
        /// Written before each key in Redis (a site's name and a colon), so that limiters with
        /// the same table keep their own counters.
        scope: String,
        kind: CounterKind,
        /// The key table's name (`requests`, `logins-per-source`, ...).
        table: &'static str,
        requests: u32,
        period: Duration,
        /// The `local` failure mode's counters: `requests / replicas` each.
        fallback: KeyedLimiter<K>,
    },
}

impl<K: Hash + Eq + Clone + Display> SharedLimiter<K> {
    /// `requests` per `period` per key; shared when `state` is given.
    pub fn new(
        state: Option<&Arc<SharedState>>,
        kind: CounterKind,
        requests: u32,
        period: Duration,
        capacity: usize,
        table: &'static str,
    ) -> Self {
        match state {
            None => SharedLimiter::Local(KeyedLimiter::new(requests, period, capacity, table)),
            Some(state) => SharedLimiter::Shared {
                state: state.clone(),
                scope: String::new(),
                kind,
                table,
                requests,
                period,
                fallback: KeyedLimiter::new(
                    (requests / state.replicas().max(1)).max(1),
                    period,
                    capacity,
                    table,
                ),
            },
        }
    }

    /// Its Redis keys scoped by `scope` (a site's name): two limiters with the same table
    /// and different scopes never share a counter.
    pub fn scoped(mut self, scope: &str) -> Self {
        if let SharedLimiter::Shared { scope: s, .. } = &mut self {
            *s = format!("{scope}:");
        }
        self
    }

    /// The settings it was built with (requests, period, table capacity), and whether it is
    /// shared (a reload keeps a limiter whose settings are unchanged).
    pub fn settings(&self) -> (u32, Duration, usize, bool) {
        match self {
            SharedLimiter::Local(l) => {
                let (r, p, c) = l.settings();
                (r, p, c, false)
            }
            SharedLimiter::Shared {
                requests,
                period,
                fallback,
                ..
            } => (*requests, *period, fallback.settings().2, true),
        }
    }

    /// The per-process limiter (the only one when not shared; the fallback when shared).
    pub fn local(&self) -> &KeyedLimiter<K> {
        match self {
            SharedLimiter::Local(l) => l,
            SharedLimiter::Shared { fallback, .. } => fallback,
        }
    }

    /// Takes one cell for `key`. Not shared: synchronous underneath. Shared: at most the
    /// budget in Redis, then the failure mode.
    pub async fn check(&self, key: &K) -> Result<(), Refusal> {
        match self {
            SharedLimiter::Local(l) => l.check(key).map_err(Refusal::Limited),
            SharedLimiter::Shared {
                state,
                scope,
                kind,
                table,
                requests,
                period,
                fallback,
            } => {
                let redis_key = format!("{scope}{key}");
                match state.take(table, &redis_key, *requests, *period).await {
                    Ok(decision) => decision.map_err(Refusal::Limited),
                    Err(_) => match state.fall_back(*kind) {
                        FailureMode::Local => fallback.check(key).map_err(Refusal::Limited),
                        FailureMode::Open => Ok(()),
                        FailureMode::Closed => Err(Refusal::Unavailable),
                    },
                }
            }
        }
    }
}

/// The connection information of `url`, and whether it is `rediss://` (TLS, made by
/// `redis_link`, so the URL is read as `redis://`). A fragment (`#insecure`, which turns off
/// the server name's check in redis-rs) is refused.
fn connection_info(url: &str) -> Result<(redis::ConnectionInfo, bool), SharedStateConfigError> {
    let (plain, tls) = match url.strip_prefix("rediss://") {
        Some(rest) => (format!("redis://{rest}"), true),
        None if url.starts_with("redis://") => (url.to_owned(), false),
        None => return Err(SharedStateConfigError::Scheme),
    };
    if plain.contains('#') {
        return Err(SharedStateConfigError::Insecure);
    }
    if plain.contains('?') {
        return Err(SharedStateConfigError::Query);
    }
    let info = redis::IntoConnectionInfo::into_connection_info(plain.as_str())
        .map_err(|e| SharedStateConfigError::Url(e.to_string()))?;
    Ok((info, tls))
}

/// The TLS client of a `rediss://` Redis: its name checked, against `root_pem` (PEM) or the
/// system's roots, with the ring provider.
fn tls_config(root_pem: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, SharedStateError> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match root_pem {
        Some(pem) => {
            for certificate in rustls_pki_types::CertificateDer::pem_slice_iter(pem) {
                let certificate = certificate
                    .map_err(|e| SharedStateError(format!("ca_file is not PEM: {e}")))?;
                roots
                    .add(certificate)
                    .map_err(|e| SharedStateError(format!("ca_file: {e}")))?;
            }
            if roots.is_empty() {
                return Err(SharedStateError("ca_file holds no certificate".to_owned()));
            }
        }
        None => {
            for certificate in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(certificate);
            }
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| SharedStateError(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> SharedStateConfig {
        SharedStateConfig {
            url: url.to_owned(),
            username: Some("gateway".to_owned()),
            password_file: None,
            password_env: Some("REDIS_PASSWORD".to_owned()),
            ca_file: None,
            key_prefix: default_key_prefix(),
            connect_timeout_ms: default_connect_timeout_ms(),
            budget_ms: default_budget_ms(),
            replicas: 3,
            rate_limits: default_rate_limits_mode(),
            failed_logins: default_failed_logins_mode(),
            cluster_nodes: Vec::new(),
        }
    }

    #[test]
    fn a_wait_from_redis_is_never_more_than_one_period() {
        let period_us = 300 * 1_000_000;
        assert_eq!(wait_secs(1_500_000, period_us), 2);
        assert_eq!(wait_secs(0, period_us), 1);
        assert_eq!(wait_secs(-5, period_us), 1);
        // A reply of 2^63 µs (a hostile or broken Redis): one period, not 9,223,372,036,855 s.
        assert_eq!(wait_secs(i64::MAX, period_us), 300);
    }

    #[test]
    fn a_url_with_a_password_in_it_is_refused() {
        assert_eq!(
            config("redis://gateway:secret@127.0.0.1:6379").validate(),
            Err(SharedStateConfigError::PasswordInUrl)
        );
        assert_eq!(config("redis://127.0.0.1:6379").validate(), Ok(()));
        assert_eq!(config("rediss://redis.internal:6380/2").validate(), Ok(()));
        // A query is refused (docs/attacks/replicas.md O4: `?password=` was printed back).
        assert_eq!(
            config("redis://127.0.0.1:6379/?password=pw").validate(),
            Err(SharedStateConfigError::Query)
        );
    }

    #[test]
    fn other_schemes_budgets_and_replica_counts_are_refused() {
        assert_eq!(
            config("http://127.0.0.1:6379").validate(),
            Err(SharedStateConfigError::Scheme)
        );
        assert_eq!(
            config("unix:///run/redis.sock").validate(),
            Err(SharedStateConfigError::Scheme)
        );
        let mut c = config("redis://127.0.0.1");
        c.budget_ms = 0;
        assert_eq!(c.validate(), Err(SharedStateConfigError::Budget(0)));
        c.budget_ms = 5_000;
        assert_eq!(c.validate(), Err(SharedStateConfigError::Budget(5_000)));
        let mut c = config("redis://127.0.0.1");
        c.connect_timeout_ms = u64::MAX;
        assert_eq!(
            c.validate(),
            Err(SharedStateConfigError::ConnectTimeout(u64::MAX))
        );
        let mut c = config("redis://127.0.0.1");
        c.replicas = 0;
        assert_eq!(c.validate(), Err(SharedStateConfigError::Replicas));
        c.replicas = 1_000_000;
        assert_eq!(c.validate(), Err(SharedStateConfigError::Replicas));
        let mut c = config("redis://127.0.0.1");
        c.password_file = Some("pw".into());
        assert_eq!(c.validate(), Err(SharedStateConfigError::TwoPasswords));
        let mut c = config("redis://127.0.0.1");
        c.key_prefix = "two words".to_owned();
        assert_eq!(c.validate(), Err(SharedStateConfigError::KeyPrefix));
    }

    #[test]
    fn the_defaults_are_local_for_rate_limits_and_closed_for_failed_logins() {
        let c = config("redis://127.0.0.1");
        assert_eq!(c.rate_limits, FailureMode::Local);
        assert_eq!(c.failed_logins, FailureMode::Closed);
        assert_eq!(c.budget(), Duration::from_millis(5));
    }

    #[test]
    fn a_password_file_that_is_a_device_a_fifo_or_too_large_is_refused() {
        let mut c = config("redis://127.0.0.1");
        c.password_env = None;
        for (file, why) in [
            ("/dev/zero", "not a regular file"),
            ("/dev/urandom", "not a regular file"),
        ] {
            c.password_file = Some(file.into());
            let e = c.password(std::path::Path::new("/")).expect_err(file);
            assert!(e.to_string().contains(why), "{e}");
        }
        let dir = std::env::temp_dir().join(format!("psp-shared-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("big"), vec![b'x'; 5_000]).expect("write");
        c.password_file = Some("big".into());
        let e = c.password(&dir).expect_err("too large");
        assert!(e.to_string().contains("4096-byte limit"), "{e}");
        std::fs::write(dir.join("pw"), "secret\n").expect("write");
        c.password_file = Some("pw".into());
        assert_eq!(c.password(&dir).expect("read"), Some("secret".to_owned()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_unreachable_redis_is_decided_by_the_failure_mode_within_the_budget() {
        // Port 1 on loopback: connection refused at once.
        let mut c = config("redis://127.0.0.1:1");
        c.budget_ms = 50;
        let state = SharedState::new(&c, None, None).expect("a lazy client");
        let limiter: SharedLimiter<u32> = SharedLimiter::new(
            Some(&state),
            CounterKind::RateLimits,
            6,
            Duration::from_secs(300),
            100,
            "test",
        );
        let started = Instant::now();
        // local: 6 / 3 replicas = 2 per process.
        assert_eq!(limiter.check(&1).await, Ok(()));
        assert_eq!(limiter.check(&1).await, Ok(()));
        assert!(matches!(limiter.check(&1).await, Err(Refusal::Limited(_))));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(!state.is_up());
        let closed: SharedLimiter<u32> = SharedLimiter::new(
            Some(&state),
            CounterKind::FailedLogins,
            6,
            Duration::from_secs(300),
            100,
            "test",
        );
        assert_eq!(closed.check(&1).await, Err(Refusal::Unavailable));
    }
}
