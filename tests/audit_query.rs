//! `audit query` and `audit report` over real audit files: written with the gateway's own
//! `AuditLog`, rotated, the rotated file gzip-compressed as logrotate does, then read back
//! in order. Each filter picks exactly the records it names; a line that is not a record
//! stops the reading with its file and line; the HTML report counts what the records say and
//! keeps a hostile authorisation number or name inert.

use std::io::Write;
use std::path::{Path, PathBuf};

use psp_gateway::cli::audit::{
    self, AuditReadError, CheckpointStatus, Decision, Filter, Format, Period,
};
use psp_service::telemetry::audit::AuditLog;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("audit-query-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(m) => m,
        _ => unreachable!("the test records are objects"),
    }
}

/// A gateway decision record, with the fields `gateway/record.rs` writes that the query
/// reads.
fn decision(
    time: &str,
    site: &str,
    jurisdiction: &str,
    auth: &str,
    verdict: &str,
    reason: &str,
) -> Map<String, Value> {
    fields(json!({
        "message": "gateway decision",
        "face": "gateway",
        "site": site,
        "jurisdiction": jurisdiction,
        "auth_number": auth,
        "fingerprint": fingerprint(auth),
        "decision": verdict,
        "reason": reason,
        "time": time,
    }))
}

fn fingerprint(auth: &str) -> String {
    psp_cert::hex::lower(&psp_cert::hex::sha256(auth.as_bytes()))
}

const DE: &str = "PSDDE-BAFIN-000001";
const FR: &str = "PSDFR-ACPR-000002";

/// Two days in a rotated, gzip-compressed file, a third in the current one: seq 1..=4 in
/// `audit.jsonl.1.gz`, 5..=8 in `audit.jsonl`.
fn rotated_log(dir: &Path) -> Vec<PathBuf> {
    let current = dir.join("audit.jsonl");
    let log = AuditLog::open(&current).expect("open");
    for record in [
        decision("2026-11-23T09:00:00Z", "bank-de", "DE", DE, "permit", ""),
        decision(
            "2026-11-23T10:00:00Z",
            "bank-fr",
            "FR",
            FR,
            "refuse",
            "not_in_register",
        ),
        decision(
            "2026-11-24T08:00:00Z",
            "bank-fr",
            "FR",
            FR,
            "refuse",
            "not_in_register",
        ),
        fields(json!({
            "message": "check",
            "auth_number": DE,
            "fingerprint": fingerprint(DE),
            "jurisdiction": "DE",
            "time": "2026-11-24T09:30:00Z",
        })),
    ] {
        log.append(record).expect("append");
    }
    let rotated = dir.join("audit.jsonl.1");
    std::fs::rename(&current, &rotated).expect("rotate");
    log.reopen().expect("reopen");
    for record in [
        decision(
            "2026-11-25T07:00:00Z",
            "bank-de",
            "DE",
            DE,
            "report-only",
            "not_passported",
        ),
        fields(json!({
            "message": "gateway refused",
            "face": "gateway",
            "site": "bank-de",
            "status": 504,
            "reason": "upstream_timeout",
            "detail": "",
            "time": "2026-11-25T07:30:00Z",
        })),
        decision("2026-11-25T08:00:00Z", "bank-de", "DE", DE, "permit", ""),
        decision(
            "2026-11-25T23:59:59Z",
            "bank-fr",
            "FR",
            FR,
            "refuse",
            "certificate_revoked",
        ),
    ] {
        log.append(record).expect("append");
    }
    let gz = dir.join("audit.jsonl.1.gz");
    let mut encoder = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).expect("create gz"),
        flate2::Compression::default(),
    );
    encoder
        .write_all(&std::fs::read(&rotated).expect("read rotated"))
        .expect("compress");
    encoder.finish().expect("finish gz");
    std::fs::remove_file(&rotated).expect("remove rotated");
    vec![gz, current]
}

fn seqs(files: &[PathBuf], filter: &Filter) -> Vec<u64> {
    audit::query(files, filter)
        .expect("query")
        .iter()
        .map(|r| r.seq)
        .collect()
}

fn at(text: &str) -> OffsetDateTime {
    OffsetDateTime::parse(text, &Rfc3339).expect("time")
}

#[test]
fn every_record_of_a_rotated_gzip_file_and_the_current_one_is_read_in_order() {
    let dir = scratch("order");
    let files = rotated_log(&dir);
    assert_eq!(seqs(&files, &Filter::default()), [1, 2, 3, 4, 5, 6, 7, 8]);
    // The lines come back byte for byte: the chain's hash covers them.
    let records = audit::query(&files, &Filter::default()).expect("query");
    let current = std::fs::read_to_string(&files[1]).expect("read");
    let written: Vec<&str> = current.lines().collect();
    let read: Vec<&str> = records[4..].iter().map(|r| r.line.as_str()).collect();
    assert_eq!(read, written);
}

#[test]
fn a_psp_is_found_by_authorisation_number_or_certificate_hash_exactly() {
    let dir = scratch("psp");
    let files = rotated_log(&dir);
    let by = |psp: &str| {
        seqs(
            &files,
            &Filter {
                psp: Some(psp.to_owned()),
                ..Filter::default()
            },
        )
    };
    assert_eq!(by(FR), [2, 3, 8]);
    assert_eq!(by(DE), [1, 4, 5, 7]);
    assert_eq!(by(&fingerprint(FR)), [2, 3, 8]);
    assert_eq!(by(&fingerprint(FR).to_uppercase()), [2, 3, 8]);
    // Exact: no prefix, no substring.
    assert!(by("PSDFR").is_empty());
    assert!(by(&fingerprint(FR)[..20]).is_empty());
}

#[test]
fn jurisdiction_site_and_decision_filters_pick_exactly_their_records() {
    let dir = scratch("criteria");
    let files = rotated_log(&dir);
    let jurisdiction = Filter {
        jurisdiction: Some("DE".to_owned()),
        ..Filter::default()
    };
    assert_eq!(seqs(&files, &jurisdiction), [1, 4, 5, 7]);
    let site = Filter {
        site: Some("bank-de".to_owned()),
        ..Filter::default()
    };
    assert_eq!(seqs(&files, &site), [1, 5, 6, 7]);
    let decided = |d: Decision| {
        seqs(
            &files,
            &Filter {
                decision: Some(d),
                ..Filter::default()
            },
        )
    };
    assert_eq!(decided(Decision::Permit), [1, 7]);
    // A "gateway refused" record (seq 6) is a refusal too.
    assert_eq!(decided(Decision::Refuse), [2, 3, 6, 8]);
    assert_eq!(decided(Decision::ReportOnly), [5]);
    let both = Filter {
        site: Some("bank-fr".to_owned()),
        decision: Some(Decision::Refuse),
        psp: Some(FR.to_owned()),
        ..Filter::default()
    };
    assert_eq!(seqs(&files, &both), [2, 3, 8]);
}

#[test]
fn a_time_range_takes_dates_as_whole_days_and_times_as_instants() {
    let dir = scratch("time");
    let files = rotated_log(&dir);
    let range = |from: &str, to: &str| Filter {
        period: Period {
            from: Some(audit::parse_from(from).expect("from")),
            until: Some(audit::parse_to(to).expect("to")),
        },
        ..Filter::default()
    };
    assert_eq!(seqs(&files, &range("2026-11-24", "2026-11-24")), [3, 4]);
    // The last second of the 25th is in the 25th.
    assert_eq!(
        seqs(&files, &range("2026-11-25", "2026-11-25")),
        [5, 6, 7, 8]
    );
    assert_eq!(
        seqs(
            &files,
            &range("2026-11-23T10:00:00Z", "2026-11-24T08:00:00Z")
        ),
        [2, 3]
    );
    assert_eq!(
        seqs(
            &files,
            &range("2026-11-23T10:00:00+01:00", "2026-11-23T10:59:59+01:00")
        ),
        [1],
        "offsets are honoured"
    );
    assert!(audit::parse_from("yesterday").is_err());
}

#[test]
fn the_table_is_aligned_and_json_lines_are_the_records_as_written() {
    let dir = scratch("formats");
    let files = rotated_log(&dir);
    let filter = Filter {
        decision: Some(Decision::Refuse),
        ..Filter::default()
    };
    let mut out = Vec::new();
    let n = audit::write_query(&files, &filter, Format::Table, &mut out).expect("table");
    assert_eq!(n, 4);
    let text = String::from_utf8(out).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with("TIME"), "{text}");
    let column = lines[0].find("AUTH NUMBER").expect("column");
    assert_eq!(&lines[1][column..column + FR.len()], FR, "{text}");
    assert!(lines[3].contains("gateway/bank-de") && lines[3].contains("upstream_timeout"));

    let mut out = Vec::new();
    audit::write_query(&files, &filter, Format::Json, &mut out).expect("json");
    let text = String::from_utf8(out).expect("utf-8");
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).expect("a JSON line");
        assert!(
            line.starts_with("{\"seq\":"),
            "the record as written: {line}"
        );
        assert!(record["prev"].is_string());
    }
    assert_eq!(text.lines().count(), 4);
}

#[test]
fn a_line_that_is_not_a_record_is_named_by_file_and_line() {
    let dir = scratch("malformed");
    let files = rotated_log(&dir);
    let mut text = std::fs::read_to_string(&files[1]).expect("read");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.insert(2, "not json at all".to_owned());
    text = lines.join("\n") + "\n";
    std::fs::write(&files[1], text).expect("write");
    match audit::query(&files, &Filter::default()) {
        Err(AuditReadError::Line { file, line, why }) => {
            assert_eq!(file, files[1]);
            assert_eq!(line, 3);
            assert!(
                matches!(why, psp_gateway::cli::audit::LineError::NotJson(_)),
                "{why}"
            );
            assert!(why.to_string().contains("not a JSON record"), "{why}");
        }
        other => panic!("expected a line error, got {other:?}"),
    }
    // A JSON line that is no audit record, and an empty line, are named too.
    std::fs::write(
        &files[1],
        "{\"seq\":1,\"prev\":\"00\",\"time\":\"2026-11-25T00:00:00Z\"}\n{\"hello\":1}\n",
    )
    .expect("write");
    let e = audit::query(&files, &Filter::default()).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("audit.jsonl: line 2: no numeric seq: not an audit record"),
        "{e}"
    );
    std::fs::write(&files[1], "\n").expect("write");
    let e = audit::query(&files, &Filter::default()).unwrap_err();
    assert!(e.to_string().contains("line 1: an empty line"), "{e}");
    // A missing file is named.
    let e = audit::query(&[dir.join("nope.jsonl")], &Filter::default()).unwrap_err();
    assert!(matches!(e, AuditReadError::Open { .. }), "{e}");
}

#[test]
fn a_line_over_the_limit_is_refused_not_read_into_memory() {
    let dir = scratch("long");
    let path = dir.join("audit.jsonl");
    std::fs::write(&path, vec![b'x'; (1 << 20) + 10]).expect("write");
    let e = audit::query(&[path], &Filter::default()).unwrap_err();
    assert!(
        e.to_string().contains("line 1: the line is over the"),
        "{e}"
    );
}

#[test]
fn the_report_counts_decisions_by_day_and_reason_and_lists_refused_psps() {
    let dir = scratch("report");
    let files = rotated_log(&dir);
    let checkpoints = [
        CheckpointStatus {
            size: 4,
            time: at("2026-11-24T23:00:00Z"),
            verified: true,
            detail: "consistent with size 8".to_owned(),
        },
        CheckpointStatus {
            size: 9,
            time: at("2026-11-25T23:00:00Z"),
            verified: false,
            detail: "the log has 8 records <b>".to_owned(),
        },
    ];
    let html = audit::report_html(&files, Period::default(), &checkpoints).expect("report");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("8 records in this period, 7 of them decisions."),
        "{html}"
    );
    assert!(html.contains(
        "<tr><td>2026-11-23</td><td>refuse</td><td>not_in_register</td><td class=\"n\">1</td></tr>"
    ));
    assert!(
        html.contains("<tr><td>2026-11-25</td><td>permit</td><td></td><td class=\"n\">1</td></tr>")
    );
    // FR refused twice for not_in_register, from the 23rd to the 24th.
    assert!(html.contains(&format!(
        "<tr><td>{FR}</td><td>(not recorded)</td><td>not_in_register</td><td class=\"n\">2</td><td>2026-11-23T10:00:00Z</td><td>2026-11-24T08:00:00Z</td></tr>"
    )), "{html}");
    assert!(html.contains("<tr><td>check</td><td class=\"n\">1</td></tr>"));
    assert!(html.contains("<svg") && html.contains("class=\"refuse\""));
    assert!(html.contains("do not carry the freshness"));
    assert!(html.contains("NOT VERIFIED") && html.contains("the log has 8 records &lt;b&gt;"));
    // Self-contained: nothing is fetched, nothing runs.
    for outside in ["<script", "src=", "href=", "@import", "url("] {
        assert!(!html.contains(outside), "{outside} in the report");
    }
}

#[test]
fn a_hostile_authorisation_number_or_name_comes_out_inert() {
    let dir = scratch("hostile");
    let path = dir.join("audit.jsonl");
    let log = AuditLog::open(&path).expect("open");
    let mut record = decision(
        "2026-11-25T10:00:00Z",
        "bank-de",
        "DE",
        "<script>alert(1)</script>",
        "refuse",
        "not_in_register\"><img src=x onerror=alert(2)>",
    );
    record.insert(
        audit::NAME_FIELD.to_owned(),
        json!("Evil & Co <script>fetch('//x')</script>"),
    );
    log.append(record).expect("append");
    let html = audit::report_html(&[path], Period::default(), &[]).expect("report");
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("Evil &amp; Co &lt;script&gt;fetch(&#39;//x&#39;)&lt;/script&gt;"));
    assert!(html.contains("not_in_register&quot;&gt;&lt;img src=x"));
    assert!(html.contains("No checkpoints given."));
}

#[test]
fn a_report_for_a_period_without_records_says_so() {
    let dir = scratch("empty");
    let files = rotated_log(&dir);
    let period = Period {
        from: Some(audit::parse_from("2026-12-01").expect("from")),
        until: Some(audit::parse_to("2026-12-31").expect("to")),
    };
    let html = audit::report_html(&files, period, &[]).expect("report");
    assert!(html.contains("No audit records in this period."), "{html}");
    assert!(html.contains("No decisions in this period."));
    assert!(html.contains("No refusals in this period."));
    assert!(!html.contains("<svg"));
}
