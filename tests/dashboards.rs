//! The Grafana dashboard (`deploy/grafana/psp-gateway.json`) and the Prometheus alert rules
//! (`deploy/prometheus/alerts.yml`) against the service as it is:
//! - promtool (Debian package `prometheus`, installed by scripts/test) accepts the rules, and
//!   its unit tests (`deploy/prometheus/alerts_test.yml`) make every alert fire on synthetic
//!   series; with every alert's expression emptied, each of them is reported missing, so no
//!   alert's test passes without its expression;
//! - every metric and every label the dashboard's queries and the rules name is in a real
//!   `/metrics` scrape, taken after traffic on the endpoint and the gateway made each family
//!   carry samples; a copy of the dashboard with a misspelt name or label is caught;
//! - the dashboard's queries parse (promtool, on them as recording rules), its panel ids are
//!   unique, and every panel queries through the `${datasource}` variable.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::service::{self, send};
use common::test_pki::{test_pki, two_site_config};
use common::tls_client::{self, Proto};
use common::upstream::{held_upstream, until};
use http::{Method, Request, StatusCode};
use psp_gateway::app::{self, Running};
use serde_json::{Value, json};

const DASHBOARD: &str = "deploy/grafana/psp-gateway.json";
const ALERTS: &str = "deploy/prometheus/alerts.yml";
const ALERTS_TEST: &str = "deploy/prometheus/alerts_test.yml";

/// Labels a Prometheus scrape adds to every series (the target's), which the service's own
/// text does not carry.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

// ---------------------------------------------------------------------------------------------
// promtool

fn promtool(args: &[&str], dir: &Path) -> Output {
    Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs (Debian package prometheus; scripts/test installs it)")
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A scratch directory of this test binary, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "psp-gateway-dashboards-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

// ---------------------------------------------------------------------------------------------
// The two files

fn read(rel: &str) -> String {
    std::fs::read_to_string(common::root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Value {
    serde_norway::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not YAML: {e}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

/// Every alerting rule of the rules file.
fn alert_rules(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .collect()
}

/// Every panel, those inside rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The text of a template variable's query (Grafana writes a string or `{query: …}`).
fn variable_query(variable: &Value) -> Option<&str> {
    variable["query"]["query"]
        .as_str()
        .or_else(|| variable["query"].as_str())
}

/// Every query of the dashboard as (where, PromQL): the panels' targets, and the template
/// variables' `label_values(SELECTOR, LABEL)` as `count by (LABEL) (SELECTOR)`, which asks the
/// same of the scrape (the metric, and the label on it).
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dashboard) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_default().to_owned();
            out.push((
                format!(
                    "panel {} {:?} {}",
                    p["id"],
                    p["title"].as_str().unwrap_or_default(),
                    t["refId"].as_str().unwrap_or_default()
                ),
                expr,
            ));
        }
    }
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] != "query" {
            continue;
        }
        let query = variable_query(v).unwrap_or_default();
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {}: not label_values(…): {query}", v["name"]));
        let (selector, label) = inner.rsplit_once(',').expect("label_values(metric, label)");
        out.push((
            format!("variable {}", v["name"]),
            format!("count by ({}) ({})", label.trim(), selector.trim()),
        ));
    }
    out
}

/// Every alerting rule's expression as (where, PromQL).
fn alert_queries(rules: &Value) -> Vec<(String, String)> {
    alert_rules(rules)
        .into_iter()
        .map(|r| {
            (
                format!("alert {}", r["alert"].as_str().unwrap_or("?")),
                r["expr"].as_str().expect("expr").to_owned(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// A scrape: its families, their types and the labels their samples carry

#[derive(Debug, Default)]
struct Family {
    kind: String,
    /// The labels on its samples, each with the values seen (a histogram's `le` left out: it
    /// is its `_bucket` series').
    labels: BTreeMap<String, BTreeSet<String>>,
    samples: usize,
}

#[derive(Debug)]
struct Scrape(BTreeMap<String, Family>);

/// The labels of a sample's `{name="value",…}` (values may hold `\\`, `\"` and `\n`).
fn sample_labels(braces: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let mut chars = braces.trim_start_matches('{').chars();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let name = name.trim().trim_start_matches(',').trim();
        if name.is_empty() || name.starts_with('}') {
            return labels;
        }
        assert_eq!(chars.next(), Some('"'), "a quoted value after {name}=");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.push((name.to_owned(), value));
    }
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut families: BTreeMap<String, Family> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
                families.entry(name.to_owned()).or_default().kind = kind.to_owned();
            }
        }
        let mut scrape = Scrape(families);
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let end = line.find(['{', ' ']).expect("a sample line");
            let (family, suffix) = scrape
                .family_of(&line[..end])
                .unwrap_or_else(|| panic!("a sample of no declared family: {line}"));
            let family = family.to_owned();
            let f = scrape.0.get_mut(&family).expect("declared");
            f.samples += 1;
            if line[end..].starts_with('{') {
                for (name, value) in sample_labels(&line[end..]) {
                    if !(suffix == Some("_bucket") && name == "le") {
                        f.labels.entry(name).or_default().insert(value);
                    }
                }
            }
        }
        scrape
    }

    /// The family a series name is of: its own, or for a histogram's `_bucket`, `_sum` and
    /// `_count` (a summary's `_sum` and `_count`) the histogram's, with that suffix.
    fn family_of<'a>(&self, name: &'a str) -> Option<(&'a str, Option<&'static str>)> {
        if self.0.contains_key(name) {
            return Some((name, None));
        }
        ["_bucket", "_sum", "_count"]
            .into_iter()
            .find_map(|suffix| {
                let base = name.strip_suffix(suffix)?;
                let kind = self.0.get(base)?.kind.as_str();
                (kind == "histogram" || (kind == "summary" && suffix != "_bucket"))
                    .then_some((base, Some(suffix)))
            })
    }
}

// ---------------------------------------------------------------------------------------------
// PromQL, read loosely: the `psp_gateway_` selectors with their label matchers, and the label
// names of `by`, `without`, `on`, `ignoring`, `group_left` and `group_right`

#[derive(Debug, PartialEq)]
struct Matcher {
    label: String,
    /// `=`, `!=`, `=~` or `!~`.
    op: String,
    value: String,
}

#[derive(Debug, PartialEq)]
struct Selector {
    name: String,
    matchers: Vec<Matcher>,
}

#[derive(Debug, Default, PartialEq)]
struct Query {
    selectors: Vec<Selector>,
    grouping: Vec<String>,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    is_ident_start(c) || c.is_ascii_digit()
}

fn read_promql(expr: &str) -> Query {
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut query = Query::default();
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    let ident = |i: &mut usize| -> String {
        let start = *i;
        while *i < chars.len() && is_ident(chars[*i]) {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    let string = |i: &mut usize| -> String {
        let quote = chars[*i];
        let mut text = String::new();
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            if chars[*i] == '\\' && quote != '`' {
                *i += 1;
            }
            text.extend(chars.get(*i));
            *i += 1;
        }
        *i += 1;
        text
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            string(&mut i);
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c.is_ascii_digit() || c == '$' {
            // Numbers and durations (`5m`, `1d`), and Grafana's variables (`$__range`).
            i += 1;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
        } else if is_ident_start(c) {
            let word = ident(&mut i);
            let mut j = i;
            skip_ws(&mut j);
            let next = chars.get(j).copied();
            if word.starts_with("psp_gateway_") {
                let mut matchers = Vec::new();
                if next == Some('{') {
                    i = j + 1;
                    loop {
                        skip_ws(&mut i);
                        match chars.get(i) {
                            None => break,
                            Some('}') => {
                                i += 1;
                                break;
                            }
                            Some(',') => i += 1,
                            Some(_) => {
                                let label = ident(&mut i);
                                skip_ws(&mut i);
                                let start = i;
                                while i < chars.len() && "=!~".contains(chars[i]) {
                                    i += 1;
                                }
                                let op: String = chars[start..i].iter().collect();
                                skip_ws(&mut i);
                                assert!(
                                    matches!(chars.get(i), Some('"' | '\'' | '`')),
                                    "a label matcher's value is a string: {expr}"
                                );
                                let value = string(&mut i);
                                matchers.push(Matcher { label, op, value });
                            }
                        }
                    }
                }
                query.selectors.push(Selector {
                    name: word,
                    matchers,
                });
            } else if [
                "by",
                "without",
                "on",
                "ignoring",
                "group_left",
                "group_right",
            ]
            .contains(&word.as_str())
                && next == Some('(')
            {
                i = j + 1;
                loop {
                    skip_ws(&mut i);
                    match chars.get(i) {
                        None => break,
                        Some(')') => {
                            i += 1;
                            break;
                        }
                        Some(',') => i += 1,
                        Some(_) => {
                            let label = ident(&mut i);
                            assert!(!label.is_empty(), "a label list: {expr}");
                            query.grouping.push(label);
                        }
                    }
                }
            }
        } else {
            i += 1;
        }
    }
    query
}

/// The values a matcher's value stands for, when it names them: its value for `=` and `!=`
/// (empty: the label is absent, which Prometheus does not tell from empty), the words of a
/// regular expression that is only words and `|`; none for a Grafana variable or a pattern.
fn named_values(m: &Matcher) -> Vec<&str> {
    let plain = |w: &str| {
        w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-/".contains(c))
    };
    match m.op.as_str() {
        _ if m.value.contains('$') || m.value.is_empty() => vec![],
        "=" | "!=" => vec![m.value.as_str()],
        _ if m.value.split('|').all(plain) => m.value.split('|').collect(),
        _ => vec![],
    }
}

/// What the scrape lacks of what `queries` name: a metric that is not there (or has no
/// sample, whose labels cannot then be known), a label its samples do not carry, a value
/// (of `=`, `!=` or a `=~"a|b"`) none of its samples has, a grouping label none of the
/// query's metrics carries, a query that names no `psp_gateway_` metric.
fn missing_from(scrape: &Scrape, queries: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (place, expr) in queries {
        let query = read_promql(expr);
        if query.selectors.is_empty() {
            problems.push(format!("{place}: names no psp_gateway_ metric: {expr}"));
        }
        let mut known: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
        for s in &query.selectors {
            let Some((name, suffix)) = scrape.family_of(&s.name) else {
                problems.push(format!("{place}: {} is not in the scrape", s.name));
                continue;
            };
            let family = &scrape.0[name];
            if family.samples == 0 {
                problems.push(format!(
                    "{place}: {} has no sample in the scrape, so its labels are unknown",
                    s.name
                ));
                continue;
            }
            known.extend(family.labels.keys().map(String::as_str));
            if suffix == Some("_bucket") {
                known.insert("le");
            }
            for m in &s.matchers {
                if TARGET_LABELS.contains(&m.label.as_str())
                    || (m.label == "le" && suffix == Some("_bucket"))
                {
                    continue;
                }
                let Some(values) = family.labels.get(&m.label) else {
                    problems.push(format!(
                        "{place}: {} has no label {} (it has {:?})",
                        s.name,
                        m.label,
                        family.labels.keys().collect::<Vec<_>>()
                    ));
                    continue;
                };
                for v in named_values(m) {
                    if !values.contains(v) {
                        problems.push(format!(
                            "{place}: no sample of {} has {}=\"{v}\" (it has {values:?})",
                            s.name, m.label
                        ));
                    }
                }
            }
        }
        for l in &query.grouping {
            if !known.contains(l.as_str()) {
                problems.push(format!(
                    "{place}: grouping by {l}, which none of its metrics has"
                ));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// The files on their own

#[test]
fn promtool_accepts_the_alert_rules_and_each_has_a_for_a_severity_and_a_runbook() {
    let out = promtool(&["check", "rules", ALERTS], &common::root());
    assert!(out.status.success(), "promtool check rules: {}", said(&out));

    let rules = yaml(ALERTS);
    let alerts = alert_rules(&rules);
    assert!(alerts.len() >= 10, "{} alerts", alerts.len());
    let mut names = BTreeSet::new();
    for r in alerts {
        let name = r["alert"].as_str().expect("every rule is an alert");
        assert!(names.insert(name), "{name} twice");
        assert!(r["for"].as_str().is_some(), "{name}: no for:");
        assert!(
            ["critical", "warning", "info"]
                .contains(&r["labels"]["severity"].as_str().unwrap_or("")),
            "{name}: severity {}",
            r["labels"]["severity"]
        );
        for a in ["summary", "description"] {
            let text = r["annotations"][a].as_str().unwrap_or("");
            assert!(text.len() >= 20, "{name}: {a} is {text:?}");
        }
    }
}

#[test]
fn every_alert_fires_in_the_promtool_unit_tests_and_none_fires_there_without_its_expression() {
    let dir = common::root().join("deploy/prometheus");
    let out = promtool(&["test", "rules", "alerts_test.yml"], &dir);
    assert!(out.status.success(), "promtool test rules: {}", said(&out));

    // Each alert has a test that expects it to fire.
    let tests = yaml(ALERTS_TEST);
    let firing: BTreeSet<&str> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().expect("alert_rule_test"))
        .filter(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .map(|c| c["alertname"].as_str().expect("alertname"))
        .collect();
    let mut rules = yaml(ALERTS);
    let names: BTreeSet<String> = alert_rules(&rules)
        .iter()
        .map(|r| r["alert"].as_str().expect("alert").to_owned())
        .collect();
    for name in &names {
        assert!(
            firing.contains(name.as_str()),
            "no test expects {name} to fire"
        );
    }

    // The same tests against the rules with every expression emptied: each alert must be
    // reported, so none of its tests can pass without it.
    for group in rules["groups"].as_array_mut().expect("groups") {
        for rule in group["rules"].as_array_mut().expect("rules") {
            rule["expr"] = json!("vector(1) == 0");
        }
    }
    let copy = scratch("emptied");
    std::fs::write(
        copy.join("alerts.yml"),
        serde_norway::to_string(&rules).expect("YAML"),
    )
    .expect("write");
    std::fs::copy(dir.join("alerts_test.yml"), copy.join("alerts_test.yml")).expect("copy");
    let out = promtool(&["test", "rules", "alerts_test.yml"], &copy);
    let text = said(&out);
    assert!(!out.status.success(), "emptied rules passed: {text}");
    for name in &names {
        assert!(
            text.contains(&format!("alertname: {name},")),
            "{name} was not missed with its expression emptied: {text}"
        );
    }
    let _ = std::fs::remove_dir_all(copy);
}

#[test]
fn the_dashboard_has_unique_panel_ids_every_panel_queries_the_datasource_variable_and_promtool_parses_its_queries()
 {
    let d = dashboard();
    assert!(d["schemaVersion"].as_u64().expect("schemaVersion") >= 39);
    let variables = d["templating"]["list"].as_array().expect("templating");
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    assert_eq!(variable("datasource")["type"], "datasource");
    assert_eq!(variable("datasource")["query"], "prometheus");
    assert_eq!(
        variable_query(variable("site")),
        Some("label_values(psp_gateway_requests_total, site)")
    );
    let the_variable = json!({"type": "prometheus", "uid": "${datasource}"});
    for v in variables.iter().filter(|v| v["type"] == "query") {
        assert_eq!(v["datasource"], the_variable, "variable {}", v["name"]);
    }

    let mut ids = BTreeSet::new();
    let mut areas: Vec<(u64, u64, u64, u64, String)> = Vec::new();
    let all = panels(&d);
    assert!(all.len() >= 20, "{} panels", all.len());
    for p in all {
        let title = p["title"].as_str().unwrap_or("?").to_owned();
        let id = p["id"].as_u64().unwrap_or_else(|| panic!("{title}: no id"));
        assert!(ids.insert(id), "panel id {id} twice ({title})");
        let g = &p["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| g[k].as_u64().expect("gridPos"));
        assert!(x + w <= 24, "{title}: wider than the grid");
        for (ox, oy, ow, oh, other) in &areas {
            let apart = x + w <= *ox || *ox + ow <= x || y + h <= *oy || *oy + oh <= y;
            assert!(apart, "{title} overlaps {other}");
        }
        areas.push((x, y, w, h, title.clone()));
        if p["type"] == "row" {
            assert!(p["targets"].is_null(), "row {title} has queries");
            continue;
        }
        assert_eq!(p["datasource"], the_variable, "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(t["datasource"], the_variable, "{title} {}", t["refId"]);
        }
    }

    // Prometheus's own parser on every query, Grafana's variables given values.
    let rules: Vec<Value> = dashboard_queries(&d)
        .into_iter()
        .enumerate()
        .map(|(n, (place, expr))| {
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$__interval", "1m")
                .replace("$__range", "6h")
                .replace("$instance", ".*")
                .replace("$site", ".*");
            assert!(
                !expr.contains('$'),
                "{place}: a variable not known here: {expr}"
            );
            json!({"record": format!("dashboard:query_{n}"), "expr": expr})
        })
        .collect();
    let dir = scratch("queries");
    let file = dir.join("queries.yml");
    let groups = json!({"groups": [{"name": "dashboard", "rules": rules}]});
    std::fs::write(&file, serde_norway::to_string(&groups).expect("YAML")).expect("write");
    let out = promtool(
        &["check", "rules", file.to_str().expect("UTF-8 path")],
        &dir,
    );
    assert!(
        out.status.success(),
        "promtool on the dashboard's queries: {}",
        said(&out)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_loose_promql_reader_finds_selectors_matchers_and_grouping() {
    let q = read_promql(
        r#"histogram_quantile(0.99, sum by (face, le) (rate(psp_gateway_check_duration_seconds_bucket{instance=~"$instance", face!="a}b,c=\"d\""}[$__rate_interval])))
           / on(instance) group_left psp_gateway_x # psp_gateway_in_a_comment{nope="x"}
           or label_replace(up{job="psp_gateway_not_a_metric"}, "a", "$1", "b", "(.*)")"#,
    );
    let matcher = |label: &str, op: &str, value: &str| Matcher {
        label: label.into(),
        op: op.into(),
        value: value.into(),
    };
    assert_eq!(
        q,
        Query {
            selectors: vec![
                Selector {
                    name: "psp_gateway_check_duration_seconds_bucket".into(),
                    matchers: vec![
                        matcher("instance", "=~", "$instance"),
                        matcher("face", "!=", "a}b,c=\"d\""),
                    ],
                },
                Selector {
                    name: "psp_gateway_x".into(),
                    matchers: vec![],
                },
            ],
            grouping: vec!["face".into(), "le".into(), "instance".into()],
        }
    );
    // The values a matcher names: none for a variable or a pattern.
    assert_eq!(named_values(&matcher("a", "=~", "x|y-z")), ["x", "y-z"]);
    assert_eq!(named_values(&matcher("a", "!=", "x.y")), ["x.y"]);
    assert!(named_values(&matcher("a", "!~", "upstream_.*")).is_empty());
    assert!(named_values(&matcher("a", "=~", "$site")).is_empty());

    // A histogram's series belong to it; a counter's `_count`-like name does not.
    let scrape = Scrape::parse(
        "# HELP h_seconds x\n# TYPE h_seconds histogram\nh_seconds_sum{face=\"a\"} 1\n\
         h_seconds_count{face=\"a\"} 1\nh_seconds_bucket{le=\"+Inf\",face=\"a\"} 1\n\
         # HELP c_total x\n# TYPE c_total counter\nc_total{what=\"a\\\"b\",outcome=\"ok\"} 1\n",
    );
    assert_eq!(
        scrape.family_of("h_seconds_bucket"),
        Some(("h_seconds", Some("_bucket")))
    );
    assert_eq!(scrape.family_of("h_seconds"), Some(("h_seconds", None)));
    assert_eq!(scrape.family_of("c_total_count"), None);
    let labels = |family: &str| {
        scrape.0[family]
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect::<Vec<_>>()))
            .collect::<Vec<_>>()
    };
    assert_eq!(labels("h_seconds"), [("face", vec!["a"])]);
    assert_eq!(
        labels("c_total"),
        [("outcome", vec!["ok"]), ("what", vec!["a\"b"])]
    );
}

// ---------------------------------------------------------------------------------------------
// Against the service

/// A loopback port bound, then let go: nothing listens there (should another process take it
/// meanwhile, it serves no LOTL either, and the download fails all the same).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// One gateway request as `psp` on a connection that asked for `site`'s server name: the
/// status.
async fn gateway_call(running: &Running, psp: &str, site: &str) -> StatusCode {
    let addr = running.gateway.expect("gateway");
    let config = tls_client::client_config(&test_pki().dir, Some(psp), Proto::H1);
    let host = format!("{site}.localhost");
    let tls = tls_client::connect_as(addr, config, &host)
        .await
        .expect("handshake");
    let mut sender = tls_client::h1_on(tls).await;
    let mut req = Request::builder()
        .uri("/v1/accounts")
        .body(tls_client::empty())
        .expect("request");
    req.headers_mut().insert(
        http::header::HOST,
        format!("{host}:{}", addr.port()).parse().expect("host"),
    );
    sender.send_request(req).await.expect("answer").status()
}

async fn scrape(running: &Running) -> String {
    let r = send(running.admin.expect("admin"), Method::GET, "/metrics", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    String::from_utf8(r.body.to_vec()).expect("UTF-8")
}

/// The sandbox's two sites (`xx` forwarding to the echo upstream; `xy` to `xy_upstream`, one
/// call at a time, 1 s to answer), an endpoint rate limit of 2 per source tracking 2 sources
/// behind a trusted proxy, a trust source following a LOTL that cannot be fetched, and the
/// real Czech list of 2019 as a configured list (past its NextUpdate: not used).
fn traffic_config(xy_upstream: std::net::SocketAddr, dir: &Path) -> psp_gateway::Config {
    let cz = common::data("trusted-lists/CZ-tl_seq77_2019-08-23.xml");
    let lotl = format!("http://127.0.0.1:{}/eu-lotl.xml", closed_port());
    let signer = test_pki().dir.join("server/ca.pem");
    two_site_config(|t| {
        let t = t
            .replace(
                "rate_limit = { requests = 15000, period_seconds = 300 }",
                "rate_limit = { requests = 2, period_seconds = 300, max_tracked_sources = 2 }\n\
                 trusted_proxies = [\"127.0.0.1/32\"]",
            )
            .replace(
                "upstream = \"sandbox-echo\"\n# XY's API",
                &format!(
                    "upstream = \"http://{xy_upstream}\"\nupstream_timeout_ms = 1000\n\
                     upstream_max_requests = 1\n# XY's API"
                ),
            );
        assert_eq!(t.matches("upstream_max_requests = 1").count(), 1, "{t}");
        format!(
            "{t}\n[trust]\ncache_dir = \"{cache}\"\n\n\
             [[trust.sources]]\nname = \"eu\"\nqtsp_source = \"EIDAS\"\n\
             qtsp_jurisdiction = \"EEA\"\nvalid_for = [\"EEA\"]\n\
             lotl = {{ location = \"{lotl}\", signers = [\"{signer}\"], territories = [\"CZ\"] }}\n\n\
             [[trust.sources]]\nname = \"cz-configured\"\nqtsp_source = \"EIDAS\"\n\
             qtsp_jurisdiction = \"EEA\"\nvalid_for = [\"EEA\"]\ntrusted_lists = [\"{cz}\"]\n\n\
             [danger]\nunsigned_trusted_lists = [\"{cz}\"]\n\n\
             [shared_state]\nurl = \"redis://127.0.0.1:{redis}\"\nbudget_ms = 50\nfailed_logins = \"local\"\n",
            redis = closed_port(),
            cache = dir.join("trust-cache").display(),
            signer = signer.display(),
            cz = cz.display(),
        )
    })
}

/// Requests that make every family the two files name carry samples: the endpoint (answered,
/// refused, rate-limited, a limiter eviction, each decided by the `local` failure mode of a
/// `[shared_state]` whose Redis does not listen), the gateway at both sites (forwarded,
/// rejected, an upstream timeout, an upstream budget spent, a failed handshake), a refused
/// reload, and the LOTL's failed first download.
async fn traffic(running: &Running, held: &common::upstream::HeldUpstream, dir: &Path) {
    use base64::Engine;
    let api = running.api.expect("api");
    let eidas = base64::engine::general_purpose::STANDARD
        .encode(common::load_cert(&test_pki().psp("valid")).der);
    let check = |source: &'static str| {
        let eidas = eidas.clone();
        async move {
            send(
                api,
                Method::GET,
                "/v1/psp/eidas?jurisdiction=XX",
                &[
                    ("authorization", "Basic c2FuZGJveDpzYW5kYm94"),
                    ("fi_reference_id", "PSDXX-TEST-999999"),
                    ("eidas", &eidas),
                    ("x-forwarded-for", source),
                ],
            )
            .await
            .status
        }
    };
    // Three sources in a two-source table; the third then past its quota of 2.
    for source in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
        assert_eq!(check(source).await, StatusCode::OK);
    }
    let mut limited = false;
    for _ in 0..3 {
        limited |= check("192.0.2.3").await == StatusCode::TOO_MANY_REQUESTS;
    }
    assert!(limited, "the third source was never limited");
    let r = send(
        api,
        Method::GET,
        "/v1/psp/eidas",
        &[
            ("authorization", "Basic c2FuZGJveDpzYW5kYm94"),
            ("x-forwarded-for", "192.0.2.4"),
        ],
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "parameter missing");

    // The gateway: forwarded and rejected at xx; a server name no site has.
    assert_eq!(gateway_call(running, "valid", "xx").await, StatusCode::OK);
    assert_eq!(
        gateway_call(running, "untrusted", "xx").await,
        StatusCode::UNAUTHORIZED
    );
    let config = tls_client::client_config(&test_pki().dir, Some("valid"), Proto::H1);
    assert!(
        tls_client::connect_as(
            running.gateway.expect("gateway"),
            config,
            "nosuch.localhost"
        )
        .await
        .is_err()
    );
    // xy: one call held by the upstream (it times out), another refused meanwhile (the
    // upstream budget of 1 is spent).
    let first = gateway_call(running, "passport-out-xy", "xy");
    let second = async {
        until("the first call is held", || {
            held.held.load(std::sync::atomic::Ordering::SeqCst) == 1
        })
        .await;
        gateway_call(running, "passport-out-xy", "xy").await
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!(first, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(second, StatusCode::SERVICE_UNAVAILABLE);

    // A reload of a file that does not parse: refused.
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[checks\n").expect("write");
    assert!(app::reload(&bad, running).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_and_label_the_dashboard_and_the_alerts_name_is_in_a_real_scrape() {
    let dir = scratch("service");
    let held = held_upstream().await;
    let running = service::start(traffic_config(held.addr, &dir)).await;
    traffic(&running, &held, &dir).await;
    // The LOTL's first download fails (nothing listens there) a moment after the start.
    let failed_refresh = "psp_gateway_refreshes_total{what=\"trusted-lists\",outcome=\"failed\"}";
    let mut text = scrape(&running).await;
    for _ in 0..300 {
        if text.contains(failed_refresh) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        text = scrape(&running).await;
    }
    let _ = held.release.send(true);
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);

    let scrape = Scrape::parse(&text);
    let dashboard = dashboard();
    let shown_queries = dashboard_queries(&dashboard);
    let problems: Vec<String> = missing_from(&scrape, &shown_queries)
        .into_iter()
        .chain(missing_from(&scrape, &alert_queries(&yaml(ALERTS))))
        .collect();
    assert!(
        problems.is_empty(),
        "not in the scrape:\n{}\n\nthe scrape:\n{text}",
        problems.join("\n")
    );

    // What the dashboard shows, family by family (issue 25).
    let shown: BTreeSet<String> = shown_queries
        .iter()
        .flat_map(|(_, q)| read_promql(q).selectors)
        .filter_map(|s| scrape.family_of(&s.name).map(|(f, _)| f.to_owned()))
        .collect();
    for family in [
        "psp_gateway_requests_total",
        "psp_gateway_check_duration_seconds",
        "psp_gateway_result_cache_total",
        "psp_gateway_trusted_list_used",
        "psp_gateway_trusted_list_next_update_timestamp_seconds",
        "psp_gateway_register_file_age_seconds",
        "psp_gateway_revocation_fetches_total",
        "psp_gateway_tls_handshakes_total",
        "psp_gateway_upstream_errors_total",
        "psp_gateway_upstream_in_flight",
        "psp_gateway_rate_limited_total",
        "psp_gateway_audit_write_failures_total",
        "psp_gateway_audit_torn_lines_total",
        "psp_gateway_reloads_total",
        "psp_gateway_refreshes_total",
    ] {
        assert!(
            shown.contains(family),
            "the dashboard does not show {family}"
        );
    }

    // The check is not vacuous: in a copy of the dashboard, a misspelt metric, a counter read
    // as a histogram, a misspelt label or value, and a grouping label no metric has are each
    // caught; so is a misspelt metric in a copy of the rules.
    for (from, to, caught) in [
        (
            "psp_gateway_result_cache_total",
            "psp_gateway_result_cache_totals",
            "psp_gateway_result_cache_totals is not in the scrape",
        ),
        (
            "psp_gateway_check_duration_seconds_bucket",
            "psp_gateway_check_duration_second_bucket",
            "psp_gateway_check_duration_second_bucket is not in the scrape",
        ),
        (
            "psp_gateway_rate_limited_total{",
            "psp_gateway_rate_limited_total_count{",
            "psp_gateway_rate_limited_total_count is not in the scrape",
        ),
        (
            "decision=~\"rejected|refused\"",
            "decison=~\"rejected|refused\"",
            "has no label decison",
        ),
        (
            "result=\"hit\"",
            "result=\"hits\"",
            "no sample of psp_gateway_result_cache_total has result=\"hits\"",
        ),
        (
            "sum by (table)",
            "sum by (tables)",
            "grouping by tables, which none of its metrics has",
        ),
    ] {
        let mut copy = dashboard.clone();
        let expr = copy["panels"]
            .as_array_mut()
            .expect("panels")
            .iter_mut()
            .flat_map(|p| p["targets"].as_array_mut().into_iter().flatten())
            .map(|t| &mut t["expr"])
            .find(|e| e.as_str().is_some_and(|e| e.contains(from)))
            .unwrap_or_else(|| panic!("no query has {from}"));
        *expr = json!(expr.as_str().expect("expr").replacen(from, to, 1));
        let problems = missing_from(&scrape, &dashboard_queries(&copy));
        assert!(
            problems.iter().any(|p| p.contains(caught)),
            "{to} was not caught: {problems:?}"
        );
    }
    let misspelt = read(ALERTS).replace(
        "psp_gateway_trusted_list_used",
        "psp_gateway_trusted_lists_used",
    );
    let copy: Value = serde_norway::from_str(&misspelt).expect("YAML");
    let problems = missing_from(&scrape, &alert_queries(&copy));
    assert!(
        problems.iter().any(|p| p
            == "alert PspGatewayTrustedListNotUsed: psp_gateway_trusted_lists_used is not in the scrape"),
        "{problems:?}"
    );
}
