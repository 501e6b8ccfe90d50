//! `docs/openapi.yaml` as the tests read it: the document loaded and its local `$ref`s
//! resolved, the operations, responses and error codes it declares, and the check of a reply
//! (status, headers, body) and of a 200's request against it, with a JSON Schema 2020-12
//! validator (the OpenAPI 3.1 dialect). Used by `tests/api_openapi.rs`.

use std::collections::BTreeSet;

use http::{HeaderMap, StatusCode};
use psp_faces::api::PATH;
use serde_json::{Map, Value, json};

use super::root;
use super::service::Reply;

/// The document, relative to the crate root.
pub const DOC: &str = "docs/openapi.yaml";

/// `docs/openapi.yaml`, parsed.
pub struct OpenApi {
    pub root: Value,
}

impl OpenApi {
    pub fn load() -> OpenApi {
        let text = std::fs::read_to_string(root().join(DOC)).expect("docs/openapi.yaml");
        let root: Value = serde_norway::from_str(&text).expect("docs/openapi.yaml is YAML");
        let version = root["openapi"].as_str().expect("an `openapi` version");
        assert!(version.starts_with("3.1."), "OpenAPI 3.1, not {version}");
        OpenApi { root }
    }

    /// `node` with every `$ref` replaced by a copy of its target. Only local
    /// `#/components/...` references are allowed. A `$ref` with sibling keywords (allowed in
    /// OpenAPI 3.1) becomes `allOf: [target]` beside the siblings.
    pub fn resolve(&self, node: &Value) -> Value {
        self.resolve_at(node, 0)
    }

    fn resolve_at(&self, node: &Value, depth: usize) -> Value {
        assert!(depth < 32, "$ref nesting deeper than 32: a cycle?");
        match node {
            Value::Object(map) => {
                let siblings: Map<String, Value> = map
                    .iter()
                    .filter(|(k, _)| k.as_str() != "$ref")
                    .map(|(k, v)| (k.clone(), self.resolve_at(v, depth)))
                    .collect();
                let Some(reference) = map.get("$ref") else {
                    return Value::Object(siblings);
                };
                let reference = reference.as_str().expect("$ref is a string");
                let pointer = reference
                    .strip_prefix('#')
                    .filter(|p| p.starts_with("/components/"))
                    .unwrap_or_else(|| panic!("only local #/components/ refs: {reference}"));
                let target = self
                    .root
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("dangling $ref {reference}"));
                let target = self.resolve_at(target, depth + 1);
                if siblings.is_empty() {
                    target
                } else {
                    let mut merged = siblings;
                    merged.insert("allOf".to_owned(), json!([target]));
                    Value::Object(merged)
                }
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.resolve_at(v, depth)).collect())
            }
            other => other.clone(),
        }
    }

    /// The documented path keys.
    pub fn paths(&self) -> Vec<String> {
        self.root["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .cloned()
            .collect()
    }

    /// The GET operation of a documented path, references resolved.
    pub fn operation(&self, path: &str) -> Value {
        let op = self.root["paths"][path]
            .get("get")
            .unwrap_or_else(|| panic!("{DOC}: no GET operation on {path}"));
        self.resolve(op)
    }

    /// The documented path that describes a request to `request_path`: the spelling itself
    /// when the document lists it, else `/v1/psp/eidas` (whose 404 documents `not_found` for
    /// every other path, and whose 405 documents every other method).
    pub fn documented_path(&self, request_path: &str) -> String {
        let paths = self.paths();
        paths
            .iter()
            .find(|p| p.as_str() == request_path)
            .or_else(|| paths.iter().find(|p| p.as_str() == PATH))
            .expect("the document lists /v1/psp/eidas")
            .clone()
    }

    /// The response the operation declares for `status`; panics when it declares none.
    pub fn response(&self, path: &str, status: StatusCode, what: &str) -> Value {
        let op = self.operation(path);
        op["responses"]
            .get(status.as_str())
            .unwrap_or_else(|| {
                panic!(
                    "{what}: status {status} is not declared for GET {path} in {DOC} \
                     (declared: {:?})",
                    op["responses"]
                        .as_object()
                        .map(|m| m.keys().collect::<Vec<_>>())
                )
            })
            .clone()
    }

    /// Every `enum` of a property named `code`, anywhere in the document.
    pub fn all_code_enums(&self) -> BTreeSet<String> {
        fn walk(v: &Value, out: &mut BTreeSet<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(values) = map
                        .get("code")
                        .and_then(|c| c.get("enum"))
                        .and_then(Value::as_array)
                    {
                        out.extend(values.iter().map(|c| c.as_str().expect("code").to_owned()));
                    }
                    map.values().for_each(|v| walk(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut out = BTreeSet::new();
        walk(&self.root, &mut out);
        out
    }

    /// (status, code) of every error response the operation on `path` declares.
    pub fn endpoint_codes(&self, path: &str) -> BTreeSet<(u16, String)> {
        let op = self.operation(path);
        let mut out = BTreeSet::new();
        for (status, response) in op["responses"].as_object().expect("responses") {
            let Some(schema) = response.pointer("/content/application~1json/schema") else {
                continue;
            };
            let Some(codes) = schema.pointer("/properties/errors/items/properties/code/enum")
            else {
                continue;
            };
            for code in codes.as_array().expect("enum") {
                out.insert((
                    status.parse().expect("status"),
                    code.as_str().expect("code").to_owned(),
                ));
            }
        }
        out
    }

    /// The codes of `eIDAS.errors` entries.
    pub fn certificate_check_codes(&self) -> BTreeSet<String> {
        self.root
            .pointer("/components/schemas/CertificateCheckError/properties/code/enum")
            .and_then(Value::as_array)
            .expect("CertificateCheckError.code enum")
            .iter()
            .map(|c| c.as_str().expect("code").to_owned())
            .collect()
    }

    /// Checks a reply against the response declared for its status on the operation that
    /// describes `request_path`: declared headers present and valid, content type declared,
    /// body valid against the schema (or empty when no content is declared). Returns the
    /// body (null when there is none).
    pub fn conform(&self, request_path: &str, what: &str, reply: &Reply) -> Value {
        let path = self.documented_path(request_path);
        let response = self.response(&path, reply.status, what);
        self.conform_headers(&response, what, reply.status, &reply.headers);
        let Some(content) = response.get("content") else {
            assert!(
                reply.body.is_empty(),
                "{what}: {DOC} declares no content for {}, got {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            );
            return Value::Null;
        };
        let content_type = reply
            .headers
            .get(http::header::CONTENT_TYPE)
            .unwrap_or_else(|| panic!("{what}: no content-type"))
            .to_str()
            .expect("ascii content-type");
        let schema = content
            .get(content_type)
            .unwrap_or_else(|| {
                panic!(
                    "{what}: content type {content_type} is not declared for {}",
                    reply.status
                )
            })
            .get("schema")
            .expect("a schema");
        let body = reply.json();
        let errors = violations(schema, &body);
        assert!(
            errors.is_empty(),
            "{what}: the {} body does not conform to {DOC}:\n{}\n{body:#}",
            reply.status,
            errors.join("\n")
        );
        body
    }

    pub fn conform_headers(
        &self,
        response: &Value,
        what: &str,
        status: StatusCode,
        got: &HeaderMap,
    ) {
        let Some(headers) = response.get("headers").and_then(Value::as_object) else {
            return;
        };
        for (name, header) in headers {
            let value = got.get(name.to_ascii_lowercase().as_str());
            let Some(value) = value else {
                assert!(
                    header["required"] != true,
                    "{what}: {status} lacks the required header {name}"
                );
                continue;
            };
            let value = value.to_str().expect("ascii header");
            let schema = &header["schema"];
            let instance = if schema["type"] == "integer" {
                json!(value.parse::<i64>().unwrap_or_else(|_| panic!(
                    "{what}: header {name} `{value}` is not an integer"
                )))
            } else {
                json!(value)
            };
            let errors = violations(schema, &instance);
            assert!(
                errors.is_empty(),
                "{what}: header {name} `{value}` does not conform: {errors:?}"
            );
        }
    }

    /// The request side of a 200: every required parameter present and every parameter sent
    /// valid against its schema, so the document accepts what the service accepts.
    pub fn conform_request(&self, request_path: &str, query: &str, headers: &[(&str, &str)]) {
        let path = self.documented_path(request_path);
        let op = self.operation(&path);
        for param in op["parameters"].as_array().into_iter().flatten() {
            let name = param["name"].as_str().expect("name");
            let value: Option<String> = match param["in"].as_str() {
                Some("query") => query.split('&').find_map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (k == name).then(|| {
                        percent_encoding::percent_decode_str(v)
                            .decode_utf8_lossy()
                            .into_owned()
                    })
                }),
                Some("header") => headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| (*v).to_owned()),
                other => panic!("parameter {name} in {other:?}"),
            };
            match value {
                None => assert!(
                    param["required"] != true,
                    "a 200 was served without the required parameter {name}"
                ),
                Some(v) => {
                    let errors = violations(&param["schema"], &json!(v));
                    assert!(
                        errors.is_empty(),
                        "{DOC} rejects `{name}: {v}` that the service accepted: {errors:?}"
                    );
                }
            }
        }
    }
}

/// A JSON Schema 2020-12 validator (the OpenAPI 3.1 dialect) with format assertions on.
pub fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("a schema of {DOC} does not compile: {e}\n{schema:#}"))
}

/// Every violation of `schema` by `instance`, with its location.
pub fn violations(schema: &Value, instance: &Value) -> Vec<String> {
    let v = validator(schema);
    v.iter_errors(instance)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect()
}
