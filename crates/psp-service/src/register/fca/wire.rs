//! The FCA Financial Services Register API's wire format: the envelope every endpoint answers
//! with, its `Status` codes, and the `Data` of the three endpoints read here.
//!
//! ```text
//! {"Status":"FSR-API-xx-yy-zz",
//!  "ResultInfo":{"page":"1","per_page":"20","total_count":"38","Next":"…"} | null,
//!  "Message":"…",
//!  "Data": …}
//! ```
//!
//! The HTTP status is 200 for "not found" too, so the outcome is read from `Status`
//! (`shared/data/REGISTER-FORMATS.md` section 3). Pure functions of bytes: no I/O.

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

/// An endpoint this adapter calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `GET /Firm/{FRN}`.
    Firm,
    /// `GET /Firm/{FRN}/Permissions?pgnp={n}`.
    Permissions,
    /// `GET /Firm/{FRN}/Passports?pgnp={n}`.
    Passports,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Firm => "Firm",
            Endpoint::Permissions => "Permissions",
            Endpoint::Passports => "Passports",
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a `Status` code means for the endpoint that answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusClass {
    /// `-00`: the data is there.
    Ok,
    /// The register has no firm with this FRN: a definite answer.
    FirmNotFound,
    /// A sub-resource with no record (no permissions, no passports): empty, not an error.
    NoRecords,
    /// The API e-mail and key were refused: a configuration error.
    Unauthorised,
    /// The FCA reports a failure on its side (`FSR-API-99-…`).
    UpstreamFailure,
    /// Documented, but not an answer for a firm whose record was just read (invalid input,
    /// page not found, garbage in the URL): the lookup fails.
    Refused,
}

/// Every `Status` code this adapter acts on: (endpoint, or `None` for any endpoint; code;
/// meaning). Codes and descriptions are the FCA developer portal's (mirrored in
/// release-art/fca-api's `status_codes.py`); the recorded responses show `02-01-00`,
/// `02-03-00`, `02-07-00` and `02-07-11`. Any code not listed is an error
/// ([`StatusClass`] has no "unknown": see [`classify`]).
const STATUS_CODES: &[(Option<Endpoint>, &str, StatusClass)] = &[
    // "Unauthorised", "API and Email key not found".
    (None, "FSR-API-01-01-11", StatusClass::Unauthorised),
    (None, "FSR-API-01-01-21", StatusClass::Unauthorised),
    // "System Error", "Exception - Any random error - Catch All".
    (None, "FSR-API-99-01-01", StatusClass::UpstreamFailure),
    (None, "FSR-API-99-99-99", StatusClass::UpstreamFailure),
    (Some(Endpoint::Firm), "FSR-API-02-01-00", StatusClass::Ok),
    // "Firm not found - When SOQL returns no record".
    (
        Some(Endpoint::Firm),
        "FSR-API-02-01-11",
        StatusClass::FirmNotFound,
    ),
    // "Bad request. Invalid Input - If we cannot confirm if the FRN is correct". The FRN was
    // checked to be 1–10 digits before the request, so this means no firm has it.
    (
        Some(Endpoint::Firm),
        "FSR-API-02-01-21",
        StatusClass::FirmNotFound,
    ),
    (
        Some(Endpoint::Permissions),
        "FSR-API-02-03-00",
        StatusClass::Ok,
    ),
    // "Permission not found - When SOQL returns no record".
    (
        Some(Endpoint::Permissions),
        "FSR-API-02-03-11",
        StatusClass::NoRecords,
    ),
    (
        Some(Endpoint::Permissions),
        "FSR-API-02-03-21",
        StatusClass::Refused,
    ),
    // "Invalid parameter - Garbage value in the URL".
    (
        Some(Endpoint::Permissions),
        "FSR-API-02-03-31",
        StatusClass::Refused,
    ),
    (
        Some(Endpoint::Passports),
        "FSR-API-02-07-00",
        StatusClass::Ok,
    ),
    // "Passport not found" with `Data: null` (recorded for 552016).
    (
        Some(Endpoint::Passports),
        "FSR-API-02-07-11",
        StatusClass::NoRecords,
    ),
    (
        Some(Endpoint::Passports),
        "FSR-API-02-07-21",
        StatusClass::Refused,
    ),
    // "Page Not Found".
    (
        Some(Endpoint::Passports),
        "FSR-API-02-07-22",
        StatusClass::Refused,
    ),
];

/// The meaning of `status` from `endpoint`, or `None` when the table does not list it (a code
/// of another endpoint, a new code): the caller fails the lookup.
pub(crate) fn classify(endpoint: Endpoint, status: &str) -> Option<StatusClass> {
    STATUS_CODES
        .iter()
        .find(|(e, code, _)| e.is_none_or(|e| e == endpoint) && *code == status)
        .map(|(_, _, class)| *class)
}

/// `FSR-API-` and three two-digit groups: the form every documented code has.
pub(crate) fn is_status_code(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("FSR-API-") else {
        return false;
    };
    let b = rest.as_bytes();
    b.len() == 8
        && b[2] == b'-'
        && b[5] == b'-'
        && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit())
}

/// Text from the network made safe for an error message or a log line: at most `max`
/// characters, control characters replaced.
pub(crate) fn clean(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireError {
    /// Not JSON at all.
    Malformed(String),
    /// JSON, but not the shape documented for the endpoint.
    Shape(String),
}

/// A number the API writes as a string (`"20"`) and might write as a number.
#[derive(Deserialize)]
#[serde(untagged)]
enum Num {
    Text(String),
    Number(u64),
}

impl Num {
    fn value(&self) -> Option<u64> {
        match self {
            Num::Text(s) => s.trim().parse().ok(),
            Num::Number(n) => Some(*n),
        }
    }
}

#[derive(Deserialize)]
struct RawResultInfo {
    #[serde(default)]
    page: Option<Num>,
    #[serde(default)]
    per_page: Option<Num>,
    #[serde(default)]
    total_count: Option<Num>,
    #[serde(rename = "Next", default)]
    next: Option<Value>,
}

#[derive(Deserialize)]
struct RawEnvelope {
    #[serde(rename = "Status")]
    status: String,
    #[serde(rename = "ResultInfo", default)]
    result_info: Option<RawResultInfo>,
    #[serde(rename = "Message", default)]
    message: Option<String>,
    #[serde(rename = "Data", default)]
    data: Value,
}

/// Pagination of one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageInfo {
    pub page: u64,
    pub per_page: u64,
    pub total_count: u64,
    /// `ResultInfo.Next` is present (its URL is never followed: the next page's URL is built
    /// from the configured base, so an answer cannot send the client elsewhere).
    pub has_next: bool,
}

impl PageInfo {
    /// Pages needed for `total_count` records.
    pub(super) fn total_pages(&self) -> u64 {
        self.total_count.div_ceil(self.per_page)
    }
}

/// One answer of the API.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub status: String,
    /// Cleaned for messages ([`clean`]).
    pub message: String,
    pub page: Option<PageInfo>,
    pub data: Value,
}

/// Reads the envelope. The `Status` must have the documented form.
pub(crate) fn parse_envelope(body: &[u8]) -> Result<Envelope, WireError> {
    let raw: RawEnvelope = serde_json::from_slice(body).map_err(|e| {
        if e.is_data() {
            WireError::Shape(format!("not the register's envelope: {e}"))
        } else {
            WireError::Malformed(e.to_string())
        }
    })?;
    if !is_status_code(&raw.status) {
        return Err(WireError::Shape(format!(
            "`Status` {:?} is not of the form FSR-API-xx-yy-zz",
            clean(&raw.status, 40)
        )));
    }
    let page = match raw.result_info {
        None => None,
        Some(info) => {
            let field = |n: &Option<Num>| n.as_ref().and_then(Num::value);
            match (
                field(&info.page),
                field(&info.per_page),
                field(&info.total_count),
            ) {
                (Some(page), Some(per_page), Some(total_count)) if per_page > 0 => Some(PageInfo {
                    page,
                    per_page,
                    total_count,
                    has_next: info.next.as_ref().is_some_and(|v| !v.is_null()),
                }),
                _ => {
                    return Err(WireError::Shape(
                        "`ResultInfo` lacks a numeric page, per_page (> 0) or total_count".into(),
                    ));
                }
            }
        }
    };
    Ok(Envelope {
        status: raw.status,
        message: clean(raw.message.as_deref().unwrap_or(""), 200),
        page,
        data: raw.data,
    })
}

/// The fields of a firm record that the mapping reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FirmRecord {
    pub frn: String,
    pub name: String,
    pub status: String,
    pub psd_emd_status: String,
}

/// `Data` of `/Firm/{FRN}`: a list of exactly one record.
pub(crate) fn firm_record(data: &Value) -> Result<FirmRecord, WireError> {
    let list = data
        .as_array()
        .ok_or_else(|| WireError::Shape("firm `Data` is not a list".into()))?;
    let [record] = list.as_slice() else {
        return Err(WireError::Shape(format!(
            "firm `Data` has {} records, expected 1",
            list.len()
        )));
    };
    let record = record
        .as_object()
        .ok_or_else(|| WireError::Shape("the firm record is not an object".into()))?;
    let frn = text(record, "FRN")?;
    let name = text(record, "Organisation Name")?;
    if name.trim().is_empty() {
        return Err(WireError::Shape("`Organisation Name` is empty".into()));
    }
    Ok(FirmRecord {
        frn,
        name: name.trim().to_owned(),
        status: text(record, "Status")?,
        psd_emd_status: text(record, "PSD / EMD Status")?,
    })
}

/// A string field (the API writes empty values as `""`). A number is accepted for `FRN`-like
/// fields; anything else is a shape error.
fn text(record: &Map<String, Value>, key: &str) -> Result<String, WireError> {
    match record.get(key) {
        Some(Value::String(s)) => Ok(clean(s, 300)),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(WireError::Shape(format!("`{key}` is not a string"))),
        None => Err(WireError::Shape(format!("the firm record has no `{key}`"))),
    }
}

/// `Data` of one permissions page: an object keyed by activity name (the values, customer
/// types, investment types and limitations, are not read).
pub(crate) fn permission_names(data: &Value) -> Result<Vec<String>, WireError> {
    let object = data
        .as_object()
        .ok_or_else(|| WireError::Shape("permissions `Data` is not an object".into()))?;
    Ok(object.keys().map(|k| clean(k, 300)).collect())
}

/// One passport as published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PassportRecord {
    pub country: String,
    pub direction: String,
}

/// `Data` of one passports page: `[{"Passports":[{"Country","PassportDirection",…}]}]`.
pub(crate) fn passport_records(data: &Value) -> Result<Vec<PassportRecord>, WireError> {
    let shape = |what: &str| WireError::Shape(format!("passports `Data`: {what}"));
    let groups = data.as_array().ok_or_else(|| shape("not a list"))?;
    let mut out = Vec::new();
    for group in groups {
        let list = group
            .get("Passports")
            .and_then(Value::as_array)
            .ok_or_else(|| shape("an element has no `Passports` list"))?;
        for p in list {
            let country = p
                .get("Country")
                .and_then(Value::as_str)
                .ok_or_else(|| shape("a passport has no `Country` string"))?;
            let direction = p
                .get("PassportDirection")
                .and_then(Value::as_str)
                .ok_or_else(|| shape("a passport has no `PassportDirection` string"))?;
            out.push(PassportRecord {
                country: clean(country, 100),
                direction: clean(direction, 100),
            });
        }
    }
    Ok(out)
}
