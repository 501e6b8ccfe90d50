//! `psp-gateway audit query` and `audit report` (issue 26 §4): the audit log read back, for
//! the people who answer for the gateway's decisions.
//!
//! The audit log ([`crate::telemetry::audit`]) is JSON lines, one record per line, over
//! several files once rotated (oldest first, the rotated ones possibly gzip-compressed).
//! [`for_each_record`] reads them in order, a line at a time within a line limit, and stops at
//! the first line that is not a record, naming its file and line: a query that skipped a
//! line it could not read would answer for a log it did not read. It does not check the
//! hash chain; `audit verify` does.
//!
//! The fields read here are the ones the faces write (`crates/psp-faces/src/gateway/record.rs`,
//! `crates/psp-faces/src/api.rs`):
//!
//! - every record: `seq`, `prev`, `time` (RFC 3339), `message`;
//! - `"gateway decision"` (the access rule's decision, gateway and external-authorisation
//!   faces): `face`, `site`, `jurisdiction`, `auth_number`, `fingerprint` (the certificate's
//!   SHA-256, lowercase hex), `decision` (`permit`, `refuse`, `report-only`), `reason` (empty
//!   for a permit), and the check's details;
//! - `"gateway refused"` (a refusal before or besides the rule: a path, a method, an
//!   authority, an upstream): `face`, `site`, `status`, `reason`, `detail`, no certificate;
//! - `"check"` and `"audit check"` (the check endpoint): `auth_number`, `fingerprint`,
//!   `jurisdiction`, the validity flags, no decision.
//!
//! No record carries the PSP's name, nor the freshness of the reference data a decision used.
//! The name column reads [`NAME_FIELD`] (empty today); the report says freshness is not
//! recorded.
//!
//! Records are attacker-influenced (an authorisation number is whatever a certificate says):
//! the table replaces control characters, and the HTML report escapes every string.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime, Time};

/// Budget: the longest line read as a record, in bytes. The same limit as the audit log's own
/// reader (`telemetry::audit`): records are a few hundred bytes, and a file with no line ends
/// (a device, a corrupted or hostile file, a decompression bomb) is refused at the limit
/// instead of read into memory.
const MAX_LINE_BYTES: usize = 1 << 20;

/// gzip's magic number (RFC 1952 §2.3.1): a rotated file compressed by logrotate is read
/// through the decompressor whatever its name; a record line starts with `{`.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The field the PSP's name would be in. No face writes it yet (the decision records carry
/// the authorisation number and the certificate's hash, not the register's name); a face
/// that adds the name should use this field, and the table and report show it.
pub const NAME_FIELD: &str = "psp_name";

/// Why audit files could not be read to the end.
#[derive(Debug, thiserror::Error)]
pub enum AuditReadError {
    #[error("{}: cannot read: {source}", file.display())]
    Open {
        file: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: line {line}: {why}", file.display())]
    Line {
        file: PathBuf,
        line: usize,
        why: LineError,
    },
}

/// Why a line of an audit log is not a record.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("cannot read: {0}")]
    Read(#[source] io::Error),
    #[error("the line is over the {MAX_LINE_BYTES}-byte limit, too long to be a record")]
    TooLong,
    #[error("the line is not UTF-8 text")]
    NotUtf8,
    #[error("an empty line, not a record")]
    Empty,
    #[error("not a JSON object")]
    NotObject,
    #[error("not a JSON record ({0})")]
    NotJson(#[source] serde_json::Error),
    #[error("no numeric seq: not an audit record")]
    NoSeq,
    #[error("no prev: not an audit record")]
    NoPrev,
    #[error("no time")]
    NoTime,
    #[error("time {0:?} is not an RFC 3339 time ({1})")]
    BadTime(String, #[source] time::error::Parse),
}

/// Why `--from` or `--to` is not a time.
#[derive(Debug, thiserror::Error)]
pub enum TimeArgError {
    #[error("{0:?} is neither an RFC 3339 time nor a date (YYYY-MM-DD)")]
    Neither(String),
    #[error("{0:?} is the last date there is")]
    LastDate(String),
}

/// One record as read: its line exactly as written, and the fields parsed from it.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// The line without its line end (what `audit query` prints: the chain hashes these
    /// bytes, so a re-serialisation would not do).
    pub line: String,
    pub fields: serde_json::Map<String, Value>,
    pub seq: u64,
    pub time: OffsetDateTime,
}

impl AuditRecord {
    /// A field's text, empty when the record has no such string field.
    pub fn text(&self, name: &str) -> &str {
        self.fields.get(name).and_then(Value::as_str).unwrap_or("")
    }

    /// The decision the record states, if it states one.
    pub fn decision(&self) -> Option<Decision> {
        decision_of(self)
    }
}

/// A decision, as the gateway's records write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Decision {
    /// `"decision":"permit"`: the access rule let the call through.
    Permit,
    /// `"decision":"refuse"`, and every `"gateway refused"` record (a refusal the access
    /// rule did not make: a path, a method, an authority, an upstream).
    Refuse,
    /// `"decision":"report-only"`: the rule would have refused, and forwarded in report-only
    /// mode.
    #[value(name = "report-only")]
    ReportOnly,
}

impl Decision {
    /// The word the records use.
    pub fn label(self) -> &'static str {
        match self {
            Decision::Permit => "permit",
            Decision::Refuse => "refuse",
            Decision::ReportOnly => "report-only",
        }
    }
}

/// The decision a record states: its `decision` field, mapped word for word (an unknown word
/// is no decision, never a guess), or a refusal for a `"gateway refused"` record. The
/// report-only warning (`"report-only: would have refused, forwarding"`) is not a decision of
/// its own: the decision record beside it says `report-only`.
fn decision_of(record: &AuditRecord) -> Option<Decision> {
    match record.fields.get("decision").and_then(Value::as_str) {
        Some("permit") => Some(Decision::Permit),
        Some("refuse") => Some(Decision::Refuse),
        Some("report-only") => Some(Decision::ReportOnly),
        Some(_) => None,
        None if record.text("message") == "gateway refused" => Some(Decision::Refuse),
        None => None,
    }
}

/// Calls `visit` with each record of `files`, in order (oldest first), and stops at the first
/// line that is not a record. A gzip-compressed file (a rotated one) is read through the
/// decompressor. An error from `visit` stops the reading too.
pub fn for_each_record<E: From<AuditReadError>>(
    files: &[PathBuf],
    mut visit: impl FnMut(AuditRecord) -> Result<(), E>,
) -> Result<(), E> {
    for file in files {
        let mut reader = open(file)?;
        let mut n = 0;
        loop {
            n += 1;
            let line_error = |why: LineError| AuditReadError::Line {
                file: file.clone(),
                line: n,
                why,
            };
            let Some(line) = read_line(&mut reader).map_err(&line_error)? else {
                break;
            };
            visit(parse_record(line).map_err(line_error)?)?;
        }
    }
    Ok(())
}

/// `file` for reading, through the decompressor when it starts as gzip does.
fn open(file: &Path) -> Result<Box<dyn BufRead>, AuditReadError> {
    let cannot = |source| AuditReadError::Open {
        file: file.to_owned(),
        source,
    };
    let mut reader = BufReader::new(File::open(file).map_err(cannot)?);
    let gzip = reader.fill_buf().map_err(cannot)?.starts_with(&GZIP_MAGIC);
    Ok(if gzip {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(reader)))
    } else {
        Box::new(reader)
    })
}

/// The next line, without its line end (`None` at the end), within [`MAX_LINE_BYTES`].
fn read_line(reader: &mut dyn BufRead) -> Result<Option<String>, LineError> {
    let mut bytes = Vec::new();
    let read = reader
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', &mut bytes)
        .map_err(LineError::Read)?;
    if read == 0 {
        return Ok(None);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    } else if bytes.len() > MAX_LINE_BYTES {
        return Err(LineError::TooLong);
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| LineError::NotUtf8)
}

/// A line as a record: a JSON object with a numeric `seq`, a string `prev` and an RFC 3339
/// `time`, as every record the gateway writes has.
fn parse_record(line: String) -> Result<AuditRecord, LineError> {
    if line.trim().is_empty() {
        return Err(LineError::Empty);
    }
    let fields = match serde_json::from_str::<Value>(&line) {
        Ok(Value::Object(fields)) => fields,
        Ok(_) => return Err(LineError::NotObject),
        Err(e) => return Err(LineError::NotJson(e)),
    };
    let seq = fields
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or(LineError::NoSeq)?;
    fields
        .get("prev")
        .and_then(Value::as_str)
        .ok_or(LineError::NoPrev)?;
    let time = fields
        .get("time")
        .and_then(Value::as_str)
        .ok_or(LineError::NoTime)?;
    let time = OffsetDateTime::parse(time, &Rfc3339)
        .map_err(|e| LineError::BadTime(time.to_owned(), e))?;
    Ok(AuditRecord {
        line,
        fields,
        seq,
        time,
    })
}

/// A period: from an instant (included) until another (excluded); either end may be open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Period {
    pub from: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
}

impl Period {
    pub fn contains(&self, t: OffsetDateTime) -> bool {
        self.from.is_none_or(|from| t >= from) && self.until.is_none_or(|until| t < until)
    }
}

/// `--from`: an RFC 3339 time, or a date (`YYYY-MM-DD`, from its start, UTC).
pub fn parse_from(text: &str) -> Result<OffsetDateTime, TimeArgError> {
    if let Ok(date) = parse_date(text) {
        return Ok(date.with_time(Time::MIDNIGHT).assume_utc());
    }
    OffsetDateTime::parse(text, &Rfc3339).map_err(|_| TimeArgError::Neither(text.to_owned()))
}

/// `--to`, as the period's excluded end: a date includes its whole day (UTC), so the end is
/// the next day's start; an RFC 3339 time includes that instant, so the end is one
/// nanosecond after it (the finest a record's time is written to).
pub fn parse_to(text: &str) -> Result<OffsetDateTime, TimeArgError> {
    if let Ok(date) = parse_date(text) {
        let next = date
            .next_day()
            .ok_or_else(|| TimeArgError::LastDate(text.to_owned()))?;
        return Ok(next.with_time(Time::MIDNIGHT).assume_utc());
    }
    OffsetDateTime::parse(text, &Rfc3339)
        .map(|t| t + time::Duration::NANOSECOND)
        .map_err(|_| TimeArgError::Neither(text.to_owned()))
}

fn parse_date(text: &str) -> Result<Date, time::error::Parse> {
    Date::parse(text, format_description!("[year]-[month]-[day]"))
}

/// Which records `audit query` prints; every criterion given must hold (exact matches).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// An authorisation number (`auth_number`) or a certificate's SHA-256 (`fingerprint`;
    /// hex, either case).
    pub psp: Option<String>,
    /// `jurisdiction`, the country code the decision was made for.
    pub jurisdiction: Option<String>,
    /// `site`, the gateway site that decided.
    pub site: Option<String>,
    pub decision: Option<Decision>,
    pub period: Period,
}

impl Filter {
    pub fn matches(&self, record: &AuditRecord) -> bool {
        let psp = self.psp.as_deref().is_none_or(|psp| {
            record.text("auth_number") == psp
                || (!psp.is_empty() && record.text("fingerprint").eq_ignore_ascii_case(psp))
        });
        let jurisdiction = self
            .jurisdiction
            .as_deref()
            .is_none_or(|j| record.text("jurisdiction") == j);
        let site = self
            .site
            .as_deref()
            .is_none_or(|s| record.text("site") == s);
        let decision = self.decision.is_none_or(|d| record.decision() == Some(d));
        psp && jurisdiction && site && decision && self.period.contains(record.time)
    }
}

/// The records of `files` that `filter` matches, in order.
pub fn query(files: &[PathBuf], filter: &Filter) -> Result<Vec<AuditRecord>, AuditReadError> {
    let mut out = Vec::new();
    for_each_record(files, |record| {
        if filter.matches(&record) {
            out.push(record);
        }
        Ok::<_, AuditReadError>(())
    })?;
    Ok(out)
}

/// How `audit query` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// The records as they are, one JSON line each.
    #[default]
    Json,
    /// Aligned columns: time, seq, face/site, decision, reason, authorisation number, name.
    Table,
}

/// The table's header.
const TABLE_HEADER: [&str; 7] = [
    "TIME",
    "SEQ",
    "FACE/SITE",
    "DECISION",
    "REASON",
    "AUTH NUMBER",
    "NAME",
];

/// One table row. A record without a decision shows its message (`check`, `audit check`).
fn table_row(record: &AuditRecord) -> [String; 7] {
    let face_site = match (record.text("face"), record.text("site")) {
        ("", "") => String::new(),
        (face, "") => face.to_owned(),
        (face, site) => format!("{face}/{site}"),
    };
    let decision = match record.decision() {
        Some(d) => d.label().to_owned(),
        None => record.text("message").to_owned(),
    };
    [
        record.text("time").to_owned(),
        record.seq.to_string(),
        face_site,
        decision,
        record.text("reason").to_owned(),
        record.text("auth_number").to_owned(),
        record.text(NAME_FIELD).to_owned(),
    ]
    .map(|cell| terminal_safe(&cell))
}

/// A cell as a terminal shows it safely: control characters (an escape sequence in a
/// hostile authorisation number, a newline that would forge a row) and the Unicode
/// bidirectional controls (which would show a cell's text in another order, Trojan Source
/// style) written as escapes.
fn terminal_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || is_bidi_control(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Unicode's explicit directional formatting characters (UAX #9 §2: embeddings, overrides,
/// isolates and the marks).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// The records as an aligned table, a header first.
pub fn table(records: &[AuditRecord]) -> String {
    let rows: Vec<[String; 7]> = std::iter::once(TABLE_HEADER.map(str::to_owned))
        .chain(records.iter().map(table_row))
        .collect();
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let _ = write!(line, "{cell:<w$}");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Why an audit command failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditCommandError {
    #[error(transparent)]
    Read(#[from] AuditReadError),
    #[error("{}: cannot write: {source}", file.display())]
    Write {
        file: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl AuditCommandError {
    /// The exit status (sysexits.h, as every command): an unreadable input 66, a line that is
    /// not a record 65, an output that cannot be written 73.
    pub fn exit_code(&self) -> u8 {
        match self {
            AuditCommandError::Read(AuditReadError::Open { .. }) => super::EXIT_NO_INPUT,
            AuditCommandError::Read(AuditReadError::Line { .. }) => super::EXIT_DATA_ERR,
            AuditCommandError::Write { .. } => super::EXIT_CANT_CREATE,
        }
    }
}

/// `audit query`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArgs {
    /// Audit log files, oldest first (rotated ones, gzip-compressed or not, before the
    /// current one).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Only this PSP: an authorisation number or a certificate's SHA-256 (hex), exactly.
    #[arg(long, value_name = "AUTH_NUMBER|SHA256")]
    pub psp: Option<String>,
    /// Only decisions for this jurisdiction (country code, exactly).
    #[arg(long, value_name = "CC")]
    pub jurisdiction: Option<String>,
    /// Only records of this gateway site.
    #[arg(long, value_name = "NAME")]
    pub site: Option<String>,
    /// Only this decision (a "gateway refused" record is a refusal).
    #[arg(long, value_enum)]
    pub decision: Option<Decision>,
    /// From this time (RFC 3339) or date (YYYY-MM-DD, UTC), included.
    #[arg(long, value_name = "TIME|DATE", value_parser = parse_from)]
    pub from: Option<OffsetDateTime>,
    /// To this time (RFC 3339) or date (YYYY-MM-DD, UTC, the whole day), included.
    #[arg(long, value_name = "TIME|DATE", value_parser = parse_to)]
    pub to: Option<OffsetDateTime>,
    /// Output: the records as JSON lines, or an aligned table.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
}

impl QueryArgs {
    pub fn filter(&self) -> Filter {
        Filter {
            psp: self.psp.clone(),
            jurisdiction: self.jurisdiction.clone(),
            site: self.site.clone(),
            decision: self.decision,
            period: Period {
                from: self.from,
                until: self.to,
            },
        }
    }
}

/// Writes the records of `files` that `filter` matches to `out`, in `format`; returns how
/// many. JSON lines are written as they are read (a year of records is never all in
/// memory); the table is aligned, so it is built first.
pub fn write_query(
    files: &[PathBuf],
    filter: &Filter,
    format: Format,
    out: &mut dyn Write,
) -> Result<usize, AuditCommandError> {
    let stdout_error = |source| AuditCommandError::Write {
        file: PathBuf::from("(stdout)"),
        source,
    };
    match format {
        Format::Json => {
            let mut count = 0;
            for_each_record(files, |record| {
                if filter.matches(&record) {
                    count += 1;
                    writeln!(out, "{}", record.line).map_err(stdout_error)?;
                }
                Ok::<_, AuditCommandError>(())
            })?;
            Ok(count)
        }
        Format::Table => {
            let records = query(files, filter)?;
            out.write_all(table(&records).as_bytes())
                .map_err(stdout_error)?;
            Ok(records.len())
        }
    }
}

/// `audit query`: the matching records on stdout. Exit 0 (also when none match; stderr says
/// how many), 65 at a line that is not a record, 66 for a file that cannot be read.
pub fn run_query(args: &QueryArgs) -> ExitCode {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = write_query(&args.files, &args.filter(), args.format, &mut out).and_then(|n| {
        match out.flush() {
            Ok(()) => Ok(n),
            Err(source) => Err(AuditCommandError::Write {
                file: PathBuf::from("(stdout)"),
                source,
            }),
        }
    });
    match result {
        Ok(n) => {
            eprintln!(
                "psp-gateway: {n} audit records matched, printed as found: not verified (psp-gateway audit verify --checkpoints says whether the files were edited)"
            );
            ExitCode::SUCCESS
        }
        Err(e) => super::fail(e.exit_code(), &format!("audit query: {e}")),
    }
}

/// A checkpoint of the audit log's tree and what its verification found, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointStatus {
    /// The tree size (records) the checkpoint covers.
    pub size: u64,
    pub time: OffsetDateTime,
    pub verified: bool,
    /// What was checked, or why it failed.
    pub detail: String,
}

/// `audit report`'s arguments (the checkpoints come from the caller).
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Audit log files, oldest first (rotated ones, gzip-compressed or not, before the
    /// current one).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// From this time (RFC 3339) or date (YYYY-MM-DD, UTC), included.
    #[arg(long, value_name = "TIME|DATE", value_parser = parse_from)]
    pub from: Option<OffsetDateTime>,
    /// To this time (RFC 3339) or date (YYYY-MM-DD, UTC, the whole day), included.
    #[arg(long, value_name = "TIME|DATE", value_parser = parse_to)]
    pub to: Option<OffsetDateTime>,
    /// The HTML file to write.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: PathBuf,
    /// The checkpoint file: the checkpoints of the period are verified and shown.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub checkpoints: Option<PathBuf>,
    /// The public keys the checkpoints are verified with (JWKS or PEM).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Count records after the last checkpoint too (a live log), said in the report; without
    /// it, records no checkpoint covers make the report NOT VERIFIED.
    #[arg(long, requires = "checkpoints")]
    pub allow_tail: bool,
}

/// What the report counts, gathered in one pass over the records of the period.
#[derive(Debug, Default)]
struct Tally {
    records: u64,
    /// Records with no decision (the check endpoint's, the log's own notes).
    without_decision: BTreeMap<String, u64>,
    /// (day, decision, reason) → count.
    by_day: BTreeMap<(Date, Decision, String), u64>,
    /// (authorisation number, name, reason) → refusals.
    refused: BTreeMap<(String, String, String), Refusals>,
}

#[derive(Debug)]
struct Refusals {
    count: u64,
    first: OffsetDateTime,
    last: OffsetDateTime,
}

impl Tally {
    fn add(&mut self, record: &AuditRecord) {
        self.records += 1;
        let Some(decision) = record.decision() else {
            *self
                .without_decision
                .entry(record.text("message").to_owned())
                .or_default() += 1;
            return;
        };
        let reason = record.text("reason").to_owned();
        let day = record.time.to_offset(time::UtcOffset::UTC).date();
        *self
            .by_day
            .entry((day, decision, reason.clone()))
            .or_default() += 1;
        if decision == Decision::Refuse {
            let key = (
                record.text("auth_number").to_owned(),
                record.text(NAME_FIELD).to_owned(),
                reason,
            );
            let entry = self.refused.entry(key).or_insert(Refusals {
                count: 0,
                first: record.time,
                last: record.time,
            });
            entry.count += 1;
            entry.first = entry.first.min(record.time);
            entry.last = entry.last.max(record.time);
        }
    }

    /// Per day, per decision: the chart's bars.
    fn per_day(&self) -> BTreeMap<Date, BTreeMap<Decision, u64>> {
        let mut out: BTreeMap<Date, BTreeMap<Decision, u64>> = BTreeMap::new();
        for ((day, decision, _), n) in &self.by_day {
            *out.entry(*day).or_default().entry(*decision).or_default() += n;
        }
        out
    }
}

/// Whether the files a report counts were verified against their signed checkpoints first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// No checkpoints given: the tallies count the records as found.
    NotAsked,
    /// The files stand up to their checkpoints (what was verified).
    Verified(String),
    /// They do not (why): every tally is of records that may have been edited.
    Failed(String),
}

/// The report of the records of `files` in `period`, as one self-contained HTML document (no
/// script, no external style, font or image: it is read offline and archived), with the
/// checkpoints the caller verified; its tallies marked unverified.
pub fn report_html(
    files: &[PathBuf],
    period: Period,
    checkpoints: &[CheckpointStatus],
) -> Result<String, AuditReadError> {
    report_html_verified(files, period, checkpoints, &Verification::NotAsked)
}

/// [`report_html`], saying first whether the files were verified (`verification`).
pub fn report_html_verified(
    files: &[PathBuf],
    period: Period,
    checkpoints: &[CheckpointStatus],
    verification: &Verification,
) -> Result<String, AuditReadError> {
    let mut tally = Tally::default();
    for_each_record(files, |record| {
        if period.contains(record.time) {
            tally.add(&record);
        }
        Ok::<_, AuditReadError>(())
    })?;
    Ok(render_report(
        files,
        period,
        &tally,
        checkpoints,
        verification,
    ))
}

/// `audit report`: writes the report to `args.out`. Exit 0, 65 at a line that is not a
/// record or when the files do not stand up to their checkpoints (the report is written,
/// saying so), 66 for a file that cannot be read, 73 when the report cannot be written.
pub fn run_report(
    args: &ReportArgs,
    checkpoints: &[CheckpointStatus],
    verification: &Verification,
) -> ExitCode {
    let period = Period {
        from: args.from,
        until: args.to,
    };
    let result = report_html_verified(&args.files, period, checkpoints, verification)
        .map_err(AuditCommandError::from)
        .and_then(|html| {
            std::fs::write(&args.out, html).map_err(|source| AuditCommandError::Write {
                file: args.out.clone(),
                source,
            })
        });
    match result {
        Ok(()) => {
            eprintln!(
                "psp-gateway: audit report written to {}",
                args.out.display()
            );
            match verification {
                Verification::Failed(why) => super::fail(
                    super::EXIT_DATA_ERR,
                    &format!(
                        "the files do not stand up to their checkpoints, and the report says so: {why}"
                    ),
                ),
                Verification::NotAsked => {
                    eprintln!(
                        "psp-gateway: the tallies count the records as found, not verified (give --checkpoints and --key)"
                    );
                    ExitCode::SUCCESS
                }
                Verification::Verified(_) => ExitCode::SUCCESS,
            }
        }
        Err(e) => super::fail(e.exit_code(), &format!("audit report: {e}")),
    }
}

/// `text` for HTML text and attribute values: the five characters that could end either
/// (`&`, `<`, `>`, `"`, `'`) as character references, so a record's content is never markup.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Inline style: the report is one file, readable offline and printable.
const REPORT_STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}\
th,td{border:1px solid #bbb;padding:.25em .6em;text-align:left}\
td.n{text-align:right}\
.permit{fill:#2e7d32}.refuse{fill:#c62828}.report-only{fill:#f9a825}\
.key-permit{color:#2e7d32}.key-refuse{color:#c62828}.key-report-only{color:#f9a825}\
.ok{color:#2e7d32}.failed{color:#c62828;font-weight:bold}";

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn render_report(
    files: &[PathBuf],
    period: Period,
    tally: &Tally,
    checkpoints: &[CheckpointStatus],
    verification: &Verification,
) -> String {
    let mut html = String::new();
    let from = period.from.map_or("the first record".to_owned(), rfc3339);
    let until = period.until.map_or("the last record".to_owned(), |t| {
        format!("before {}", rfc3339(t))
    });
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<title>psp-gateway audit report</title>\n<style>{REPORT_STYLE}</style>\n</head>\n<body>\n\
<h1>psp-gateway audit report</h1>\n<p>Period: from {} to {}. Files: {}.</p>\n",
        escape_html(&from),
        escape_html(&until),
        escape_html(
            &files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let _ = writeln!(
        html,
        "{}",
        match verification {
            Verification::NotAsked => "<p id=\"verification\" class=\"failed\">Unverified: every \
figure below counts the records as they are in the files; nothing here shows that they were \
not edited. Run <code>psp-gateway audit report</code> with <code>--checkpoints</code> and \
<code>--key</code> to verify the files against their signed checkpoints first.</p>"
                .to_owned(),
            Verification::Verified(what) => format!(
                "<p id=\"verification\" class=\"ok\">Verified before counting: {}.</p>",
                escape_html(what)
            ),
            Verification::Failed(why) => format!(
                "<p id=\"verification\" class=\"failed\">NOT VERIFIED: the files do not stand \
up to their signed checkpoints ({}). Every figure below counts records that may have been \
edited.</p>",
                escape_html(why)
            ),
        }
    );
    if tally.records == 0 {
        html.push_str("<p id=\"empty\">No audit records in this period.</p>\n");
    } else {
        let _ = writeln!(
            html,
            "<p>{} records in this period, {} of them decisions.</p>",
            tally.records,
            tally.by_day.values().sum::<u64>()
        );
    }
    render_decisions(&mut html, tally);
    render_refused(&mut html, tally);
    html.push_str(
        "<h2>Data freshness</h2>\n<p>The audit records do not carry the freshness of the \
reference data a decision used (the age of the trusted lists, registers and revocation \
evidence), so it cannot be shown here.</p>\n",
    );
    render_checkpoints(&mut html, checkpoints);
    html.push_str("</body>\n</html>\n");
    html
}

/// The chart and the table of decisions by day, decision and reason, and the records that
/// are no decision.
fn render_decisions(html: &mut String, tally: &Tally) {
    html.push_str("<h2>Decisions by day</h2>\n");
    if tally.by_day.is_empty() {
        html.push_str("<p>No decisions in this period.</p>\n");
    } else {
        html.push_str(&bar_chart(&tally.per_day()));
        html.push_str(
            "<p>Bars, from the bottom: <span class=\"key-permit\">&#9632; permit</span>, \
<span class=\"key-report-only\">&#9632; report-only</span>, \
<span class=\"key-refuse\">&#9632; refuse</span>.</p>\n",
        );
        html.push_str(
            "<table id=\"by-day\">\n<tr><th>Day (UTC)</th><th>Decision</th><th>Reason</th><th>Count</th></tr>\n",
        );
        for ((day, decision, reason), n) in &tally.by_day {
            let _ = writeln!(
                html,
                "<tr><td>{day}</td><td>{}</td><td>{}</td><td class=\"n\">{n}</td></tr>",
                decision.label(),
                escape_html(reason),
            );
        }
        html.push_str("</table>\n");
    }
    if !tally.without_decision.is_empty() {
        html.push_str(
            "<p>Records without a decision (the check endpoint's answers, the log's own notes):</p>\n\
<table id=\"without-decision\">\n<tr><th>Message</th><th>Count</th></tr>\n",
        );
        for (message, n) in &tally.without_decision {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td class=\"n\">{n}</td></tr>",
                escape_html(message)
            );
        }
        html.push_str("</table>\n");
    }
}

/// Chart geometry: the plot's height and the widest a day's bar is drawn, in SVG units.
const CHART_HEIGHT: u64 = 200;
const CHART_MAX_BAR: u64 = 40;
/// Room under the plot for the first and last day's labels.
const CHART_LABELS: u64 = 30;

/// One stacked bar per day (permit, report-only, refuse from the bottom), drawn as SVG
/// rectangles: no script, no library.
fn bar_chart(per_day: &BTreeMap<Date, BTreeMap<Decision, u64>>) -> String {
    let days = per_day.len() as u64;
    let max = per_day
        .values()
        .map(|d| d.values().sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let bar = (800 / days.max(1)).clamp(2, CHART_MAX_BAR);
    let width = bar * days + 40;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{width}\" height=\"{}\" \
viewBox=\"0 0 {width} {}\"><title>Decisions per day (largest day: {max})</title>",
        CHART_HEIGHT + CHART_LABELS,
        CHART_HEIGHT + CHART_LABELS
    );
    for (i, (day, decisions)) in per_day.iter().enumerate() {
        let x = 20 + i as u64 * bar;
        let mut y = CHART_HEIGHT;
        for decision in [Decision::Permit, Decision::ReportOnly, Decision::Refuse] {
            let n = decisions.get(&decision).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let h = (n * CHART_HEIGHT / max).max(1);
            y = y.saturating_sub(h);
            let _ = writeln!(
                svg,
                "<rect class=\"{label}\" x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\"><title>{day} {label}: {n}</title></rect>",
                label = decision.label(),
                w = bar.saturating_sub(1).max(1),
            );
        }
    }
    if let (Some(first), Some(last)) = (per_day.keys().next(), per_day.keys().next_back()) {
        let _ = writeln!(
            svg,
            "<text x=\"20\" y=\"{y}\" font-size=\"12\">{first}</text><text x=\"{x}\" y=\"{y}\" font-size=\"12\" text-anchor=\"end\">{last}</text>",
            y = CHART_HEIGHT + 20,
            x = width - 20,
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The PSPs refused, and why.
fn render_refused(html: &mut String, tally: &Tally) {
    html.push_str("<h2>PSPs refused</h2>\n");
    if tally.refused.is_empty() {
        html.push_str("<p>No refusals in this period.</p>\n");
        return;
    }
    html.push_str(
        "<table id=\"refused\">\n<tr><th>Authorisation number</th><th>Name</th><th>Reason</th>\
<th>Count</th><th>First</th><th>Last</th></tr>\n",
    );
    for ((auth_number, name, reason), r) in &tally.refused {
        let auth_number = if auth_number.is_empty() {
            "(none: refused before the certificate was checked)".to_owned()
        } else {
            auth_number.clone()
        };
        let name = if name.is_empty() {
            "(not recorded)"
        } else {
            name
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            escape_html(&auth_number),
            escape_html(name),
            escape_html(reason),
            r.count,
            rfc3339(r.first),
            rfc3339(r.last),
        );
    }
    html.push_str("</table>\n");
}

/// The checkpoints the caller verified.
fn render_checkpoints(html: &mut String, checkpoints: &[CheckpointStatus]) {
    html.push_str("<h2>Checkpoints</h2>\n");
    if checkpoints.is_empty() {
        html.push_str("<p>No checkpoints given.</p>\n");
        return;
    }
    html.push_str(
        "<table id=\"checkpoints\">\n<tr><th>Size</th><th>Time</th><th>Verified</th><th>Detail</th></tr>\n",
    );
    for c in checkpoints {
        let (class, word) = if c.verified {
            ("ok", "verified")
        } else {
            ("failed", "NOT VERIFIED")
        };
        let _ = writeln!(
            html,
            "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"{class}\">{word}</td><td>{}</td></tr>",
            c.size,
            rfc3339(c.time),
            escape_html(&c.detail),
        );
    }
    html.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escaping_leaves_no_markup() {
        assert_eq!(
            escape_html("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn a_date_bound_covers_its_whole_day_and_a_time_bound_its_instant() {
        let from = parse_from("2026-11-24").expect("date");
        let until = parse_to("2026-11-24").expect("date");
        assert_eq!(rfc3339(from), "2026-11-24T00:00:00Z");
        assert_eq!(rfc3339(until), "2026-11-25T00:00:00Z");
        let t = OffsetDateTime::parse("2026-11-24T10:00:00Z", &Rfc3339).expect("t");
        let p = Period {
            from: Some(t),
            until: Some(parse_to("2026-11-24T10:00:00Z").expect("time")),
        };
        assert!(p.contains(t));
        assert!(!p.contains(t + time::Duration::NANOSECOND));
        assert!(parse_from("24/11/2026").is_err());
    }

    /// The arguments as `src/cli.rs` wires them (`audit query ...`, `audit report ...`).
    #[derive(Debug, clap::Parser)]
    struct Wired {
        #[command(subcommand)]
        command: WiredCommand,
    }

    #[derive(Debug, clap::Subcommand)]
    enum WiredCommand {
        Query(QueryArgs),
        Report(ReportArgs),
    }

    #[test]
    fn the_arguments_parse_as_the_command_line_gives_them() {
        use clap::{CommandFactory, Parser};
        Wired::command().debug_assert();
        let q = Wired::try_parse_from([
            "x",
            "query",
            "a.jsonl.1.gz",
            "a.jsonl",
            "--psp",
            "PSDDE-BAFIN-000001",
            "--decision",
            "report-only",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-30T12:00:00Z",
            "--format",
            "table",
        ])
        .expect("parses");
        let WiredCommand::Query(q) = q.command else {
            panic!("query")
        };
        assert_eq!(q.files.len(), 2);
        assert_eq!(q.decision, Some(Decision::ReportOnly));
        assert_eq!(q.format, Format::Table);
        assert_eq!(
            q.filter().period.from.map(rfc3339).as_deref(),
            Some("2026-11-01T00:00:00Z")
        );
        let r = Wired::try_parse_from(["x", "report", "a.jsonl", "-o", "r.html"]).expect("parses");
        assert!(
            matches!(r.command, WiredCommand::Report(ReportArgs { ref out, .. }) if out == Path::new("r.html"))
        );
        assert!(Wired::try_parse_from(["x", "query", "a.jsonl", "--decision", "deny"]).is_err());
        assert!(Wired::try_parse_from(["x", "query", "a.jsonl", "--from", "soon"]).is_err());
    }

    #[test]
    fn control_characters_do_not_reach_the_terminal() {
        assert_eq!(terminal_safe("PSD\x1b[31mX\nY"), "PSD\\u{1b}[31mX\\nY");
        assert_eq!(terminal_safe("A\u{202E}B"), "A\\u{202e}B");
    }
}
