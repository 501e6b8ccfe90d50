//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>, Recommendation of 23 November
//! 2021): the `traceparent` and `tracestate` request headers, parsed strictly, and the
//! context of one hop through the gateway.
//!
//! Pure code: no clock, no I/O; the random ids come in through [`IdSource`]. It lives in
//! `psp-service` (beside the log setup) rather than in `psp-server` because the OpenTelemetry
//! bridge of `telemetry` needs the ids too, and layers point down: `psp-server` and the faces
//! can name it, the telemetry could not have named a type of theirs.
//!
//! A `traceparent` comes from the client, so it is attacker data. What is not exactly a
//! version-00 value as section 3.2 writes it is refused and a new trace is started (section
//! 3.2.2.1: "If the vendor failed to parse traceparent, it MUST NOT attempt to parse
//! tracestate" and restarts the trace): no lenient reading, no upper-case hex, no version
//! other than `00` (this gateway implements 00 only, so it cannot tell a later version's
//! extra fields from garbage), no second `traceparent` header, no value longer than 55 bytes.

use http::{HeaderMap, HeaderName, HeaderValue};

/// `traceparent` (section 3.2).
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// `tracestate` (section 3.3).
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The trace and baggage headers of other tracing systems than W3C Trace Context: Zipkin B3
/// (single and multi), Jaeger (with its debug id and baggage), Envoy and Istio (a client
/// trace id, forced tracing, OpenTracing span context), AWS X-Ray, Datadog, Google Cloud
/// Trace, OpenCensus gRPC, Sentry, SkyWalking, Elastic APM, New Relic, Dynatrace, Honeycomb,
/// the HTTP Correlation protocol (`Request-Id`, `Correlation-Context`), and W3C Baggage. A caller that `gateway.trace_context` does not believe cannot choose a trace id
/// with them either: they are removed as its `traceparent` is replaced. Not `X-Request-ID`:
/// NextGenPSD2 requires the TPP to send it and the bank's API reads it (docs/tracing.md).
pub const OTHER_TRACE_HEADERS: [&str; 32] = [
    "b3",
    "x-b3-traceid",
    "x-b3-spanid",
    "x-b3-parentspanid",
    "x-b3-sampled",
    "x-b3-flags",
    "uber-trace-id",
    "x-amzn-trace-id",
    "x-datadog-trace-id",
    "x-datadog-parent-id",
    "x-datadog-sampling-priority",
    "x-datadog-origin",
    "x-datadog-tags",
    "x-datadog-sampled",
    "x-cloud-trace-context",
    "grpc-trace-bin",
    "sentry-trace",
    "baggage",
    "jaeger-debug-id",
    "jaeger-baggage",
    "x-client-trace-id",
    "x-envoy-force-trace",
    "x-ot-span-context",
    "sw8",
    "sw8-correlation",
    "sw8-x",
    "elastic-apm-traceparent",
    "newrelic",
    "x-dynatrace",
    "x-honeycomb-trace",
    "request-id",
    "correlation-context",
];

/// Prefixes of other systems' trace and baggage headers (Jaeger's `uberctx-*`, OpenTracing's
/// `ot-baggage-*` and Lightstep's `ot-tracer-*`, Instana's `x-instana-*`, Linkerd's
/// `l5d-ctx-*`).
pub const OTHER_TRACE_PREFIXES: [&str; 5] = [
    "uberctx-",
    "ot-baggage-",
    "ot-tracer-",
    "x-instana-",
    "l5d-ctx-",
];

/// Whether `name` (lower case) is another tracing system's trace or baggage header.
pub fn is_other_trace_header(name: &str) -> bool {
    OTHER_TRACE_HEADERS.contains(&name) || OTHER_TRACE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// A version-00 `traceparent` is exactly this long: `00-` 32 hex `-` 16 hex `-` 2 hex.
const TRACEPARENT_LEN: usize = 55;
/// Section 3.3.1.1: "There can be a maximum of 32 list-members in a list."
const TRACESTATE_MAX_MEMBERS: usize = 32;
/// Section 3.3.1.5: a platform "SHOULD propagate at least 512 characters of a combined
/// header"; this gateway propagates at most that and drops a longer list whole (cutting
/// members off could keep a vendor's entry without the one it depends on).
const TRACESTATE_MAX_LEN: usize = 512;
/// Section 3.3.1.3.1: `key = simple-key / multi-tenant-key`, at most 256 characters.
const TRACESTATE_MAX_KEY: usize = 256;
/// Section 3.3.1.3.2: a value is 0 to 255 `chr` followed by one `nblk-chr`: 256 at most.
const TRACESTATE_MAX_VALUE: usize = 256;

/// The trace id: 16 bytes, never all zero (section 3.2.2.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId([u8; 16]);

/// A span id (`parent-id` on the wire): 8 bytes, never all zero (section 3.2.2.4).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId([u8; 8]);

impl TraceId {
    /// The id from its bytes; `None` for all zeros, which is invalid.
    pub fn from_bytes(bytes: [u8; 16]) -> Option<TraceId> {
        (bytes != [0; 16]).then_some(TraceId(bytes))
    }

    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }
}

impl SpanId {
    /// The id from its bytes; `None` for all zeros, which is invalid.
    pub fn from_bytes(bytes: [u8; 8]) -> Option<SpanId> {
        (bytes != [0; 8]).then_some(SpanId(bytes))
    }

    pub fn to_bytes(self) -> [u8; 8] {
        self.0
    }
}

impl std::fmt::Display for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&psp_cert::hex::lower(&self.0))
    }
}

impl std::fmt::Debug for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TraceId({self})")
    }
}

impl std::fmt::Display for SpanId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&psp_cert::hex::lower(&self.0))
    }
}

impl std::fmt::Debug for SpanId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpanId({self})")
    }
}

/// The `sampled` flag (section 3.2.2.5.1), the one flag of version 00 this gateway keeps;
/// the other bits are set to zero when forwarding ("MUST set those to zero").
pub const SAMPLED: u8 = 0x01;

/// A parsed version-00 `traceparent`.
///
/// ```text
/// traceparent  = version "-" trace-id "-" parent-id "-" trace-flags
/// version      = 2HEXDIGLC   ; "00"; "ff" is invalid
/// trace-id     = 32HEXDIGLC  ; not all zeros
/// parent-id    = 16HEXDIGLC  ; not all zeros
/// trace-flags  = 2HEXDIGLC
/// HEXDIGLC     = DIGIT / "a" / "b" / "c" / "d" / "e" / "f"
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: TraceId,
    pub parent_id: SpanId,
    /// The flags as received.
    pub flags: u8,
}

/// Why a `traceparent` was not accepted. Each one starts a new trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TraceParentError {
    /// More than one `traceparent` header (section 3.2: a vendor that receives several
    /// cannot know which one is the caller's).
    #[error("more than one traceparent header")]
    Repeated,
    /// Not 55 bytes long.
    #[error("a traceparent of {0} bytes (a version-00 value has 55)")]
    Length(usize),
    /// A version other than `00`.
    #[error("traceparent version is not 00")]
    Version,
    /// Not `-` where a separator belongs, or a character that is not lower-case hex.
    #[error("traceparent is not lower-case hex fields separated by `-`")]
    Syntax,
    /// An all-zero trace id.
    #[error("traceparent has an all-zero trace id")]
    ZeroTraceId,
    /// An all-zero parent id.
    #[error("traceparent has an all-zero parent id")]
    ZeroParentId,
}

impl TraceParent {
    /// Parses one `traceparent` value, strictly (the module's rules).
    pub fn parse(value: &[u8]) -> Result<TraceParent, TraceParentError> {
        if value.len() != TRACEPARENT_LEN {
            return Err(TraceParentError::Length(value.len()));
        }
        if value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
            return Err(TraceParentError::Syntax);
        }
        let version: [u8; 1] = lower_hex(&value[0..2])?;
        if version != [0] {
            return Err(TraceParentError::Version);
        }
        let trace_id =
            TraceId::from_bytes(lower_hex(&value[3..35])?).ok_or(TraceParentError::ZeroTraceId)?;
        let parent_id =
            SpanId::from_bytes(lower_hex(&value[36..52])?).ok_or(TraceParentError::ZeroParentId)?;
        let [flags] = lower_hex(&value[53..55])?;
        Ok(TraceParent {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// The one `traceparent` of `headers`: `Ok(None)` when there is none, an error when it is
    /// refused (more than one header included).
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<TraceParent>, TraceParentError> {
        let mut values = headers.get_all(&TRACEPARENT).iter();
        match (values.next(), values.next()) {
            (None, _) => Ok(None),
            (Some(_), Some(_)) => Err(TraceParentError::Repeated),
            (Some(value), None) => TraceParent::parse(value.as_bytes()).map(Some),
        }
    }

    /// The header value: version 00, only the sampled flag kept.
    pub fn to_header_value(&self) -> HeaderValue {
        // `00-` trace id `-` parent id `-` flags: written in place (one value per forwarded
        // request, so no formatting machinery and no intermediate strings).
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [b'-'; 55];
        let mut at = 0;
        let mut hex = |bytes: &[u8], at: &mut usize| {
            for b in bytes {
                text[*at] = DIGITS[usize::from(b >> 4)];
                text[*at + 1] = DIGITS[usize::from(b & 0x0f)];
                *at += 2;
            }
            *at += 1;
        };
        hex(&[0], &mut at);
        hex(&self.trace_id.0, &mut at);
        hex(&self.parent_id.0, &mut at);
        hex(&[self.flags & SAMPLED], &mut at);
        debug_assert_eq!(at, text.len() + 1);
        // Digits, lower-case letters and `-`: always a valid header value.
        HeaderValue::from_bytes(&text).expect("hex and dashes make a header value")
    }
}

/// `N` bytes from `2N` lower-case hex digits; anything else (upper case included: section
/// 3.2.2.2 "HEXDIGLC") is a syntax error.
fn lower_hex<const N: usize>(text: &[u8]) -> Result<[u8; N], TraceParentError> {
    fn digit(c: u8) -> Result<u8, TraceParentError> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(TraceParentError::Syntax),
        }
    }
    if text.len() != 2 * N {
        return Err(TraceParentError::Syntax);
    }
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Ok(out)
}

/// A `tracestate` list that passed the checks of section 3.3, to be passed on unchanged
/// (this gateway adds no member of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceState(HeaderValue);

impl TraceState {
    /// The list of `headers`' `tracestate` fields, combined as section 3.3.1.1 says (several
    /// fields are one list, joined with commas); `None` when there is none, or when the list
    /// breaks a rule: more than 32 members, more than 512 characters, a member that is not
    /// `key=value` by the grammar, or a key twice (section 3.3.1.2: "MUST NOT" repeat).
    pub fn from_headers(headers: &HeaderMap) -> Option<TraceState> {
        let mut joined: Vec<u8> = Vec::new();
        for value in headers.get_all(&TRACESTATE) {
            if !joined.is_empty() {
                joined.push(b',');
            }
            joined.extend_from_slice(value.as_bytes());
            if joined.len() > TRACESTATE_MAX_LEN {
                return None;
            }
        }
        let text = std::str::from_utf8(&joined).ok()?;
        let mut keys: Vec<&str> = Vec::new();
        // Empty members (`a=1,,b=2`, OWS around commas) are allowed and skipped (3.3.1.1).
        for member in text.split(',').map(|m| m.trim_matches([' ', '\t'])) {
            if member.is_empty() {
                continue;
            }
            let (key, value) = member.split_once('=')?;
            if !valid_key(key) || !valid_value(value) || keys.contains(&key) {
                return None;
            }
            keys.push(key);
            if keys.len() > TRACESTATE_MAX_MEMBERS {
                return None;
            }
        }
        if keys.is_empty() {
            return None;
        }
        let list = keys_joined(text);
        HeaderValue::from_str(&list).ok().map(TraceState)
    }

    pub fn header_value(&self) -> &HeaderValue {
        &self.0
    }
}

/// The list's non-empty members, joined by `,` (empty members and OWS dropped).
fn keys_joined(text: &str) -> String {
    text.split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}

/// Section 3.3.1.3.1:
///
/// ```text
/// simple-key       = lcalpha 0*255( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
/// multi-tenant-key = tenant-id "@" system-id
/// tenant-id        = ( lcalpha / DIGIT ) 0*240( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
/// system-id        = lcalpha 0*13( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
/// ```
fn valid_key(key: &str) -> bool {
    fn rest(c: u8) -> bool {
        matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/')
    }
    if key.len() > TRACESTATE_MAX_KEY {
        return false;
    }
    match key.split_once('@') {
        None => {
            let b = key.as_bytes();
            b.first().is_some_and(u8::is_ascii_lowercase) && b[1..].iter().all(|c| rest(*c))
        }
        Some((tenant, system)) => {
            let (t, s) = (tenant.as_bytes(), system.as_bytes());
            (1..=241).contains(&t.len())
                && (t[0].is_ascii_lowercase() || t[0].is_ascii_digit())
                && t[1..].iter().all(|c| rest(*c))
                && (1..=14).contains(&s.len())
                && s[0].is_ascii_lowercase()
                && s[1..].iter().all(|c| rest(*c))
        }
    }
}

/// Section 3.3.1.3.2:
///
/// ```text
/// value    = 0*255(chr) nblk-chr
/// nblk-chr = %x21-2B / %x2D-3C / %x3E-7E
/// chr      = %x20 / nblk-chr
/// ```
fn valid_value(value: &str) -> bool {
    fn nblk(c: u8) -> bool {
        matches!(c, 0x21..=0x2b | 0x2d..=0x3c | 0x3e..=0x7e)
    }
    let b = value.as_bytes();
    !b.is_empty()
        && b.len() <= TRACESTATE_MAX_VALUE
        && b.iter().all(|c| *c == 0x20 || nblk(*c))
        && b.last().is_some_and(|c| nblk(*c))
}

/// Random bytes for new ids; the edge gives the system's generator ([`SystemIds`]), a test a
/// fixed sequence.
pub trait IdSource {
    fn fill(&self, bytes: &mut [u8]);
}

/// Ids from a cryptographically secure generator of the calling thread: ChaCha12 (rand's
/// `StdRng`), seeded from the operating system's generator and reseeded after every 64 KiB
/// it gives. The one source of the ids every request gets: trace and
/// span ids, and the request and check ids (`psp_server::new_request_id`). Before, each id
/// was a `getrandom` system call, three per gateway request.
pub struct SystemIds;

/// The bytes a thread's generator gives before it is seeded again from the operating system.
const RESEED_AFTER: usize = 64 * 1024;

thread_local! {
    /// The thread's generator and the bytes it has given since it was seeded.
    static THREAD_IDS: std::cell::RefCell<Option<(rand::rngs::StdRng, usize)>> =
        const { std::cell::RefCell::new(None) };
}

/// Fills `bytes` from the thread's generator, seeding it first when it has none or has given
/// [`RESEED_AFTER`] bytes. A reseed that fails keeps the generator it has (its output stays
/// unpredictable) and is tried again at the next call; false only when no seed was ever had.
fn fill_from_thread(bytes: &mut [u8]) -> bool {
    use rand::{RngCore, SeedableRng};
    use ring::rand::SecureRandom;
    THREAD_IDS.with_borrow_mut(|slot| {
        if slot
            .as_ref()
            .is_none_or(|(_, given)| *given >= RESEED_AFTER)
        {
            let mut seed = [0u8; 32];
            if ring::rand::SystemRandom::new().fill(&mut seed).is_ok() {
                *slot = Some((rand::rngs::StdRng::from_seed(seed), 0));
            }
        }
        match slot {
            Some((rng, given)) => {
                rng.fill_bytes(bytes);
                *given = given.saturating_add(bytes.len());
                true
            }
            None => false,
        }
    })
}

impl IdSource for SystemIds {
    fn fill(&self, bytes: &mut [u8]) {
        static FALLBACK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        if !fill_from_thread(bytes) {
            // The generator failed: ids must still be unique and non-zero; a counter is.
            let n = FALLBACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = n.to_be_bytes()[i % 8];
            }
        }
    }
}

/// A new, non-zero trace id from `ids`.
fn new_trace_id(ids: &dyn IdSource) -> TraceId {
    loop {
        let mut b = [0u8; 16];
        ids.fill(&mut b);
        if let Some(id) = TraceId::from_bytes(b) {
            return id;
        }
    }
}

/// A new, non-zero span id from `ids`.
pub fn new_span_id(ids: &dyn IdSource) -> SpanId {
    loop {
        let mut b = [0u8; 8];
        ids.fill(&mut b);
        if let Some(id) = SpanId::from_bytes(b) {
            return id;
        }
    }
}

/// What became of the caller's `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    /// None was sent: a new trace.
    Absent,
    /// It was accepted: the trace goes on.
    Accepted,
    /// It was refused: a new trace.
    Refused(TraceParentError),
    /// It was not considered (`ignore`, or a peer not trusted): a new trace.
    Ignored,
}

impl Inbound {
    /// For the logs: `absent`, `accepted`, `refused` or `ignored`.
    pub fn label(&self) -> &'static str {
        match self {
            Inbound::Absent => "absent",
            Inbound::Accepted => "accepted",
            Inbound::Refused(_) => "refused",
            Inbound::Ignored => "ignored",
        }
    }
}

/// One hop's trace context: the trace it belongs to, the caller's span (when the trace came
/// from the caller), the span this hop makes, and the `tracestate` passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: TraceId,
    /// The caller's span, the parent of ours; `None` when the trace starts here.
    pub parent_id: Option<SpanId>,
    /// This hop's span: the `parent-id` the upstream receives.
    pub span_id: SpanId,
    /// The flags passed on (only `sampled` kept); a new trace is sampled.
    pub flags: u8,
    /// The caller's `tracestate`, passed on unchanged, only with an accepted `traceparent`.
    pub state: Option<TraceState>,
    pub inbound: Inbound,
    /// Whether this hop believes its caller's trace headers (`gateway.trace_context`): when
    /// not, the other tracing systems' headers ([`is_other_trace_header`]) are removed too.
    pub believed: bool,
}

impl TraceContext {
    /// The context of a hop whose caller sent `headers`: the caller's trace when `believe` is
    /// set and its `traceparent` is accepted, else a new trace (and no `tracestate`: section
    /// 3.3.1 ties it to the `traceparent` it came with).
    pub fn for_request(headers: &HeaderMap, believe: bool, ids: &dyn IdSource) -> TraceContext {
        let parsed = TraceParent::from_headers(headers);
        let inbound = match (&parsed, believe) {
            (Ok(None), _) => Inbound::Absent,
            (_, false) => Inbound::Ignored,
            (Ok(Some(_)), true) => Inbound::Accepted,
            (Err(e), true) => Inbound::Refused(*e),
        };
        match parsed {
            Ok(Some(parent)) if believe => TraceContext {
                trace_id: parent.trace_id,
                parent_id: Some(parent.parent_id),
                span_id: new_span_id(ids),
                flags: parent.flags & SAMPLED,
                state: TraceState::from_headers(headers),
                inbound,
                believed: true,
            },
            _ => TraceContext {
                believed: believe,
                ..TraceContext::start(inbound, ids)
            },
        }
    }

    /// A new trace, sampled, with no caller span.
    pub fn start(inbound: Inbound, ids: &dyn IdSource) -> TraceContext {
        TraceContext {
            trace_id: new_trace_id(ids),
            parent_id: None,
            span_id: new_span_id(ids),
            flags: SAMPLED,
            state: None,
            inbound,
            believed: false,
        }
    }

    /// The `traceparent` the next hop receives: our trace, our span as its parent.
    pub fn traceparent(&self) -> HeaderValue {
        TraceParent {
            trace_id: self.trace_id,
            parent_id: self.span_id,
            flags: self.flags,
        }
        .to_header_value()
    }

    /// Replaces the caller's `traceparent` and `tracestate` in `headers` with this hop's;
    /// when the caller is not believed, removes the other tracing systems' headers too.
    pub fn write_to(&self, headers: &mut HeaderMap) {
        if !self.believed {
            let others: Vec<HeaderName> = headers
                .keys()
                .filter(|name| is_other_trace_header(name.as_str()))
                .cloned()
                .collect();
            for name in others {
                headers.remove(&name);
            }
        }
        headers.remove(&TRACEPARENT);
        headers.remove(&TRACESTATE);
        headers.insert(TRACEPARENT, self.traceparent());
        if let Some(state) = &self.state {
            headers.insert(TRACESTATE, state.header_value().clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// The specification's example (section 3.2.2.5.1).
    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// Counts up: every id is distinct and predictable.
    struct Counting(Cell<u8>);

    impl IdSource for Counting {
        fn fill(&self, bytes: &mut [u8]) {
            for b in bytes.iter_mut() {
                *b = self.0.get();
            }
            self.0.set(self.0.get().wrapping_add(1));
        }
    }

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_bytes(value).expect("value"),
            );
        }
        h
    }

    #[test]
    fn the_specifications_example_parses_and_formats_back() {
        let p = TraceParent::parse(EXAMPLE.as_bytes()).expect("parses");
        assert_eq!(p.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(p.parent_id.to_string(), "00f067aa0ba902b7");
        assert_eq!(p.flags, 1);
        assert_eq!(p.to_header_value(), EXAMPLE);
        // Only the sampled flag is kept; every byte value formats as two digits.
        for (flags, kept) in [("00", "00"), ("03", "01"), ("fe", "00"), ("ff", "01")] {
            let text = format!("00-ff0102030405060708090a0b0c0d0e0f-f0e0d0c0b0a09080-{flags}");
            let p = TraceParent::parse(text.as_bytes()).expect("parses");
            assert_eq!(
                p.to_header_value(),
                format!("00-ff0102030405060708090a0b0c0d0e0f-f0e0d0c0b0a09080-{kept}")
            );
        }
    }

    #[test]
    fn malformed_traceparents_are_refused_each_for_its_reason() {
        use TraceParentError::*;
        let cases: &[(&str, TraceParentError)] = &[
            ("", Length(0)),
            // Upper-case hex is not HEXDIGLC.
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                Syntax,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
                Syntax,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
                Syntax,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                ZeroTraceId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                ZeroParentId,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Version,
            ),
            (
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Version,
            ),
            // A later version's extra field: not version 00, and too long.
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-ab",
                Length(58),
            ),
            // Separators elsewhere, or other separators.
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Syntax,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
                Syntax,
            ),
            // Spaces around it (a lenient parser would trim them).
            (
                " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
                Syntax,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
                Length(56),
            ),
            // A sign or a non-hex letter where a digit belongs (`+` would pass a lax
            // `from_str_radix`).
            (
                "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Syntax,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
                Syntax,
            ),
        ];
        for (value, why) in cases {
            assert_eq!(TraceParent::parse(value.as_bytes()), Err(*why), "{value:?}");
        }
    }

    #[test]
    fn an_over_long_or_non_ascii_value_is_refused_without_reading_it() {
        let long = vec![b'a'; 64 * 1024];
        assert_eq!(
            TraceParent::parse(&long),
            Err(TraceParentError::Length(64 * 1024))
        );
        // 55 bytes whose multi-byte characters would land on the separators' positions.
        let mut odd = EXAMPLE.as_bytes().to_vec();
        odd[3] = 0xc3;
        odd[4] = 0xa9;
        assert_eq!(TraceParent::parse(&odd), Err(TraceParentError::Syntax));
    }

    #[test]
    fn a_second_traceparent_header_refuses_both() {
        let h = headers(&[
            ("traceparent", EXAMPLE.as_bytes()),
            (
                "traceparent",
                b"00-11111111111111111111111111111111-2222222222222222-01",
            ),
        ]);
        assert_eq!(
            TraceParent::from_headers(&h),
            Err(TraceParentError::Repeated)
        );
        let ctx = TraceContext::for_request(&h, true, &Counting(Cell::new(7)));
        assert_eq!(ctx.inbound, Inbound::Refused(TraceParentError::Repeated));
        assert_ne!(ctx.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(ctx.trace_id.to_string(), "11111111111111111111111111111111");
    }

    #[test]
    fn an_accepted_traceparent_keeps_the_trace_and_names_our_span_as_the_parent() {
        let h = headers(&[
            ("traceparent", EXAMPLE.as_bytes()),
            ("tracestate", b"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
        ]);
        let ctx = TraceContext::for_request(&h, true, &Counting(Cell::new(0x42)));
        assert_eq!(ctx.inbound, Inbound::Accepted);
        assert_eq!(ctx.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            ctx.parent_id.map(|p| p.to_string()).as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert_eq!(ctx.span_id.to_string(), "4242424242424242");
        assert_eq!(
            ctx.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-4242424242424242-01"
        );
        let mut out = headers(&[
            ("traceparent", EXAMPLE.as_bytes()),
            ("tracestate", b"evil=1"),
        ]);
        ctx.write_to(&mut out);
        assert_eq!(out.get_all("traceparent").iter().count(), 1);
        assert_eq!(out["traceparent"], ctx.traceparent());
        assert_eq!(out["tracestate"], "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    }

    #[test]
    fn unknown_flags_are_cleared_and_an_unsampled_trace_stays_unsampled() {
        let h = headers(&[(
            "traceparent",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe",
        )]);
        let ctx = TraceContext::for_request(&h, true, &Counting(Cell::new(1)));
        assert_eq!(ctx.flags, 0);
        assert!(ctx.traceparent().to_str().expect("ascii").ends_with("-00"));
    }

    #[test]
    fn a_traceparent_not_believed_starts_a_new_trace_and_drops_the_tracestate() {
        let h = headers(&[
            ("traceparent", EXAMPLE.as_bytes()),
            ("tracestate", b"congo=t61rcWkgMzE"),
        ]);
        let ctx = TraceContext::for_request(&h, false, &Counting(Cell::new(9)));
        assert_eq!(ctx.inbound, Inbound::Ignored);
        assert_eq!(ctx.trace_id.to_string(), "09".repeat(16));
        assert_eq!(ctx.parent_id, None);
        assert_eq!(ctx.state, None);
        let mut out = h.clone();
        ctx.write_to(&mut out);
        assert_eq!(
            out.get("tracestate"),
            None,
            "the client's tracestate is dropped"
        );
        assert_ne!(out["traceparent"], EXAMPLE);
    }

    #[test]
    fn a_malformed_traceparent_takes_its_tracestate_with_it() {
        let h = headers(&[
            (
                "traceparent",
                b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", b"congo=t61rcWkgMzE"),
        ]);
        let ctx = TraceContext::for_request(&h, true, &Counting(Cell::new(3)));
        assert_eq!(ctx.inbound, Inbound::Refused(TraceParentError::Syntax));
        assert_eq!(ctx.state, None);
    }

    #[test]
    fn the_generator_never_gives_an_all_zero_id() {
        // Zeros first, then ones: the zeros are drawn again.
        let ctx = TraceContext::start(Inbound::Absent, &Counting(Cell::new(0)));
        assert_eq!(ctx.trace_id.to_string(), "01".repeat(16));
        assert_eq!(ctx.span_id.to_string(), "02".repeat(8));
        assert_eq!(ctx.flags, SAMPLED);
    }

    #[test]
    fn several_tracestate_fields_are_one_list() {
        let h = headers(&[("tracestate", b"a=1"), ("tracestate", b" b=2 ,, c@d=3")]);
        let state = TraceState::from_headers(&h).expect("valid");
        assert_eq!(state.header_value(), "a=1,b=2,c@d=3");
    }

    #[test]
    fn a_tracestate_over_its_limits_or_off_its_grammar_is_dropped() {
        let members = |n: usize| {
            (0..n)
                .map(|i| format!("k{i}=v"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert!(
            TraceState::from_headers(&headers(&[("tracestate", members(32).as_bytes())])).is_some()
        );
        assert!(
            TraceState::from_headers(&headers(&[("tracestate", members(33).as_bytes())])).is_none()
        );
        let long = format!("a={}", "x".repeat(256));
        let longer = format!("{long},b={}", "y".repeat(256));
        assert!(TraceState::from_headers(&headers(&[("tracestate", long.as_bytes())])).is_some());
        assert!(TraceState::from_headers(&headers(&[("tracestate", longer.as_bytes())])).is_none());
        for bad in [
            &b"A=1"[..],   // upper-case key
            b"1a=1",       // key starting with a digit
            b"a=",         // empty value
            b"a=1 ",       // value ending in a space (trimmed as OWS: fine) -- see below
            b"a=x=y",      // `=` in the value
            b"a=1,a=2",    // a key twice
            b"nokey",      // no `=`
            b"a@=1",       // empty system id
            b"@b=1",       // empty tenant id
            b"a=\xc3\xa9", // non-ASCII
        ] {
            let got = TraceState::from_headers(&headers(&[("tracestate", bad)]));
            if bad == b"a=1 " {
                // Trailing OWS around a member is allowed (3.3.1.1) and removed.
                assert_eq!(
                    got.map(|s| s.header_value().clone()),
                    Some(HeaderValue::from_static("a=1"))
                );
            } else {
                assert_eq!(got, None, "{:?}", String::from_utf8_lossy(bad));
            }
        }
        // A flood of tiny headers stops at the length bound, not at the end of the list.
        let many: Vec<(&str, &[u8])> = (0..10_000).map(|_| ("tracestate", &b"a=1"[..])).collect();
        assert!(TraceState::from_headers(&headers(&many)).is_none());
    }

    #[test]
    fn the_threads_generators_give_distinct_ids_and_reseed_as_they_go() {
        // Across a reseed (64 KiB), on several threads: no id twice, none all zero, and each
        // thread's own generator (two threads seeded alike would repeat each other's ids).
        let ids = |n: usize| {
            (0..n)
                .map(|_| {
                    let mut b = [0u8; 16];
                    SystemIds.fill(&mut b);
                    b
                })
                .collect::<Vec<_>>()
        };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    let made = ids(10_000);
                    let given = THREAD_IDS.with_borrow(|s| s.as_ref().map(|(_, given)| *given));
                    (made, given)
                })
            })
            .collect();
        let mut all = std::collections::HashSet::new();
        for t in threads {
            let (made, given) = t.join().expect("thread");
            // Seeded at the 1st, 4,097th and 8,193rd id (every 64 KiB): the last seed has
            // given the 1,808 ids after it.
            assert_eq!(given, Some((10_000 - 8_192) * 16));
            for id in made {
                assert_ne!(id, [0u8; 16]);
                assert!(all.insert(id), "an id came twice");
            }
        }
        assert_eq!(all.len(), 40_000);
    }
}
