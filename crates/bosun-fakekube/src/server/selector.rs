//! Label and field selectors, the subset kube-rs and bosun produce.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn parse_set(s: &str) -> Result<Vec<String>, String> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, got {s:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn check_key(key: &str) -> Result<String, String> {
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(key.to_string())
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let req = if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEq(check_key(k)?, v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==") {
                Requirement::Eq(check_key(k)?, v.trim().to_string())
            } else if let Some((k, v)) = term.split_once('=') {
                Requirement::Eq(check_key(k)?, v.trim().to_string())
            } else if let Some((k, set)) = term.split_once(" notin ") {
                Requirement::NotIn(check_key(k)?, parse_set(set)?)
            } else if let Some((k, set)) = term.split_once(" in ") {
                Requirement::In(check_key(k)?, parse_set(set)?)
            } else if let Some(k) = term.strip_prefix('!') {
                Requirement::NotExists(check_key(k)?)
            } else {
                Requirement::Exists(check_key(term)?)
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => get(k) == Some(v),
            Requirement::NotEq(k, v) => get(k) != Some(v),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::In(k, set) => get(k).is_some_and(|v| set.contains(v)),
            Requirement::NotIn(k, set) => get(k).is_none_or(|v| !set.contains(v)),
        })
    }
}

/// A parsed field selector over the few pod fields the fake knows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

const FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "status.phase",
    "spec.nodeName",
];

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in split_terms(s) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!("invalid field selector term {term:?}"));
            };
            let field = field.trim();
            if !FIELDS.contains(&field) {
                return Err(format!(
                    "field label not supported: {field} (the fake knows {FIELDS:?})"
                ));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, pod: &Pod) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = match field.as_str() {
                "metadata.name" => pod.metadata.name.as_deref(),
                "metadata.namespace" => pod.metadata.namespace.as_deref(),
                "status.phase" => pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                "spec.nodeName" => pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
                _ => None,
            }
            .unwrap_or("");
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_terms() {
        let l = labels(&[("app", "bosun"), ("job", "a")]);
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m(""));
        assert!(m("app=bosun"));
        assert!(m("app==bosun,job"));
        assert!(!m("app=other"));
        assert!(m("app!=other"));
        assert!(!m("missing"));
        assert!(m("!missing"));
        assert!(!m("!job"));
        assert!(m("job in (a, b)"));
        assert!(!m("job notin (a,b)"));
        assert!(m("missing notin (a)"));
        assert!(!LabelSelector::parse("app=bosun").unwrap().matches(None));
    }

    #[test]
    fn field_selector_rejects_unknown_fields() {
        assert!(FieldSelector::parse("metadata.name=x").is_ok());
        assert!(FieldSelector::parse("spec.bogus=x").is_err());
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
