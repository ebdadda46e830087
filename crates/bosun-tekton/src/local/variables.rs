//! Tekton's variables: `$(params.X)`, `$(tasks.T.results.R)` and the rest,
//! parsed and substituted as Tekton substitutes them (see [`super`]).
//!
//! Its items are the local runner's working parts (`bosun_injob::pipeline`
//! runs the plan), public for it and documented where they are not plain.

#![allow(missing_docs)]

use std::collections::HashMap;

use serde_json::Value;

use crate::model::ParamValue;

// ---------------------------------------------------------------------------
// Variables

/// What follows a variable's name: `[*]`, `[N]`, `.KEY`.
#[derive(Debug, Clone, PartialEq)]
pub enum Suffix {
    None,
    Star,
    Index(usize),
    Key(String),
}

/// A Tekton variable (the text between `$(` and `)`).
#[derive(Debug, Clone, PartialEq)]
pub enum Var {
    Param(String, Suffix),
    TaskResult(String, String, Suffix),
    TaskStatus(String),
    TaskReason(String),
    TasksStatus,
    Result(String),
    Workspace(String, String),
    Context(String),
    StepExitCode(String),
}

/// Reads `name` followed by an optional suffix from `s`: `.NAME`, or
/// `['NAME']` / `["NAME"]`; the name and what follows.
pub fn name_part(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('.') {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        (end > 0).then(|| (&rest[..end], &rest[end..]))
    } else {
        for q in ['\'', '"'] {
            let open = format!("[{q}");
            if let Some(rest) = s.strip_prefix(open.as_str()) {
                let close = format!("{q}]");
                let end = rest.find(close.as_str())?;
                return (end > 0).then(|| (&rest[..end], &rest[end + 2..]));
            }
        }
        None
    }
}

pub fn suffix(s: &str) -> Option<Suffix> {
    if s.is_empty() {
        return Some(Suffix::None);
    }
    if s == "[*]" {
        return Some(Suffix::Star);
    }
    if let Some(n) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return n.parse().ok().map(Suffix::Index);
    }
    let (key, rest) = name_part(s)?;
    rest.is_empty().then(|| Suffix::Key(key.to_string()))
}

/// The variable `content` names, or `None` when it is not a Tekton variable
/// (the text is then left as it is).
pub fn parse_var(content: &str) -> Option<Var> {
    if let Some(rest) = content.strip_prefix("params") {
        let (name, rest) = name_part(rest)?;
        return Some(Var::Param(name.into(), suffix(rest)?));
    }
    if let Some(rest) = content.strip_prefix("tasks") {
        if rest == ".status" {
            return Some(Var::TasksStatus);
        }
        let (task, rest) = name_part(rest)?;
        return match rest {
            ".status" => Some(Var::TaskStatus(task.into())),
            ".reason" => Some(Var::TaskReason(task.into())),
            _ => {
                let rest = rest.strip_prefix(".results")?;
                let (result, rest) = name_part(rest)?;
                Some(Var::TaskResult(task.into(), result.into(), suffix(rest)?))
            }
        };
    }
    if let Some(rest) = content.strip_prefix("results") {
        let (name, rest) = name_part(rest)?;
        return (rest == ".path").then(|| Var::Result(name.into()));
    }
    if let Some(rest) = content.strip_prefix("workspaces") {
        let (name, rest) = name_part(rest)?;
        let (attr, rest) = name_part(rest)?;
        return rest
            .is_empty()
            .then(|| Var::Workspace(name.into(), attr.into()));
    }
    if let Some(rest) = content.strip_prefix("context.") {
        return (!rest.is_empty()).then(|| Var::Context(rest.into()));
    }
    if let Some(rest) = content.strip_prefix("steps") {
        let (step, rest) = name_part(rest)?;
        return (rest == ".exitCode.path").then(|| Var::StepExitCode(step.into()));
    }
    None
}

/// The pieces of `s`: text, and variables with their source text.
pub enum Piece<'a> {
    Text(&'a str),
    Var(Var, &'a str),
}

pub fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while let Some(off) = s[i..].find("$(") {
        let start = i + off;
        let body = start + 2;
        let found = s[body..].find(')').and_then(|len| {
            let content = &s[body..body + len];
            if content.contains(|c: char| c.is_whitespace() || c == '$' || c == '(') {
                return None;
            }
            parse_var(content).map(|v| (v, body + len + 1))
        });
        match found {
            Some((var, end)) => {
                if text_start < start {
                    out.push(Piece::Text(&s[text_start..start]));
                }
                out.push(Piece::Var(var, &s[start..end]));
                text_start = end;
                i = end;
            }
            None => i = body,
        }
    }
    if text_start < s.len() {
        out.push(Piece::Text(&s[text_start..]));
    }
    out
}

/// Every variable in `s`.
pub fn vars_in(s: &str) -> Vec<Var> {
    pieces(s)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Var(v, _) => Some(v),
            Piece::Text(_) => None,
        })
        .collect()
}

/// Every string in a JSON value.
pub fn json_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| json_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| json_strings(i, out)),
        _ => {}
    }
}

/// What a variable resolves to.
pub trait Resolve {
    fn resolve(&self, var: &Var) -> Result<ParamValue, String>;

    /// Whether values are placeholders (a check before the run): an index
    /// or a key they lack is then no error.
    fn placeholders(&self) -> bool;
}

/// A variable's value with its suffix applied.
pub fn value_of(r: &dyn Resolve, var: &Var, text: &str) -> Result<ParamValue, String> {
    let base = r.resolve(var).map_err(|e| format!("{text}: {e}"))?;
    let sfx = match var {
        Var::Param(_, s) | Var::TaskResult(_, _, s) => s.clone(),
        _ => Suffix::None,
    };
    match (sfx, base) {
        (Suffix::None, v) => Ok(v),
        (Suffix::Star, v @ (ParamValue::Array(_) | ParamValue::Object(_))) => Ok(v),
        (Suffix::Index(_), ParamValue::Array(_)) | (Suffix::Key(_), ParamValue::Object(_))
            if r.placeholders() =>
        {
            Ok(ParamValue::String(String::new()))
        }
        (Suffix::Index(i), ParamValue::Array(a)) => {
            a.get(i).cloned().map(ParamValue::String).ok_or_else(|| {
                format!(
                    "{text}: index {i} is out of range (the array has {})",
                    a.len()
                )
            })
        }
        (Suffix::Key(k), ParamValue::Object(o)) => o
            .get(&k)
            .cloned()
            .map(ParamValue::String)
            .ok_or_else(|| format!("{text}: the object has no key {k}")),
        (_, v) => Err(format!(
            "{text}: a {} value does not take this subscript",
            v.param_type()
        )),
    }
}

/// `s` with its variables substituted; each must be a string.
pub fn subst_str(r: &dyn Resolve, s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    for piece in pieces(s) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(var, text) => match value_of(r, &var, text)? {
                ParamValue::String(v) => out.push_str(&v),
                v => {
                    return Err(format!(
                        "{text} is an {} and cannot be used within a string",
                        v.param_type()
                    ))
                }
            },
        }
    }
    Ok(out)
}

/// A list of strings with its variables substituted: an item that is one
/// array variable (`$(params.a[*])`) becomes its items.
pub fn subst_list(r: &dyn Resolve, items: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if let [Piece::Var(var, text)] = pieces(item).as_slice() {
            if let ParamValue::Array(a) = value_of(r, var, text)? {
                out.extend(a);
                continue;
            }
        }
        out.push(subst_str(r, item)?);
    }
    Ok(out)
}

/// A parameter's value with its variables substituted: a string that is one
/// array or object variable becomes that value.
pub fn subst_value(r: &dyn Resolve, v: &ParamValue) -> Result<ParamValue, String> {
    match v {
        ParamValue::String(s) => {
            if let [Piece::Var(var, text)] = pieces(s).as_slice() {
                return value_of(r, var, text);
            }
            subst_str(r, s).map(ParamValue::String)
        }
        ParamValue::Array(a) => subst_list(r, a).map(ParamValue::Array),
        ParamValue::Object(o) => o
            .iter()
            .map(|(k, v)| subst_str(r, v).map(|v| (k.clone(), v)))
            .collect::<Result<_, _>>()
            .map(ParamValue::Object),
    }
}

/// Kubernetes' expansion of `$(VAR)` in a container's command, args and env
/// values: a variable of `env` becomes its value, `$$` becomes `$`, anything
/// else stays.
pub fn k8s_expand(s: &str, env: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some((_, '$')) => {
                chars.next();
                out.push('$');
            }
            Some((_, '(')) => {
                let rest = &s[i + 2..];
                match rest.find(')') {
                    Some(end) => {
                        let name = &rest[..end];
                        match env.get(name) {
                            Some(v) => out.push_str(v),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        // Skip `(`, the name and `)`.
                        for _ in 0..name.chars().count() + 2 {
                            chars.next();
                        }
                    }
                    None => out.push('$'),
                }
            }
            _ => out.push('$'),
        }
    }
    out
}
