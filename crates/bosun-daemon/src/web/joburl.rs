//! Where a run's results are viewed when its artifacts are not on this
//! machine (a decorated Kubernetes run uploads them to its bucket), as
//! Prow's plank computes a ProwJob's `status.url` (`pjutil.JobURL`):
//!
//! - a decorated run whose `gcs_configuration.job_url_prefix` is set: the
//!   prefix (a trailing `gcs/` or `gcs` trimmed, as Prow's
//!   `GetJobURLPrefix` does) joined with the storage provider (`gs`, or the
//!   bucket's scheme: `s3://b` is `s3`), the bucket and the run's path in it
//!   (Prow's `gcsupload.PathsForJob`: `path_prefix`, then
//!   `logs/JOB/BUILD_ID` for periodics and postsubmits,
//!   `pr-logs/pull/REPO_SEGMENT/PR/JOB/BUILD_ID` for presubmits,
//!   `pr-logs/pull/batch/JOB/BUILD_ID` for batches, the repository segment
//!   after `path_strategy`);
//! - else `plank.job_url_template`, a Go template executed over the run as
//!   a ProwJob (`prowjob::document`), with the part of Go's template language
//!   such templates use ([`GoTemplate`]).
//!
//! A run's own `url` (set by its executor) wins over both.
//! (`plank.job_url_prefix_config` is not read: bosun's configuration types
//! keep it as an ignored field.)

use bosun_config::types::ProwConfig;
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use serde_json::Value;

/// The URL of `run`'s results, if Prow's settings give one; an error when
/// the job URL template does not execute.
pub fn job_url(
    config: &ProwConfig,
    run: &Run,
    spec: Option<&SpecSnapshot>,
) -> Result<Option<String>, String> {
    if let Some(u) = run.url.as_deref().filter(|u| !u.is_empty()) {
        return Ok(Some(u.to_string()));
    }
    let Some(spec) = spec else {
        return Ok(None);
    };
    let decoration = spec
        .decoration
        .as_ref()
        .filter(|_| spec.job.decorate == Some(true));
    if let Some(d) = decoration {
        let gcs = d.gcs_configuration.as_ref().unwrap_or(&Value::Null);
        let prefix = gcs["job_url_prefix"].as_str().unwrap_or_default();
        if !prefix.is_empty() {
            return Ok(Some(prefixed_url(prefix, gcs, run)));
        }
    }
    let Some(template) = config
        .plank
        .job_url_template
        .as_deref()
        .filter(|t| !t.is_empty())
    else {
        return Ok(None);
    };
    let doc = bosun_job::prowjob::document(run, spec, &config.prowjob_namespace);
    let data = serde_json::to_value(&doc).map_err(|e| e.to_string())?;
    let out = GoTemplate::parse(template)?.execute(&data)?;
    Ok(Some(out).filter(|u| !u.is_empty()))
}

/// Prow's URL for a decorated job under `prefix`.
fn prefixed_url(prefix: &str, gcs: &Value, run: &Run) -> String {
    let prefix = prefix
        .strip_suffix("gcs/")
        .or_else(|| prefix.strip_suffix("gcs"))
        .unwrap_or(prefix);
    let bucket = gcs["bucket"].as_str().unwrap_or_default();
    let (provider, bucket) = match bucket.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("gs", bucket),
    };
    let path = job_path(gcs, run);
    let (base, rest) = split_url(prefix);
    let joined = join(&[rest, provider, bucket, &path]);
    format!("{base}{joined}")
}

/// `scheme://host` and the path of a URL (no scheme: all path).
fn split_url(u: &str) -> (&str, &str) {
    match u.find("://") {
        Some(i) => match u[i + 3..].find('/') {
            Some(j) => u.split_at(i + 3 + j),
            None => (u, ""),
        },
        None => ("", u),
    }
}

/// Go's `path.Join`: the non-empty elements joined by `/`, cleaned (no
/// doubled or trailing slash); rooted when the first element is.
fn join(parts: &[&str]) -> String {
    let rooted = parts
        .iter()
        .find(|p| !p.is_empty())
        .is_some_and(|p| p.starts_with('/'));
    let segs: Vec<&str> = parts
        .iter()
        .flat_map(|p| p.split('/'))
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let body = segs.join("/");
    if rooted {
        format!("/{body}")
    } else {
        body
    }
}

/// The run's directory in its bucket (Prow's `gcsupload.PathsForJob`).
pub fn job_path(gcs: &Value, run: &Run) -> String {
    let s = |k: &str| gcs[k].as_str().unwrap_or_default();
    let (default_org, default_repo) = (s("default_org"), s("default_repo"));
    let segment = |org: &str, repo: &str| -> String {
        let repo_ = repo.replace('/', "_");
        match s("path_strategy") {
            "legacy" if org == default_org && repo == default_repo => String::new(),
            "legacy" if org == default_org => repo.to_string(),
            "single" if org == default_org && repo == default_repo => String::new(),
            _ => format!("{org}_{repo_}"),
        }
    };
    use bosun_config::types::JobType;
    let base = match run.job_type {
        JobType::Periodic | JobType::Postsubmit => join(&["logs", &run.job, &run.build_id]),
        JobType::Presubmit => {
            let (seg, pr) = run
                .refs
                .as_ref()
                .map_or((String::new(), String::new()), |r| {
                    (
                        segment(&r.org, &r.repo),
                        r.pulls
                            .first()
                            .map(|p| p.number.to_string())
                            .unwrap_or_default(),
                    )
                });
            join(&["pr-logs", "pull", &seg, &pr, &run.job, &run.build_id])
        }
        JobType::Batch => join(&["pr-logs", "pull", "batch", &run.job, &run.build_id]),
    };
    join(&[s("path_prefix"), &base])
}

// ---------------------------------------------------------------------------
// Go templates, over JSON.

/// A Go `text/template`, executed over a JSON document whose keys are Go's
/// JSON names: a field `.Spec.BuildID` is looked up as written, then as
/// `snake_case` (`build_id`), then `lowerCamel` (`startTime`); `ObjectMeta`
/// is `metadata`, and a field missing at a level with `metadata` is looked
/// for there (Go's embedded `ObjectMeta`).
///
/// Supported: text, `{{- -}}` trims, comments, `.`, field chains on `.`,
/// `$` and variables, `:=`, parentheses, pipelines with `|`, string,
/// number, `true`/`false`/`nil` constants; `if`/`else if`/`else`, `with`
/// (and `else`), `range` (with `$i, $v :=`, and `else`), `end`; the
/// functions `eq ne lt le gt ge and or not len index printf print`.
#[derive(Debug, Clone)]
pub struct GoTemplate {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Action(Pipeline),
    If(Vec<(Pipeline, Vec<Node>)>, Vec<Node>),
    With(Pipeline, Vec<Node>, Vec<Node>),
    Range(Pipeline, Vec<Node>, Vec<Node>),
}

#[derive(Debug, Clone, Default)]
struct Pipeline {
    decl: Vec<String>,
    cmds: Vec<Vec<Arg>>,
}

#[derive(Debug, Clone)]
enum Arg {
    /// `.A.B` (empty: `.`).
    Field(Vec<String>),
    /// `$x.A.B`.
    Var(String, Vec<String>),
    Ident(String),
    Lit(Value),
    /// `(pipeline).A.B`.
    Sub(Box<Pipeline>, Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Field(Vec<String>),
    Var(String, Vec<String>),
    Ident(String),
    Lit(Value),
    LParen,
    /// `)` with the fields after it.
    RParen(Vec<String>),
    Pipe,
    Declare,
    Comma,
}

fn err<T>(m: impl Into<String>) -> Result<T, String> {
    Err(format!("template: {}", m.into()))
}

/// `A.B.C` after a `.` or a variable: the field names.
fn fields(s: &str) -> Vec<String> {
    s.split('.')
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect()
}

fn lex_action(src: &str) -> Result<Vec<Tok>, String> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    let word = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_' || b[*i] == b'.') {
            *i += 1;
        }
        &src[start..*i]
    };
    while i < b.len() {
        match b[i] {
            c if c.is_ascii_whitespace() => i += 1,
            b'(' => {
                out.push(Tok::LParen);
                i += 1;
            }
            b')' => {
                i += 1;
                let f = if i < b.len() && b[i] == b'.' {
                    fields(word(&mut i))
                } else {
                    Vec::new()
                };
                out.push(Tok::RParen(f));
            }
            b'|' => {
                out.push(Tok::Pipe);
                i += 1;
            }
            b',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            b':' if b.get(i + 1) == Some(&b'=') => {
                out.push(Tok::Declare);
                i += 2;
            }
            b'.' => out.push(Tok::Field(fields(word(&mut i)))),
            b'$' => {
                i += 1;
                let w = word(&mut i);
                let (name, rest) = w.split_once('.').unwrap_or((w, ""));
                out.push(Tok::Var(format!("${name}"), fields(rest)));
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                let lit = src.get(start..i.min(b.len())).unwrap_or_default();
                let s: String = serde_json::from_str(lit)
                    .map_err(|e| format!("template: bad string {lit}: {e}"))?;
                out.push(Tok::Lit(Value::String(s)));
            }
            b'`' => {
                let end = src[i + 1..]
                    .find('`')
                    .ok_or_else(|| "template: unterminated raw string".to_string())?;
                out.push(Tok::Lit(Value::String(src[i + 1..i + 1 + end].to_string())));
                i += end + 2;
            }
            c if c.is_ascii_digit() || c == b'-' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let n: i64 = src[start..i]
                    .parse()
                    .map_err(|_| format!("template: bad number {}", &src[start..i]))?;
                out.push(Tok::Lit(Value::from(n)));
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let w = word(&mut i);
                out.push(match w {
                    "true" => Tok::Lit(Value::Bool(true)),
                    "false" => Tok::Lit(Value::Bool(false)),
                    "nil" => Tok::Lit(Value::Null),
                    w => Tok::Ident(w.to_string()),
                });
            }
            c => return err(format!("unexpected {:?} in action", c as char)),
        }
    }
    Ok(out)
}

/// Parses the tokens of a pipeline (`$x := a b | c`), from `*i` to the end
/// or to an unmatched `)`.
fn parse_pipeline(toks: &[Tok], i: &mut usize) -> Result<Pipeline, String> {
    let mut p = Pipeline::default();
    // Declarations: `$x :=` or `$i, $v :=`.
    let mut j = *i;
    let mut names = Vec::new();
    while let Some(Tok::Var(n, f)) = toks.get(j) {
        if !f.is_empty() {
            break;
        }
        names.push(n.clone());
        j += 1;
        match toks.get(j) {
            Some(Tok::Comma) => j += 1,
            Some(Tok::Declare) => {
                p.decl = names.clone();
                *i = j + 1;
                break;
            }
            _ => break,
        }
    }
    let mut cmd = Vec::new();
    while let Some(t) = toks.get(*i) {
        *i += 1;
        match t {
            Tok::Pipe => p.cmds.push(std::mem::take(&mut cmd)),
            Tok::RParen(_) => {
                *i -= 1;
                break;
            }
            Tok::LParen => {
                let sub = parse_pipeline(toks, i)?;
                let Some(Tok::RParen(f)) = toks.get(*i) else {
                    return err("unclosed parenthesis");
                };
                *i += 1;
                cmd.push(Arg::Sub(Box::new(sub), f.clone()));
            }
            Tok::Field(f) => cmd.push(Arg::Field(f.clone())),
            Tok::Var(n, f) => cmd.push(Arg::Var(n.clone(), f.clone())),
            Tok::Ident(n) => cmd.push(Arg::Ident(n.clone())),
            Tok::Lit(v) => cmd.push(Arg::Lit(v.clone())),
            Tok::Comma | Tok::Declare => return err("unexpected , or :="),
        }
    }
    if cmd.is_empty() {
        return err("missing value in a pipeline");
    }
    p.cmds.push(cmd);
    Ok(p)
}

fn pipeline_of(src: &str) -> Result<Pipeline, String> {
    let toks = lex_action(src)?;
    let mut i = 0;
    let p = parse_pipeline(&toks, &mut i)?;
    if i != toks.len() {
        return err("unexpected ) in action");
    }
    Ok(p)
}

/// A piece of the template's source: text, or an action's inside.
enum Piece {
    Text(String),
    Action(String),
}

fn split(src: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut rest = src;
    let mut trim_next = false;
    while let Some(open) = rest.find("{{") {
        let mut text = &rest[..open];
        if trim_next {
            text = text.trim_start();
        }
        let after = &rest[open + 2..];
        let trim_before =
            after.starts_with("- ") || after.starts_with("-\t") || after.starts_with("-\n");
        if trim_before {
            text = text.trim_end();
        }
        let close = after
            .find("}}")
            .ok_or_else(|| "template: unclosed action".to_string())?;
        let mut inside = &after[..close];
        if trim_before {
            inside = &inside[1..];
        }
        trim_next = inside.ends_with(" -") || inside.ends_with("\t-") || inside.ends_with("\n-");
        if trim_next {
            inside = &inside[..inside.len() - 1];
        }
        if !text.is_empty() {
            out.push(Piece::Text(text.to_string()));
        }
        let inside = inside.trim();
        if !(inside.starts_with("/*") && inside.ends_with("*/")) {
            out.push(Piece::Action(inside.to_string()));
        }
        rest = &after[close + 2..];
    }
    let text = if trim_next { rest.trim_start() } else { rest };
    if !text.is_empty() {
        out.push(Piece::Text(text.to_string()));
    }
    Ok(out)
}

/// What ended a list of nodes.
enum Stop {
    Eof,
    End,
    Else(String),
}

fn parse_list(pieces: &[Piece], i: &mut usize) -> Result<(Vec<Node>, Stop), String> {
    let mut nodes = Vec::new();
    while let Some(p) = pieces.get(*i) {
        *i += 1;
        let a = match p {
            Piece::Text(t) => {
                nodes.push(Node::Text(t.clone()));
                continue;
            }
            Piece::Action(a) => a.as_str(),
        };
        let (kw, rest) = a.split_once(char::is_whitespace).unwrap_or((a, ""));
        match kw {
            "end" => return Ok((nodes, Stop::End)),
            "else" => return Ok((nodes, Stop::Else(rest.trim().to_string()))),
            "if" => {
                let mut branches = vec![(pipeline_of(rest)?, Vec::new())];
                let mut otherwise = Vec::new();
                loop {
                    let (body, end) = parse_list(pieces, i)?;
                    branches.last_mut().expect("a branch").1 = body;
                    match end {
                        Stop::End => break,
                        Stop::Else(cond) if cond.starts_with("if ") => {
                            branches.push((pipeline_of(&cond[3..])?, Vec::new()));
                        }
                        Stop::Else(cond) if cond.is_empty() => {
                            let (body, end) = parse_list(pieces, i)?;
                            if !matches!(end, Stop::End) {
                                return err("if: else without end");
                            }
                            otherwise = body;
                            break;
                        }
                        _ => return err("unterminated if"),
                    }
                }
                nodes.push(Node::If(branches, otherwise));
            }
            "with" | "range" => {
                let p = pipeline_of(rest)?;
                let (body, end) = parse_list(pieces, i)?;
                let otherwise = match end {
                    Stop::End => Vec::new(),
                    Stop::Else(c) if c.is_empty() => {
                        let (body, end) = parse_list(pieces, i)?;
                        if !matches!(end, Stop::End) {
                            return err(format!("{kw}: else without end"));
                        }
                        body
                    }
                    _ => return err(format!("unterminated {kw}")),
                };
                nodes.push(if kw == "with" {
                    Node::With(p, body, otherwise)
                } else {
                    Node::Range(p, body, otherwise)
                });
            }
            "template" | "define" | "block" | "break" | "continue" => {
                return err(format!("{kw} is not supported here"))
            }
            _ => nodes.push(Node::Action(pipeline_of(a)?)),
        }
    }
    Ok((nodes, Stop::Eof))
}

impl GoTemplate {
    /// Parses a template.
    pub fn parse(src: &str) -> Result<GoTemplate, String> {
        let pieces = split(src)?;
        let mut i = 0;
        let (nodes, end) = parse_list(&pieces, &mut i)?;
        match end {
            Stop::Eof => Ok(GoTemplate { nodes }),
            Stop::End => err("unexpected {{end}}"),
            Stop::Else(_) => err("unexpected {{else}}"),
        }
    }

    /// Executes it over `data`.
    pub fn execute(&self, data: &Value) -> Result<String, String> {
        let mut ex = Exec {
            vars: vec![("$".into(), data.clone())],
            out: String::new(),
        };
        ex.list(&self.nodes, data)?;
        Ok(ex.out)
    }
}

struct Exec {
    vars: Vec<(String, Value)>,
    out: String,
}

/// Go's truth.
fn truth(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(_) => true,
    }
}

/// How `{{.}}` prints a value.
fn print(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(print).collect::<Vec<_>>().join(" ")),
        Value::Object(_) => v.to_string(),
    }
}

fn snake(name: &str) -> String {
    let c: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, ch) in c.iter().enumerate() {
        if ch.is_ascii_uppercase() {
            let prev_lower = i > 0 && (c[i - 1].is_ascii_lowercase() || c[i - 1].is_ascii_digit());
            let next_lower = c.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if i > 0 && (prev_lower || (next_lower && c[i - 1].is_ascii_uppercase())) {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(*ch);
        }
    }
    out
}

/// `obj`'s field `name` (see [`GoTemplate`] for the names tried).
fn field(v: &Value, name: &str) -> Result<Value, String> {
    let Value::Object(m) = v else {
        return match v {
            Value::Null => err(format!("nil pointer evaluating field {name}")),
            _ => err(format!("can't evaluate field {name} in {}", print(v))),
        };
    };
    if name == "ObjectMeta" {
        if let Some(meta) = m.get("metadata") {
            return Ok(meta.clone());
        }
    }
    let mut lower = name.to_string();
    if let Some(f) = lower.get_mut(0..1) {
        f.make_ascii_lowercase();
    }
    for key in [name.to_string(), snake(name), lower] {
        if let Some(x) = m.get(&key) {
            return Ok(x.clone());
        }
    }
    if let Some(meta) = m.get("metadata").filter(|m| m.is_object()) {
        if let Ok(x) = field(meta, name) {
            if !x.is_null() {
                return Ok(x);
            }
        }
    }
    Ok(Value::Null)
}

fn chain(mut v: Value, names: &[String]) -> Result<Value, String> {
    for n in names {
        v = field(&v, n)?;
    }
    Ok(v)
}

fn cmp(a: &Value, b: &Value) -> Result<std::cmp::Ordering, String> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .ok_or_else(|| "template: incomparable numbers".to_string()),
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        _ => err("incompatible types for comparison"),
    }
}

/// Go's `printf` for `%s %d %v %q %%`.
fn printf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('q') => out.push_str(
                &args
                    .next()
                    .map(|a| serde_json::to_string(&print(a)).unwrap_or_default())
                    .unwrap_or_default(),
            ),
            Some(_) => out.push_str(&args.next().map(print).unwrap_or_default()),
            None => out.push('%'),
        }
    }
    out
}

impl Exec {
    fn var(&self, name: &str) -> Result<Value, String> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("template: undefined variable {name}"))
    }

    fn arg(&mut self, a: &Arg, dot: &Value) -> Result<Value, String> {
        match a {
            Arg::Field(f) => chain(dot.clone(), f),
            Arg::Var(n, f) => chain(self.var(n)?, f),
            Arg::Lit(v) => Ok(v.clone()),
            Arg::Sub(p, f) => {
                let v = self.pipeline(p, dot)?;
                chain(v, f)
            }
            Arg::Ident(n) => self.call(n, &[], None, dot),
        }
    }

    fn call(
        &mut self,
        name: &str,
        args: &[Arg],
        piped: Option<Value>,
        dot: &Value,
    ) -> Result<Value, String> {
        let mut vals = Vec::with_capacity(args.len() + 1);
        // `and` and `or` stop at the first argument that decides.
        if name == "and" || name == "or" {
            let mut last = Value::Null;
            let all: Vec<Option<&Arg>> = args
                .iter()
                .map(Some)
                .chain(piped.is_some().then_some(None))
                .collect();
            for a in all {
                last = match a {
                    Some(a) => self.arg(a, dot)?,
                    None => piped.clone().unwrap_or_default(),
                };
                if truth(&last) != (name == "and") {
                    return Ok(last);
                }
            }
            return Ok(last);
        }
        for a in args {
            vals.push(self.arg(a, dot)?);
        }
        vals.extend(piped);
        let need = |n: usize| -> Result<(), String> {
            if vals.len() < n {
                err(format!("wrong number of args for {name}"))
            } else {
                Ok(())
            }
        };
        Ok(match name {
            "eq" => {
                need(2)?;
                Value::Bool(vals[1..].iter().any(|v| v == &vals[0]))
            }
            "ne" => {
                need(2)?;
                Value::Bool(vals[0] != vals[1])
            }
            "lt" | "le" | "gt" | "ge" => {
                need(2)?;
                let o = cmp(&vals[0], &vals[1])?;
                use std::cmp::Ordering::*;
                Value::Bool(match name {
                    "lt" => o == Less,
                    "le" => o != Greater,
                    "gt" => o == Greater,
                    _ => o != Less,
                })
            }
            "not" => {
                need(1)?;
                Value::Bool(!truth(&vals[0]))
            }
            "len" => {
                need(1)?;
                Value::from(match &vals[0] {
                    Value::String(s) => s.len(),
                    Value::Array(a) => a.len(),
                    Value::Object(m) => m.len(),
                    Value::Null => 0,
                    _ => return err("len of a non-collection"),
                })
            }
            "index" => {
                need(1)?;
                let mut v = vals[0].clone();
                for k in &vals[1..] {
                    v = match (&v, k) {
                        (Value::Array(a), Value::Number(n)) => {
                            let i = n.as_u64().unwrap_or(u64::MAX) as usize;
                            a.get(i).cloned().ok_or_else(|| {
                                format!("template: error calling index: index out of range: {n}")
                            })?
                        }
                        (Value::Object(m), Value::String(s)) => {
                            m.get(s).cloned().unwrap_or_default()
                        }
                        (Value::Null, _) => {
                            return err("error calling index: index of untyped nil")
                        }
                        _ => return err("error calling index: cannot index"),
                    };
                }
                v
            }
            "printf" => {
                need(1)?;
                Value::String(printf(&print(&vals[0]), &vals[1..]))
            }
            "print" => Value::String(vals.iter().map(print).collect()),
            other => return err(format!("function {other:?} not defined")),
        })
    }

    fn pipeline(&mut self, p: &Pipeline, dot: &Value) -> Result<Value, String> {
        let mut piped: Option<Value> = None;
        for cmd in &p.cmds {
            let v = match cmd.as_slice() {
                [Arg::Ident(name), rest @ ..] => self.call(name, rest, piped.take(), dot)?,
                [single] if piped.is_none() => self.arg(single, dot)?,
                _ => return err("a value cannot take arguments"),
            };
            piped = Some(v);
        }
        let v = piped.unwrap_or_default();
        if let Some(name) = p.decl.first() {
            self.vars.push((name.clone(), v.clone()));
        }
        Ok(v)
    }

    fn list(&mut self, nodes: &[Node], dot: &Value) -> Result<(), String> {
        for n in nodes {
            let depth = self.vars.len();
            match n {
                Node::Text(t) => self.out.push_str(t),
                Node::Action(p) => {
                    let v = self.pipeline(p, dot)?;
                    if p.decl.is_empty() {
                        self.out.push_str(&print(&v));
                    }
                    // A declaration lives to the end of the enclosing list.
                    continue;
                }
                Node::If(branches, otherwise) => {
                    let mut done = false;
                    for (cond, body) in branches {
                        if truth(&self.pipeline(cond, dot)?) {
                            self.list(body, dot)?;
                            done = true;
                            break;
                        }
                    }
                    if !done {
                        self.list(otherwise, dot)?;
                    }
                }
                Node::With(p, body, otherwise) => {
                    let v = self.pipeline(p, dot)?;
                    if truth(&v) {
                        self.list(body, &v)?;
                    } else {
                        self.list(otherwise, dot)?;
                    }
                }
                Node::Range(p, body, otherwise) => {
                    let mut bare = p.clone();
                    bare.decl.clear();
                    let v = self.pipeline(&bare, dot)?;
                    let items: Vec<(Value, Value)> = match v {
                        Value::Array(a) => a
                            .into_iter()
                            .enumerate()
                            .map(|(i, x)| (Value::from(i), x))
                            .collect(),
                        Value::Object(m) => {
                            m.into_iter().map(|(k, x)| (Value::String(k), x)).collect()
                        }
                        Value::Null => Vec::new(),
                        _ => return err("range over a non-collection"),
                    };
                    if items.is_empty() {
                        self.list(otherwise, dot)?;
                    }
                    for (k, x) in items {
                        let before = self.vars.len();
                        match p.decl.as_slice() {
                            [v] => self.vars.push((v.clone(), x.clone())),
                            [i, v] => {
                                self.vars.push((i.clone(), k));
                                self.vars.push((v.clone(), x.clone()));
                            }
                            _ => {}
                        }
                        self.list(body, &x)?;
                        self.vars.truncate(before);
                    }
                }
            }
            self.vars.truncate(depth);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::types::{JobType, Pull, Refs};

    fn run(job_type: JobType) -> Run {
        let mut r: Run = serde_json::from_value(serde_json::json!({
            "id": "3f2a", "build_id": "1700", "job": "pull-unit", "job_type": "presubmit",
            "configured_cluster": "default", "labels": {}, "annotations": {},
            "spec_hash": "h", "attempt": 0, "pod_revival_count": 0,
            "created_at": "2026-03-02T10:00:00Z", "state": "pending", "description": "",
            "extra_refs": []
        }))
        .unwrap();
        r.job_type = job_type;
        r.refs = Some(Refs {
            org: "acme".into(),
            repo: "widget".into(),
            base_ref: Some("main".into()),
            pulls: vec![Pull {
                number: 42,
                author: "alice".into(),
                sha: "abc".into(),
                ..Pull::default()
            }],
            ..Refs::default()
        });
        r
    }

    /// Prow's `gcsupload.PathsForJob` and `JobURL` on its own test cases'
    /// shapes.
    #[test]
    fn prefixed_urls_follow_prows_paths() {
        let gcs = serde_json::json!({"bucket": "ci-logs", "path_strategy": "explicit"});
        let pre = run(JobType::Presubmit);
        assert_eq!(
            prefixed_url("https://prow.example.com/view/", &gcs, &pre),
            "https://prow.example.com/view/gs/ci-logs/pr-logs/pull/acme_widget/42/pull-unit/1700"
        );
        // An old prefix ending in gcs/ is trimmed; an s3 bucket keeps its provider.
        let s3 = serde_json::json!({"bucket": "s3://b", "path_strategy": "legacy",
            "default_org": "acme", "default_repo": "widget", "path_prefix": "p"});
        assert_eq!(
            prefixed_url("https://prow.example.com/view/gcs/", &s3, &pre),
            "https://prow.example.com/view/s3/b/p/pr-logs/pull/42/pull-unit/1700"
        );
        let single = serde_json::json!({"bucket": "b", "path_strategy": "single",
            "default_org": "acme", "default_repo": "other"});
        assert!(prefixed_url("https://x/view", &single, &pre).contains("/pull/acme_widget/42/"));
        let mut periodic = run(JobType::Periodic);
        periodic.job = "nightly".into();
        assert_eq!(
            prefixed_url("https://x/view/", &gcs, &periodic),
            "https://x/view/gs/ci-logs/logs/nightly/1700"
        );
        assert_eq!(
            job_path(&gcs, &run(JobType::Batch)),
            "pr-logs/pull/batch/pull-unit/1700"
        );
    }

    #[test]
    fn go_templates_over_a_prowjob() {
        let data = serde_json::json!({
            "metadata": {"name": "3f2a", "labels": {"prow.k8s.io/type": "presubmit"}},
            "spec": {"type": "presubmit", "job": "pull-unit",
                     "refs": {"org": "acme", "repo": "widget", "pulls": [{"number": 42}]}},
            "status": {"build_id": "1700", "startTime": "2026-03-02T10:00:00Z", "state": "pending"}
        });
        let t = |src: &str| GoTemplate::parse(src).and_then(|t| t.execute(&data));
        // Prow's documented example.
        assert_eq!(
            t("https://x/view/b/pr-logs/pull/{{.Spec.Refs.Repo}}/{{with index .Spec.Refs.Pulls 0}}{{.Number}}{{end}}/{{.Spec.Job}}/{{.Status.BuildID}}").unwrap(),
            "https://x/view/b/pr-logs/pull/widget/42/pull-unit/1700"
        );
        assert_eq!(
            t(r#"{{if eq .Spec.Type "presubmit"}}pr{{else if eq .Spec.Type "batch"}}batch{{else}}logs{{end}}"#).unwrap(),
            "pr"
        );
        assert_eq!(
            t("{{.ObjectMeta.Name}} {{.Name}} {{.Status.StartTime}}").unwrap(),
            "3f2a 3f2a 2026-03-02T10:00:00Z"
        );
        assert_eq!(
            t(r#"{{index .ObjectMeta.Labels "prow.k8s.io/type"}}"#).unwrap(),
            "presubmit"
        );
        assert_eq!(
            t(r#"{{printf "%s/%d" .Spec.Job 7}}"#).unwrap(),
            "pull-unit/7"
        );
        assert_eq!(
            t("{{- range $i, $p := .Spec.Refs.Pulls }} #{{ $p.Number }}@{{$i}} {{- end }}")
                .unwrap(),
            " #42@0"
        );
        assert_eq!(
            t("{{ $r := .Spec.Refs }}{{ $r.Org }}/{{ $r.Repo | len }}").unwrap(),
            "acme/6"
        );
        assert_eq!(
            t("{{if and .Spec.Refs (not .Spec.Nope)}}y{{end}}").unwrap(),
            "y"
        );
        assert!(t("{{.Spec.Extra.Refs.Org}}").is_err(), "a field of nil");
        assert!(t("{{if}}").is_err());
        assert!(t("{{template \"x\"}}").is_err());
        assert!(t("{{index .Spec.Refs.Pulls 3}}")
            .unwrap_err()
            .contains("out of range"));
    }
}
