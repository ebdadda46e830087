//! GitHub's REST description as the fake reads it: the vendored part of
//! `@octokit/openapi` (`tests/fixtures/github/openapi-rest.json`), its
//! operations matched by method and path, their parameters, request bodies
//! and responses checked with JSON Schema.
//!
//! The description is OpenAPI 3.0: a schema says `nullable: true` where
//! JSON Schema says `"type": [..., "null"]`, and a `oneOf` with a
//! `discriminator` picks its branch by a property (GitHub's `/user` answers
//! a private or a public user, and a private user is also a valid public
//! one). [`json_schema`] turns the first into the second and such a `oneOf`
//! into an `anyOf`; nothing else is changed.

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::{json, Value};

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum In {
    Path,
    Query,
}

/// A described parameter.
pub(super) struct Param {
    pub name: String,
    pub location: In,
    pub required: bool,
    schema_type: String,
    validator: Validator,
}

/// One segment of a path template.
enum Segment {
    Literal(String),
    /// `{name}`; `multi` (`x-multi-segment`) takes one segment or more.
    Param {
        name: String,
        multi: bool,
    },
}

/// A described operation.
pub(super) struct Operation {
    pub method: String,
    pub template: String,
    pub id: String,
    /// The documentation URL GitHub's errors on this operation name.
    pub docs: String,
    segments: Vec<Segment>,
    pub params: Vec<Param>,
    pub body: Option<Validator>,
    pub body_required: bool,
    responses: HashMap<u16, Option<Validator>>,
}

/// Every operation of the vendored description.
pub(super) struct Description {
    pub operations: Vec<Operation>,
    basic_error: Validator,
    validation_error: Validator,
}

/// The vendored description, its schemas compiled once.
pub(super) fn description() -> &'static Description {
    static DESCRIPTION: OnceLock<Description> = OnceLock::new();
    DESCRIPTION
        .get_or_init(|| Description::new(super::super::fixture_json("github/openapi-rest.json")))
}

/// `schema` (OpenAPI 3.0) as JSON Schema 2020-12, recursively: `nullable:
/// true` admits `null`, a `oneOf` with a `discriminator` is an `anyOf`.
pub(super) fn json_schema(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for value in map.values_mut() {
                json_schema(value);
            }
            if map.contains_key("discriminator") {
                if let Some(branches) = map.remove("oneOf") {
                    map.insert("anyOf".into(), branches);
                }
            }
            if map.remove("nullable") == Some(Value::Bool(true)) {
                match map.get_mut("type") {
                    Some(Value::String(t)) => {
                        let t = t.clone();
                        map.insert("type".into(), json!([t, "null"]));
                        if let Some(Value::Array(values)) = map.get_mut("enum") {
                            values.push(Value::Null);
                        }
                    }
                    _ => {
                        let rest = Value::Object(std::mem::take(map));
                        map.insert("anyOf".into(), json!([{"type": "null"}, rest]));
                    }
                }
            }
        }
        Value::Array(values) => values.iter_mut().for_each(json_schema),
        _ => {}
    }
}

impl Description {
    fn new(mut document: Value) -> Description {
        json_schema(&mut document);
        let components = document["components"].clone();
        let compile = |schema: &Value| -> Validator {
            let mut root = schema.clone();
            let Value::Object(map) = &mut root else {
                panic!("a schema is an object: {schema}")
            };
            map.insert(
                "$schema".into(),
                json!("https://json-schema.org/draft/2020-12/schema"),
            );
            map.insert("components".into(), components.clone());
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&root)
                .unwrap_or_else(|e| panic!("GitHub's description compiles: {e}"))
        };
        let resolve = |value: &Value| -> Value {
            match value.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let pointer = r.trim_start_matches('#');
                    document
                        .pointer(pointer)
                        .cloned()
                        .unwrap_or_else(|| panic!("{r}"))
                }
                None => value.clone(),
            }
        };
        let mut operations = Vec::new();
        for (template, entry) in document["paths"].as_object().unwrap() {
            for (method, op) in entry.as_object().unwrap() {
                let params: Vec<Value> = op["parameters"]
                    .as_array()
                    .map(|ps| ps.iter().map(&resolve).collect())
                    .unwrap_or_default();
                let multi = |name: &str| {
                    params
                        .iter()
                        .any(|p| p["name"] == name && p["x-multi-segment"].as_bool() == Some(true))
                };
                let segments = template
                    .trim_start_matches('/')
                    .split('/')
                    .map(
                        |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                            Some(name) => Segment::Param {
                                name: name.to_owned(),
                                multi: multi(name),
                            },
                            None => Segment::Literal(s.to_owned()),
                        },
                    )
                    .collect();
                let params = params
                    .iter()
                    .filter_map(|p| {
                        let location = match p["in"].as_str() {
                            Some("path") => In::Path,
                            Some("query") => In::Query,
                            _ => return None,
                        };
                        Some(Param {
                            name: p["name"].as_str().unwrap().to_owned(),
                            location,
                            required: p["required"].as_bool().unwrap_or(false),
                            schema_type: p["schema"]["type"]
                                .as_str()
                                .unwrap_or("string")
                                .to_owned(),
                            validator: compile(&p["schema"]),
                        })
                    })
                    .collect();
                let body = op
                    .get("requestBody")
                    .map(|b| compile(&b["content"]["application/json"]["schema"]));
                let body_required = op["requestBody"]["required"].as_bool() == Some(true);
                let responses = op["responses"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(code, response)| {
                        let response = resolve(response);
                        let schema = response["content"]["application/json"].get("schema");
                        (code.parse().unwrap(), schema.map(compile))
                    })
                    .collect();
                operations.push(Operation {
                    method: method.to_ascii_uppercase(),
                    template: template.clone(),
                    id: op["operationId"].as_str().unwrap().to_owned(),
                    docs: op["externalDocs"]["url"]
                        .as_str()
                        .unwrap_or("https://docs.github.com/rest")
                        .to_owned(),
                    segments,
                    params,
                    body,
                    body_required,
                    responses,
                });
            }
        }
        let basic_error = compile(&json!({"$ref": "#/components/schemas/basic-error"}));
        let validation_error = compile(&json!({"$ref": "#/components/schemas/validation-error"}));
        Description {
            operations,
            basic_error,
            validation_error,
        }
    }

    /// The operations whose path template matches `path` (decoded
    /// segments), each with its path parameters; the caller picks by
    /// method.
    pub fn routes<'d>(&'d self, path: &str) -> Vec<(&'d Operation, HashMap<String, String>)> {
        let segments: Vec<String> = path
            .trim_start_matches('/')
            .split('/')
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        self.operations
            .iter()
            .filter_map(|op| {
                let mut found = HashMap::new();
                matches(&op.segments, &segments, &mut found).then_some((op, found))
            })
            .collect()
    }

    /// What is wrong with `body` as the fake's answer `status` to `op` by
    /// GitHub's description: the operation's own schema for that status,
    /// else GitHub's error shapes for an error status.
    pub fn response_errors(
        &self,
        op: Option<&Operation>,
        status: u16,
        body: &Value,
    ) -> Vec<String> {
        let described = op.and_then(|op| op.responses.get(&status));
        let validator = match described {
            Some(Some(validator)) => validator,
            Some(None) => return Vec::new(),
            None if status == 422 => &self.validation_error,
            None if status >= 400 => &self.basic_error,
            None => {
                return vec![format!(
                    "{} {} answers no {status} in GitHub's description",
                    op.map_or("", |op| &op.method),
                    op.map_or("", |op| &op.template)
                )]
            }
        };
        errors(validator, body)
    }
}

/// Whether `template` matches `path`, filling in its parameters; a
/// multi-segment parameter takes as few segments as leave the rest
/// matching.
fn matches(template: &[Segment], path: &[String], found: &mut HashMap<String, String>) -> bool {
    match (template.first(), path.first()) {
        (None, None) => true,
        (None, Some(_)) | (Some(_), None) => false,
        (Some(Segment::Literal(literal)), Some(segment)) => {
            literal == segment && matches(&template[1..], &path[1..], found)
        }
        (Some(Segment::Param { name, multi }), Some(_)) => {
            let most = if *multi { path.len() } else { 1 };
            for take in 1..=most {
                if path[..take].iter().any(String::is_empty) {
                    return false;
                }
                found.insert(name.clone(), path[..take].join("/"));
                if matches(&template[1..], &path[take..], found) {
                    return true;
                }
            }
            found.remove(name);
            false
        }
    }
}

/// `validator`'s errors on `value`, each with where it is.
pub(super) fn errors(validator: &Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

impl Operation {
    /// The body schema's errors on `body` (none when the operation takes
    /// no body).
    pub fn body_errors(&self, body: &Value) -> Vec<String> {
        self.body
            .as_ref()
            .map(|v| errors(v, body))
            .unwrap_or_default()
    }

    /// A parameter's raw text as the JSON value its schema checks: a number
    /// for an integer that parses as one, else the text itself (which an
    /// integer schema then refuses).
    pub fn param_errors(&self, param: &Param, raw: &str) -> Vec<String> {
        let value = match param.schema_type.as_str() {
            "integer" => raw.parse::<i64>().map_or_else(|_| json!(raw), |n| json!(n)),
            "boolean" => match raw {
                "true" => json!(true),
                "false" => json!(false),
                _ => json!(raw),
            },
            _ => json!(raw),
        };
        errors(&param.validator, &value)
    }
}
