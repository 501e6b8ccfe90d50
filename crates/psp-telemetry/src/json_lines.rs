//! `serve`'s JSON log lines, formatted off the request path.
//!
//! tracing-subscriber's JSON formatter wrote each event's line on the thread that logged it:
//! the time formatted, every value escaped, on the request path (the audit record alone was
//! ~10 % of a keep-alive request's samples). [`JsonLines`] does less there: it appends a
//! compact record of the event to the log writer's buffer ([`super::log_writer`]): its time
//! as two integers, its level, its target, and each field's name and value, numbers as their
//! bytes and strings (`Display` and `Debug` values written out once) unescaped. A thread-local
//! scratch buffer holds the record while it is written, so the request path allocates nothing
//! in steady state. The writer's thread turns the records into lines ([`format()`]) before
//! writing them.
//!
//! The lines are the ones `tracing_subscriber::fmt().json().flatten_event(true)` writes:
//! `timestamp` (RFC 3339, microseconds, UTC), `level`, the fields in the order the event gives
//! them (`message` first), `target`; an event bridged from the `log` crate carries the log
//! record's target and level. `tests::the_lines_are_tracing_subscribers_json_lines` holds
//! the two to the same bytes. One difference, by choice: an event inside a span does not
//! repeat the span's fields (`span`, `spans`). The only spans are the `psp_trace` spans at
//! `TRACE`, for OTLP, and the lines that need it name their `trace_id`.
//!
//! The memory the records hold, and what happens when the output cannot keep up, are the log
//! writer's: at [`super::log_writer::MAX_PENDING`] bytes the logging thread waits; nothing
//! is dropped.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use super::log_writer::LogWriter;

/// The layer that hands each event to the log writer as a record.
pub struct JsonLines {
    writer: LogWriter,
}

impl JsonLines {
    /// Records to `writer`, which must have been spawned with [`format()`]
    /// ([`super::log_writer::spawn_formatting`]).
    pub fn new(writer: LogWriter) -> Self {
        JsonLines { writer }
    }
}

/// A thread's scratch record larger than this after an event is let go, so that one large
/// event does not keep its size for the life of the thread.
const SCRATCH_KEPT: usize = 16 * 1024;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl<S: Subscriber> Layer<S> for JsonLines {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        with_record(event, |record| self.writer.append(record));
    }
}

/// Calls `f` with `event`'s record, written into the thread's scratch buffer (the audit log
/// takes its records the same way: `psp_service::telemetry::audit`).
pub fn with_record(event: &Event<'_>, f: impl FnOnce(&[u8])) {
    let mut f = Some(f);
    let mut emit = |buf: &mut Vec<u8>| {
        buf.clear();
        encode(event, buf);
        if let Some(f) = f.take() {
            f(buf);
        }
    };
    let done = SCRATCH.try_with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut buf) => {
            emit(&mut buf);
            if buf.capacity() > SCRATCH_KEPT {
                *buf = Vec::new();
            }
        }
        // An event logged while a value of another event was being written out (a
        // `Display` that logs): a buffer of its own.
        Err(_) => emit(&mut Vec::new()),
    });
    if done.is_err() {
        // The thread is ending and its scratch buffer is gone.
        emit(&mut Vec::new());
    }
}

// The record: u64 length of the rest | i64 seconds | u32 nanoseconds | u8 level | str target
// | fields, each: u8 kind | str name | value. A str is a u64 length and its bytes; numbers are
// little-endian.
const STR: u8 = 0;
const U64: u8 = 1;
const I64: u8 = 2;
const BOOL: u8 = 3;
const F64: u8 = 4;

fn level_code(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        Level::WARN => 3,
        Level::ERROR => 4,
    }
}

const LEVELS: [&str; 5] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// Writes `event`'s record into `buf` (empty).
fn encode(event: &Event<'_>, buf: &mut Vec<u8>) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let normalized = event.normalized_metadata();
    let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
    buf.extend_from_slice(&0u64.to_le_bytes());
    buf.extend_from_slice(
        &i64::try_from(now.as_secs())
            .unwrap_or(i64::MAX)
            .to_le_bytes(),
    );
    buf.extend_from_slice(&now.subsec_nanos().to_le_bytes());
    buf.push(level_code(meta.level()));
    put_str(buf, meta.target());
    event.record(&mut Encoder(buf));
    let len = (buf.len() - 8) as u64;
    buf[..8].copy_from_slice(&len.to_le_bytes());
}

/// Writes fields into a record, as tracing-serde's map visitor serialises them: the six
/// kinds it has, and everything else (`u128`, errors, bytes) through `Debug`, as its default.
struct Encoder<'a>(&'a mut Vec<u8>);

impl Encoder<'_> {
    fn field(&mut self, kind: u8, field: &Field) {
        self.0.push(kind);
        put_str(self.0, field.name());
    }
}

impl Visit for Encoder<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(STR, field);
        let at = self.0.len();
        self.0.extend_from_slice(&0u64.to_le_bytes());
        // Writing into a Vec cannot fail; a Debug impl that returns an error leaves what it
        // wrote, as tracing's formatter would have up to that point.
        let _ = write!(Utf8(self.0), "{value:?}");
        let len = (self.0.len() - at - 8) as u64;
        self.0[at..at + 8].copy_from_slice(&len.to_le_bytes());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(STR, field);
        put_str(self.0, value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.field(U64, field);
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.field(I64, field);
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.field(BOOL, field);
        self.0.push(u8::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.field(F64, field);
        self.0.extend_from_slice(&value.to_bits().to_le_bytes());
    }
}

/// `fmt::Write` into a byte buffer (what is written is UTF-8).
struct Utf8<'a>(&'a mut Vec<u8>);

impl fmt::Write for Utf8<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Reads a record's parts in order; `None` past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<&'a str> {
        let len = usize::try_from(self.u64()?).ok()?;
        std::str::from_utf8(self.take(len)?).ok()
    }
}

/// A field's value as recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldValue<'a> {
    Str(&'a str),
    U64(u64),
    I64(i64),
    Bool(bool),
    F64(f64),
}

/// One record read back.
pub struct Decoded<'a> {
    /// When the event was logged: seconds and nanoseconds since the Unix epoch.
    pub secs: i64,
    pub nanos: u32,
    pub level: &'static str,
    pub target: &'a str,
    /// The record's length, to name it should its fields not read back.
    pub bytes: usize,
    fields: &'a [u8],
}

impl<'a> Decoded<'a> {
    /// Reads the record's head (without its length); `None` when it does not read back. Its
    /// fields are read as they are used ([`Self::each_field`]).
    fn read(record: &'a [u8]) -> Option<Decoded<'a>> {
        let mut r = Reader(record);
        let secs = i64::from_le_bytes(r.take(8)?.try_into().ok()?);
        let nanos = r.u32()?;
        let level = *LEVELS.get(usize::from(r.u8()?))?;
        let target = r.str()?;
        Some(Decoded {
            secs,
            nanos,
            level,
            target,
            bytes: record.len(),
            fields: r.0,
        })
    }

    /// Calls `f` with each field's name and value, in the event's order; `None` when a field
    /// does not read back (after `f` had the fields before it).
    pub fn each_field(&self, mut f: impl FnMut(&'a str, FieldValue<'a>)) -> Option<()> {
        let mut r = Reader(self.fields);
        while !r.0.is_empty() {
            let kind = r.u8()?;
            let name = r.str()?;
            let value = match kind {
                STR => FieldValue::Str(r.str()?),
                U64 => FieldValue::U64(r.u64()?),
                I64 => FieldValue::I64(r.u64()? as i64),
                BOOL => FieldValue::Bool(r.u8()? != 0),
                F64 => FieldValue::F64(f64::from_bits(r.u64()?)),
                _ => return None,
            };
            f(name, value);
        }
        Some(())
    }
}

/// Calls `f` with each record of `records` (as appended: each after its length), or with
/// `Err(bytes)` for a record that does not read back (a defect), naming the bytes passed
/// over; a length that runs past the end passes over the rest.
pub fn each_record<'a>(records: &'a [u8], mut f: impl FnMut(Result<Decoded<'a>, usize>)) {
    let mut rest = Reader(records);
    while !rest.0.is_empty() {
        let Some(record) = rest
            .u64()
            .and_then(|len| rest.take(usize::try_from(len).ok()?))
        else {
            f(Err(rest.0.len() + 8));
            return;
        };
        f(Decoded::read(record).ok_or(record.len()));
    }
}

/// The log writer's [`super::log_writer::Format`]: the JSON line of each record in
/// `records`. Records are only ever written whole by [`JsonLines`]; should one not read back
/// (a defect), a line says how many bytes were passed over instead of a panic.
pub fn format(records: &[u8], out: &mut Vec<u8>) {
    each_record(records, |record| match record {
        Ok(record) => {
            let start = out.len();
            if line(&record, out).is_none() {
                out.truncate(start);
                unreadable(out, record.bytes);
            }
        }
        Err(bytes) => unreadable(out, bytes),
    });
}

fn unreadable(out: &mut Vec<u8>, bytes: usize) {
    let _ = writeln!(
        out,
        "{{\"level\":\"ERROR\",\"message\":\"a log record could not be read; {bytes} bytes passed over\",\"target\":\"psp_gateway::log\"}}"
    );
}

/// One record's line; `None`, with part of it written, when a field does not read back.
fn line(record: &Decoded<'_>, out: &mut Vec<u8>) -> Option<()> {
    out.extend_from_slice(b"{\"timestamp\":\"");
    timestamp(record.secs, record.nanos, out);
    out.extend_from_slice(b"\",\"level\":\"");
    out.extend_from_slice(record.level.as_bytes());
    out.push(b'"');
    record.each_field(|name, value| {
        out.push(b',');
        json_str(name, out);
        out.push(b':');
        // Writing into a Vec cannot fail.
        let _ = match value {
            FieldValue::Str(s) => serde_json::to_writer(&mut *out, s),
            FieldValue::U64(n) => serde_json::to_writer(&mut *out, &n),
            FieldValue::I64(n) => serde_json::to_writer(&mut *out, &n),
            FieldValue::Bool(b) => serde_json::to_writer(&mut *out, &b),
            FieldValue::F64(x) => serde_json::to_writer(&mut *out, &x),
        };
    })?;
    out.extend_from_slice(b",\"target\":");
    json_str(record.target, out);
    out.extend_from_slice(b"}\n");
    Some(())
}

fn json_str(s: &str, out: &mut Vec<u8>) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The time of a record: `secs` and `nanos` since the Unix epoch (the epoch itself for a
/// time `time` cannot hold).
pub fn datetime(secs: i64, nanos: u32) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .map(|t| t + time::Duration::nanoseconds(i64::from(nanos)))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// `2026-11-26T05:43:04.857590Z`: the form of tracing-subscriber's `SystemTime` timer.
fn timestamp(secs: i64, nanos: u32, out: &mut Vec<u8>) {
    let t = datetime(secs, 0);
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        nanos / 1000
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Out(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Out {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Out {
        type Writer = Out;
        fn make_writer(&'a self) -> Out {
            self.clone()
        }
    }

    impl Out {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).expect("UTF-8")
        }
    }

    struct Shown(&'static str);
    impl fmt::Display for Shown {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    /// A `Display` that logs while it is written out.
    struct Logging;
    impl fmt::Display for Logging {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            tracing::warn!(inner = "yes", "logged from a Display");
            f.write_str("outer value")
        }
    }

    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug
    enum Revocation {
        Good,
        Revoked { reason: &'static str },
    }

    /// The events the tests log: every kind of value, strings a formatter must escape, and
    /// names that collide with the line's own keys.
    fn events() {
        tracing::info!(target: "audit", check_id = %"c-1", n = 7u64, neg = -3i64, ok = true,
            ratio = 0.25f64, nan = f64::NAN, inf = f64::INFINITY, big = u128::MAX,
            revocation = ?Revocation::Revoked { reason: "key\"Compromise" }, good = ?Revocation::Good,
            "gateway decision");
        tracing::warn!(quote = "a\"b\\c", control = "\u{0}\u{1f}\n\r\t", unicode = "é ☃ \u{2028} 𝄞",
            shown = %Shown("\"x\"\n"), empty = "", "weird strings");
        tracing::error!(
            timestamp = "mine",
            level = "mine",
            target = "mine",
            "colliding names"
        );
        tracing::debug!("only a message");
        tracing::trace!(r#type = "raw identifier", "raw");
        tracing::info!(long = %"y".repeat(70_000), "long value");
        let answer = 42;
        tracing_log::format_trace(
            &log::Record::builder()
                .args(format_args!("from the log crate: {answer}"))
                .target("rustls::server")
                .level(log::Level::Warn)
                .module_path_static(Some("rustls::server::hs"))
                .file_static(Some("hs.rs"))
                .line(Some(12))
                .build(),
        )
        .expect("bridged");
    }

    /// The lines of `events()`, through tracing-subscriber's JSON formatter and through
    /// `JsonLines` and the log writer's thread, in the same run.
    fn both() -> (String, String) {
        let theirs = Out::default();
        let ours = Out::default();
        let (writer, guard) =
            crate::log_writer::spawn_formatting("test-json", ours.clone(), format).expect("thread");
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(theirs.clone())
                    .with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
            )
            .with(
                JsonLines::new(writer).with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
            );
        tracing::subscriber::with_default(subscriber, events);
        drop(guard);
        (theirs.text(), ours.text())
    }

    /// A line without its timestamp's value, and the value.
    fn split_time(line: &str) -> (String, String) {
        let head = "{\"timestamp\":\"";
        assert!(line.starts_with(head), "{line}");
        let end = line[head.len()..].find('"').expect("closing quote") + head.len();
        (
            format!("{head}{}", &line[end..]),
            line[head.len()..end].to_owned(),
        )
    }

    #[test]
    fn the_lines_are_tracing_subscribers_json_lines() {
        let (theirs, ours) = both();
        let theirs: Vec<&str> = theirs.lines().collect();
        let ours: Vec<&str> = ours.lines().collect();
        assert!(theirs.len() >= 6, "{theirs:#?}");
        assert_eq!(ours.len(), theirs.len(), "{ours:#?}");
        for (t, o) in theirs.iter().zip(&ours) {
            let (t_line, t_time) = split_time(t);
            let (o_line, o_time) = split_time(o);
            assert_eq!(o_line, t_line, "the same line but for the time");
            let parse = |s: &str| {
                time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                    .expect("RFC 3339")
            };
            assert_eq!(o_time.len(), t_time.len(), "{o_time} against {t_time}");
            assert!((parse(&o_time) - parse(&t_time)).abs() < time::Duration::seconds(2));
            serde_json::from_str::<serde_json::Value>(o).expect("JSON");
        }
        // What the comparison stood on: the values a formatter could get wrong are there.
        let all = ours.join("\n");
        for needle in [
            r#""nan":null"#,
            r#""big":"340282366920938463463374607431768211455""#,
            r#""revocation":"Revoked { reason: \"key\\\"Compromise\" }""#,
            r#""control":"\u0000\u001f\n\r\t""#,
            r#""target":"rustls::server""#,
            r#""shown":"\"x\"\n""#,
        ] {
            assert!(all.contains(needle), "{needle} in {all}");
        }
    }

    #[test]
    fn a_value_that_logs_while_it_is_written_out_leaves_its_line_whole() {
        // tracing does not dispatch an event raised inside a subscriber's own call on the
        // same thread (tracing-subscriber's formatter loses it the same way); the scratch
        // buffer's fallback is there should that ever change.
        let ours = Out::default();
        let (writer, guard) =
            crate::log_writer::spawn_formatting("test-json", ours.clone(), format).expect("thread");
        let subscriber = tracing_subscriber::registry().with(JsonLines::new(writer));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(value = %Logging, "outer");
        });
        drop(guard);
        let lines: Vec<serde_json::Value> = ours
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a whole JSON line"))
            .collect();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert_eq!(lines[0]["message"], "outer");
        assert_eq!(lines[0]["value"], "outer value");
    }

    #[test]
    fn records_that_do_not_read_back_are_named_not_a_panic() {
        // A record cut short, a length past the end, an unknown kind, a bad level: each gives
        // one line saying so, and the records around it are still written.
        let mut good = Vec::new();
        {
            let ours = Out::default();
            let (writer, guard) = crate::log_writer::spawn_formatting("t", ours.clone(), |r, o| {
                o.extend_from_slice(r)
            })
            .expect("thread");
            let subscriber = tracing_subscriber::registry().with(JsonLines::new(writer));
            tracing::subscriber::with_default(subscriber, || tracing::info!(a = 1u64, "ok"));
            drop(guard);
            good.extend_from_slice(&ours.0.lock().unwrap());
        }
        let mut lines = Vec::new();
        format(&good, &mut lines);
        let one = String::from_utf8(lines.clone()).unwrap();
        assert!(one.contains(r#""message":"ok","a":1"#), "{one}");

        // The last field, `a`: kind, name, eight bytes.
        let mut unknown_kind = good.clone();
        unknown_kind[good.len() - (1 + 8 + 1 + 8)] = 9;
        let mut bad_level = good.clone();
        bad_level[8 + 8 + 4] = 5;
        let mut too_long = good.clone();
        too_long[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let cut_short = good[..good.len() - 3].to_vec();
        for (name, all) in [
            ("unknown kind", [&good[..], &unknown_kind, &good].concat()),
            ("bad level", [&good[..], &bad_level, &good].concat()),
            // Last: what follows a record cut short cannot be found.
            ("cut short", [&good[..], &good, &cut_short].concat()),
        ] {
            let mut out = Vec::new();
            format(&all, &mut out);
            let text = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 3, "{name}: {text}");
            let bad = if name == "cut short" { 2 } else { 1 };
            for (i, l) in lines.iter().enumerate() {
                assert_eq!(l.contains("could not be read"), i == bad, "{name}: {text}");
            }
            for l in &lines {
                serde_json::from_str::<serde_json::Value>(l).expect("JSON");
            }
        }
        let mut out = Vec::new();
        format(&too_long, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("could not be read"), "{text}");
    }
}
