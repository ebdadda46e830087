//! The Go `text/template` that Lighthouse runs over `{"Refs": refs}` for a
//! job's `pipeline_run_params[].value_template` (`makePipelineRun` in
//! jenkins-x/lighthouse `pkg/engines/tekton/utils.go`), for the part of the
//! language Lighthouse's users write.
//!
//! Supported, with Go's meaning:
//! - literal text, `{{- ` and ` -}}` trim markers, `{{/* comments */}}`;
//! - `.`, field chains (`.Refs.BaseRef`, `$v.SHA`, `(index .Refs.Pulls 0).SHA`),
//!   `$` and variables declared with `:=` (in an action or a `range`);
//! - `index` (slices by integer, the data's map by string);
//! - `if`/`else if`/`else`, `range` (with `$v :=` or `$i, $v :=`, and
//!   `else`) and `with`, each closed by `end`; Go's truth (empty strings,
//!   zero, nil and empty lists are false);
//! - string (`"..."`, `` `...` ``), integer, `true`/`false` and `nil`
//!   constants.
//!
//! The data is Lighthouse's: the map `{"Refs": *v1alpha1.Refs}` with the
//! Go field names of Lighthouse's `Refs` (`Org`, `Repo`, `RepoLink`,
//! `BaseRef`, `BaseSHA`, `BaseLink`, `Pulls`, `PathAlias`, `CloneURI`,
//! `SkipSubmodules`, `CloneDepth`; and its `String` method, `PULL_REFS`'s
//! form) and `Pull` (`Number`, `Author`, `SHA`, `Title`, `Ref`, `Link`,
//! `CommitLink`, `AuthorLink`). Go's behaviour is kept where it shows: a
//! missing map key prints `<no value>`, a nil `Refs` prints `<nil>` and a
//! field of it is the error `nil pointer evaluating *v1alpha1.Refs.Org`, an
//! unknown field is `can't evaluate field F in type T`, `index` out of range
//! is `error calling index: index out of range: N`, and values print as
//! Go's `fmt` prints them (a `Pull` as `{813 alice 1a2b ...}`).
//!
//! Refused, with an error that says so: pipelines (`|`), every function but
//! `index` (Go's `printf`, `eq`, `len`, ... and Sprig's, which Lighthouse
//! does not have), `define`/`template`/`block`, `break`/`continue`, and
//! assignment with `=`.

use std::borrow::Cow;

use bosun_config::types::{Pull, Refs};
use bosun_store::run::refs_string;

/// Why a template cannot be parsed or executed, in Go's words where Go has
/// them (`template: NAME:LINE: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    nodes: Vec<Node>,
}

/// Parses `text` as the template `name` and executes it over
/// `{"Refs": refs}`.
pub fn render(name: &str, text: &str, refs: Option<&Refs>) -> Result<String, TemplateError> {
    Template::parse(name, text)?.execute(refs)
}

impl Template {
    /// Parses `text`; `name` names the template in errors (Lighthouse names
    /// it after the parameter).
    pub fn parse(name: &str, text: &str) -> Result<Template, TemplateError> {
        let items = lex(name, text)?;
        let mut p = Parser {
            name,
            items,
            pos: 0,
            vars: vec!["$".to_string()],
        };
        let (nodes, end) = p.list()?;
        if let Some(end) = end {
            return Err(p.err_at(end.line, &format!("unexpected {}", end.describe())));
        }
        Ok(Template {
            name: name.to_string(),
            nodes,
        })
    }

    /// Executes the template over `{"Refs": refs}` (`None`: a nil `*Refs`).
    pub fn execute(&self, refs: Option<&Refs>) -> Result<String, TemplateError> {
        let mut s = State {
            name: &self.name,
            out: String::new(),
            vars: vec![("$".to_string(), Val::Root(refs))],
        };
        s.walk_list(&Val::Root(refs), &self.nodes)?;
        Ok(s.out)
    }
}

// ---------------------------------------------------------------------------
// Lexing

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Text(String),
    /// `{{` (an action starts).
    Open,
    /// `}}`.
    Close,
    Space,
    Dot,
    Field(String),
    Var(String),
    Ident(String),
    Str(String),
    Int(i64),
    LParen,
    RParen,
    Pipe,
    Declare,
    Assign,
    Comma,
}

#[derive(Debug, Clone)]
struct Item {
    tok: Tok,
    line: usize,
}

const WS: &[char] = &[' ', '\t', '\r', '\n'];

fn lex(name: &str, text: &str) -> Result<Vec<Item>, TemplateError> {
    let err = |line: usize, msg: &str| TemplateError(format!("template: {name}:{line}: {msg}"));
    let mut items = Vec::new();
    let mut rest = text;
    let mut line = 1;
    let mut trim_next = false;
    while !rest.is_empty() {
        let (mut lit, after) = match rest.find("{{") {
            Some(i) => (&rest[..i], Some(&rest[i..])),
            None => (rest, None),
        };
        if trim_next {
            lit = lit.trim_start_matches(WS);
            trim_next = false;
        }
        let Some(after) = after else {
            if !lit.is_empty() {
                items.push(Item {
                    tok: Tok::Text(lit.to_string()),
                    line,
                });
            }
            break;
        };
        // `{{- ` (a dash and a space) trims the text before it.
        let mut body = &after[2..];
        if body.starts_with('-') && body[1..].starts_with(WS) {
            lit = lit.trim_end_matches(WS);
            body = &body[2..];
        }
        if !lit.is_empty() {
            items.push(Item {
                tok: Tok::Text(lit.to_string()),
                line,
            });
        }
        line += rest[..rest.len() - after.len()].matches('\n').count();
        let action_line = line;
        // A comment: `{{/* ... */}}` (right after the delimiter and its
        // trim marker), with optional trim markers.
        if let Some(comment) = body.strip_prefix("/*") {
            let Some(end) = comment.find("*/") else {
                return Err(err(action_line, "unclosed comment"));
            };
            let tail = &comment[end + 2..];
            let (tail, trim) = if let Some(t) = tail.strip_prefix("}}") {
                (t, false)
            } else if tail.starts_with(WS) && tail[1..].starts_with("-}}") {
                (&tail[4..], true)
            } else {
                return Err(err(action_line, "comment ends before closing delimiter"));
            };
            line += body[..body.len() - tail.len()].matches('\n').count();
            trim_next = trim;
            rest = tail;
            continue;
        }
        items.push(Item {
            tok: Tok::Open,
            line: action_line,
        });
        let mut s = body;
        loop {
            if s.is_empty() {
                return Err(err(line, "unclosed action"));
            }
            if let Some(t) = s.strip_prefix("}}") {
                items.push(Item {
                    tok: Tok::Close,
                    line,
                });
                s = t;
                break;
            }
            let c = s.chars().next().expect("not empty");
            if WS.contains(&c) {
                let n = s.len() - s.trim_start_matches(WS).len();
                let space = &s[..n];
                let after_space = &s[n..];
                line += space.matches('\n').count();
                if let Some(t) = after_space.strip_prefix("-}}") {
                    items.push(Item {
                        tok: Tok::Close,
                        line,
                    });
                    trim_next = true;
                    s = t;
                    break;
                }
                items.push(Item {
                    tok: Tok::Space,
                    line,
                });
                s = after_space;
                continue;
            }
            let (tok, len) = match c {
                '(' => (Tok::LParen, 1),
                ')' => (Tok::RParen, 1),
                '|' => (Tok::Pipe, 1),
                ',' => (Tok::Comma, 1),
                '=' => (Tok::Assign, 1),
                ':' if s.starts_with(":=") => (Tok::Declare, 2),
                '.' => {
                    let n = ident_len(&s[1..]);
                    if n == 0 {
                        if s[1..].starts_with(|c: char| c.is_ascii_digit()) {
                            return Err(err(
                                line,
                                "floating-point numbers are not supported by bosun",
                            ));
                        }
                        (Tok::Dot, 1)
                    } else {
                        (Tok::Field(s[1..1 + n].to_string()), 1 + n)
                    }
                }
                '$' => {
                    let n = ident_len(&s[1..]);
                    (Tok::Var(s[..1 + n].to_string()), 1 + n)
                }
                '"' => {
                    let (v, n) =
                        quoted(s).ok_or_else(|| err(line, "unterminated quoted string"))?;
                    (Tok::Str(v), n)
                }
                '`' => {
                    let end = s[1..]
                        .find('`')
                        .ok_or_else(|| err(line, "unterminated raw quoted string"))?;
                    line += s[1..1 + end].matches('\n').count();
                    (Tok::Str(s[1..1 + end].to_string()), end + 2)
                }
                '\'' => {
                    let mut chars = s[1..].chars();
                    match (chars.next(), chars.next()) {
                        (Some(ch), Some('\'')) if ch != '\\' => {
                            (Tok::Int(ch as i64), 2 + ch.len_utf8())
                        }
                        _ => return Err(err(line, "character constants other than a plain character are not supported by bosun")),
                    }
                }
                c if c.is_ascii_digit()
                    || ((c == '-' || c == '+')
                        && s[1..].starts_with(|d: char| d.is_ascii_digit())) =>
                {
                    let n = 1 + s[1..]
                        .find(|d: char| !(d.is_ascii_alphanumeric() || d == '_' || d == '.'))
                        .unwrap_or(s.len() - 1);
                    let text = s[..n].replace('_', "");
                    let v = text.parse::<i64>().map_err(|_| {
                        err(
                            line,
                            &format!(
                                "number {} is not supported by bosun (integers only)",
                                &s[..n]
                            ),
                        )
                    })?;
                    (Tok::Int(v), n)
                }
                c if c.is_alphabetic() || c == '_' => {
                    let n = ident_len(s);
                    (Tok::Ident(s[..n].to_string()), n)
                }
                other => {
                    return Err(err(line, &format!("unexpected {other:?} in command")));
                }
            };
            items.push(Item { tok, line });
            s = &s[len..];
        }
        rest = s;
    }
    Ok(items)
}

/// Length of the identifier (letters, digits, `_`) at the start of `s`.
fn ident_len(s: &str) -> usize {
    s.find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// A Go interpreted string literal at the start of `s`: its value and length.
fn quoted(s: &str) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut it = s.char_indices().skip(1);
    while let Some((i, c)) = it.next() {
        match c {
            '"' => return Some((out, i + 1)),
            '\n' => return None,
            '\\' => {
                let (_, e) = it.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '\\' => out.push('\\'),
                    '"' => out.push('"'),
                    '\'' => out.push('\''),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut code = 0u32;
                        for _ in 0..n {
                            let (_, h) = it.next()?;
                            code = code * 16 + h.to_digit(16)?;
                        }
                        out.push(char::from_u32(code)?);
                    }
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    None
}

// ---------------------------------------------------------------------------
// Parsing

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Action(Pipe),
    If(Pipe, Vec<Node>, Vec<Node>),
    Range(Pipe, Vec<Node>, Vec<Node>),
    With(Pipe, Vec<Node>, Vec<Node>),
}

/// A pipeline: its declared variables and its one command.
#[derive(Debug, Clone)]
struct Pipe {
    line: usize,
    decl: Vec<String>,
    cmd: Vec<Arg>,
    /// The pipeline as written, for errors (`<.Refs.Org>`).
    text: String,
}

#[derive(Debug, Clone)]
enum Arg {
    /// `.`, `.A.B`: fields of dot.
    Dot(Vec<String>),
    /// `$x.A.B`.
    Var(String, Vec<String>),
    /// `(pipeline).A.B`.
    Paren(Box<Pipe>, Vec<String>),
    Func(String),
    Str(String),
    Int(i64),
    Bool(bool),
    Nil,
}

/// What ended a list: `{{end}}` or `{{else ...}}`.
#[derive(Debug)]
struct ListEnd {
    line: usize,
    /// `else` (with what follows it: `if ...`), or `end`.
    is_else: bool,
}

impl ListEnd {
    fn describe(&self) -> &'static str {
        if self.is_else {
            "{{else}}"
        } else {
            "{{end}}"
        }
    }
}

struct Parser<'t> {
    name: &'t str,
    items: Vec<Item>,
    pos: usize,
    /// Variables in scope.
    vars: Vec<String>,
}

/// Go's built-in functions, which bosun does not run (only `index`).
const GO_FUNCS: &[&str] = &[
    "and", "call", "html", "js", "len", "not", "or", "print", "printf", "println", "slice",
    "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
];

impl Parser<'_> {
    fn err_at(&self, line: usize, msg: &str) -> TemplateError {
        TemplateError(format!("template: {}:{line}: {msg}", self.name))
    }

    fn peek(&self) -> Option<&Tok> {
        self.items.get(self.pos).map(|i| &i.tok)
    }

    fn line(&self) -> usize {
        self.items
            .get(self.pos)
            .or(self.items.last())
            .map_or(1, |i| i.line)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.items.get(self.pos).map(|i| i.tok.clone());
        self.pos += 1;
        t
    }

    fn skip_space(&mut self) {
        while self.peek() == Some(&Tok::Space) {
            self.pos += 1;
        }
    }

    /// Nodes up to `{{end}}`, `{{else}}` or the end of input.
    fn list(&mut self) -> Result<(Vec<Node>, Option<ListEnd>), TemplateError> {
        let mut nodes = Vec::new();
        while let Some(tok) = self.next() {
            match tok {
                Tok::Text(t) => nodes.push(Node::Text(t)),
                Tok::Open => {
                    let line = self.line();
                    self.skip_space();
                    let keyword = match self.peek() {
                        Some(Tok::Ident(k)) => Some(k.clone()),
                        _ => None,
                    };
                    match keyword.as_deref() {
                        Some("end") => {
                            self.pos += 1;
                            self.close("end")?;
                            return Ok((
                                nodes,
                                Some(ListEnd {
                                    line,
                                    is_else: false,
                                }),
                            ));
                        }
                        Some("else") => {
                            // Left for the control structure to read.
                            return Ok((
                                nodes,
                                Some(ListEnd {
                                    line,
                                    is_else: true,
                                }),
                            ));
                        }
                        Some(k @ ("if" | "range" | "with")) => {
                            let k = k.to_string();
                            self.pos += 1;
                            nodes.push(self.control(&k, line)?);
                        }
                        Some(k @ ("define" | "template" | "block" | "break" | "continue")) => {
                            return Err(self
                                .err_at(line, &format!("{{{{{k}}}}} is not supported by bosun")));
                        }
                        _ => {
                            let pipe = self.pipeline(true, false)?;
                            nodes.push(Node::Action(pipe));
                        }
                    }
                }
                other => {
                    return Err(self.err_at(self.line(), &format!("unexpected {other:?}")));
                }
            }
        }
        Ok((nodes, None))
    }

    /// Expects the end of an action.
    fn close(&mut self, what: &str) -> Result<(), TemplateError> {
        self.skip_space();
        match self.next() {
            Some(Tok::Close) => Ok(()),
            _ => Err(self.err_at(self.line(), &format!("unexpected token in {what}"))),
        }
    }

    /// `if`/`range`/`with` after its keyword: pipeline, list, optional else
    /// list, `end`.
    fn control(&mut self, kind: &str, line: usize) -> Result<Node, TemplateError> {
        let mark = self.vars.len();
        let pipe = self.pipeline(kind != "if", kind == "range")?;
        let (body, end) = self.list()?;
        let Some(end) = end else {
            return Err(self.err_at(line, &format!("unexpected EOF in {kind}")));
        };
        let else_body = if end.is_else {
            // At `else`: `{{else}}`, or `{{else if ...}}` (an if inside the else).
            self.pos += 1; // `else`
            self.skip_space();
            if kind == "if" && matches!(self.peek(), Some(Tok::Ident(k)) if k == "if") {
                self.pos += 1;
                // The chained if reads its own `end`, which ends this one too.
                let inner = self.control("if", end.line)?;
                vec![inner]
            } else {
                self.close("else")?;
                let (else_body, end2) = self.list()?;
                match end2 {
                    Some(ListEnd { is_else: false, .. }) => else_body,
                    Some(e) => {
                        return Err(
                            self.err_at(e.line, &format!("expected end; found {}", e.describe()))
                        )
                    }
                    None => return Err(self.err_at(line, &format!("unexpected EOF in {kind}"))),
                }
            }
        } else {
            Vec::new()
        };
        self.vars.truncate(mark);
        Ok(match kind {
            "if" => Node::If(pipe, body, else_body),
            "range" => Node::Range(pipe, body, else_body),
            _ => Node::With(pipe, body, else_body),
        })
    }

    /// A pipeline up to `}}` (or `)` when `in_paren`), with its declarations.
    fn pipeline(&mut self, decl_ok: bool, range: bool) -> Result<Pipe, TemplateError> {
        self.pipeline_until(decl_ok, range, false)
    }

    fn pipeline_until(
        &mut self,
        decl_ok: bool,
        range: bool,
        in_paren: bool,
    ) -> Result<Pipe, TemplateError> {
        let line = self.line();
        let start = self.pos;
        self.skip_space();
        // Declarations: `$x :=` or, in range, `$i, $v :=`.
        let mut decl = Vec::new();
        let save = self.pos;
        if let Some(Tok::Var(v)) = self.peek().cloned() {
            self.pos += 1;
            self.skip_space();
            match self.peek() {
                Some(Tok::Declare) if decl_ok || !in_paren => {
                    self.pos += 1;
                    decl.push(v);
                }
                Some(Tok::Comma) if range => {
                    self.pos += 1;
                    self.skip_space();
                    match (self.next(), {
                        self.skip_space();
                        self.next()
                    }) {
                        (Some(Tok::Var(v2)), Some(Tok::Declare)) => {
                            decl.push(v);
                            decl.push(v2);
                        }
                        _ => return Err(self.err_at(line, "range can only initialize variables")),
                    }
                }
                Some(Tok::Assign) => {
                    return Err(self.err_at(
                        line,
                        "assigning a variable with = is not supported by bosun",
                    ))
                }
                _ => self.pos = save,
            }
        }
        let mut cmd = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some(Tok::Close) if !in_paren => {
                    self.pos += 1;
                    break;
                }
                Some(Tok::RParen) if in_paren => {
                    self.pos += 1;
                    break;
                }
                Some(Tok::Pipe) => {
                    return Err(self.err_at(line, "pipelines (|) are not supported by bosun"))
                }
                None | Some(Tok::Close) | Some(Tok::RParen) => {
                    return Err(self.err_at(line, "unclosed action"))
                }
                _ => cmd.push(self.operand(line)?),
            }
        }
        if cmd.is_empty() {
            return Err(self.err_at(line, "missing value for command"));
        }
        match &cmd[0] {
            Arg::Func(_) => {}
            _ if cmd.len() > 1 => {
                return Err(self.err_at(line, "can't give argument to non-function"));
            }
            _ => {}
        }
        for v in &decl {
            self.vars.push(v.clone());
        }
        let end = self.pos.saturating_sub(1);
        let text: String = self.items[start..end]
            .iter()
            .map(|i| tok_text(&i.tok))
            .collect::<String>()
            .trim()
            .to_string();
        Ok(Pipe {
            line,
            decl,
            cmd,
            text,
        })
    }

    /// One operand with its field chain.
    fn operand(&mut self, line: usize) -> Result<Arg, TemplateError> {
        let tok = self.next().expect("peeked");
        let mut arg = match tok {
            Tok::Dot => Arg::Dot(Vec::new()),
            Tok::Field(f) => Arg::Dot(vec![f]),
            Tok::Var(v) => {
                if !self.vars.contains(&v) {
                    return Err(self.err_at(line, &format!("undefined variable {v:?}")));
                }
                Arg::Var(v, Vec::new())
            }
            Tok::LParen => {
                let inner = self.pipeline_until(false, false, true)?;
                Arg::Paren(Box::new(inner), Vec::new())
            }
            Tok::Str(s) => Arg::Str(s),
            Tok::Int(i) => Arg::Int(i),
            Tok::Ident(id) => match id.as_str() {
                "true" => Arg::Bool(true),
                "false" => Arg::Bool(false),
                "nil" => Arg::Nil,
                "index" => Arg::Func(id),
                f if GO_FUNCS.contains(&f) => {
                    return Err(self.err_at(
                        line,
                        &format!("function {f:?} is not supported by bosun (supported: index)"),
                    ))
                }
                "if" | "range" | "with" | "else" | "end" | "define" | "template" | "block"
                | "break" | "continue" => {
                    return Err(self.err_at(line, &format!("unexpected {id:?} in operand")))
                }
                f => return Err(self.err_at(line, &format!("function {f:?} not defined"))),
            },
            other => return Err(self.err_at(line, &format!("unexpected {other:?} in operand"))),
        };
        // A field chain right after the operand (no space between).
        while let Some(Tok::Field(f)) = self.peek().cloned() {
            self.pos += 1;
            match &mut arg {
                Arg::Dot(fields) | Arg::Var(_, fields) | Arg::Paren(_, fields) => fields.push(f),
                _ => {
                    return Err(self.err_at(
                        line,
                        &format!("unexpected .{f} after a constant or function"),
                    ))
                }
            }
        }
        Ok(arg)
    }
}

/// A token as written (for the `<...>` of errors).
fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Text(s) => s.clone(),
        Tok::Open => "{{".into(),
        Tok::Close => "}}".into(),
        Tok::Space => " ".into(),
        Tok::Dot => ".".into(),
        Tok::Field(f) => format!(".{f}"),
        Tok::Var(v) => v.clone(),
        Tok::Ident(i) => i.clone(),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Int(i) => i.to_string(),
        Tok::LParen => "(".into(),
        Tok::RParen => ")".into(),
        Tok::Pipe => "|".into(),
        Tok::Declare => ":=".into(),
        Tok::Assign => "=".into(),
        Tok::Comma => ",".into(),
    }
}

// ---------------------------------------------------------------------------
// Execution

/// A value of the data, typed as in Go.
#[derive(Debug, Clone)]
enum Val<'a> {
    /// No value (a missing map key).
    Invalid,
    /// Untyped `nil`.
    Nil,
    Str(Cow<'a, str>),
    Int(i64),
    Bool(bool),
    /// The data: `map[string]interface{}{"Refs": refs}`.
    Root(Option<&'a Refs>),
    /// `*v1alpha1.Refs` (`None`: nil).
    Refs(Option<&'a Refs>),
    /// `[]v1alpha1.Pull`.
    Pulls(&'a [Pull]),
    /// `v1alpha1.Pull`.
    Pull(&'a Pull),
}

impl Val<'_> {
    fn type_name(&self) -> &'static str {
        match self {
            Val::Invalid => "<invalid>",
            Val::Nil => "nil",
            Val::Str(_) => "string",
            Val::Int(_) => "int",
            Val::Bool(_) => "bool",
            Val::Root(_) => "map[string]interface {}",
            Val::Refs(_) => "*v1alpha1.Refs",
            Val::Pulls(_) => "[]v1alpha1.Pull",
            Val::Pull(_) => "v1alpha1.Pull",
        }
    }

    /// Go's `truth`.
    fn truth(&self) -> bool {
        match self {
            Val::Invalid | Val::Nil => false,
            Val::Str(s) => !s.is_empty(),
            Val::Int(i) => *i != 0,
            Val::Bool(b) => *b,
            Val::Root(_) => true,
            Val::Refs(r) => r.is_some(),
            Val::Pulls(p) => !p.is_empty(),
            Val::Pull(_) => true,
        }
    }
}

fn opt(s: &Option<String>) -> Val<'_> {
    Val::Str(Cow::Borrowed(s.as_deref().unwrap_or_default()))
}

/// Go's `fmt` `%v` of a `Pull`.
fn pull_string(p: &Pull) -> String {
    let o = |s: &Option<String>| s.clone().unwrap_or_default();
    format!(
        "{{{} {} {} {} {} {} {} {}}}",
        p.number,
        p.author,
        p.sha,
        o(&p.title),
        o(&p.ref_),
        o(&p.link),
        o(&p.commit_link),
        o(&p.author_link)
    )
}

/// Text/template's printing of a value.
fn print(v: &Val<'_>) -> String {
    match v {
        Val::Invalid => "<no value>".into(),
        Val::Nil => "<nil>".into(),
        Val::Str(s) => s.to_string(),
        Val::Int(i) => i.to_string(),
        Val::Bool(b) => b.to_string(),
        Val::Refs(Some(r)) => refs_string(r),
        Val::Refs(None) => "<nil>".into(),
        Val::Root(r) => format!("map[Refs:{}]", print(&Val::Refs(*r))),
        Val::Pull(p) => pull_string(p),
        Val::Pulls(ps) => {
            let items: Vec<String> = ps.iter().map(pull_string).collect();
            format!("[{}]", items.join(" "))
        }
    }
}

struct State<'t, 'a> {
    name: &'t str,
    out: String,
    vars: Vec<(String, Val<'a>)>,
}

impl<'a> State<'_, 'a> {
    fn err(&self, pipe: &Pipe, msg: impl std::fmt::Display) -> TemplateError {
        TemplateError(format!(
            "template: {}:{}: executing {:?} at <{}>: {msg}",
            self.name, pipe.line, self.name, pipe.text
        ))
    }

    fn walk_list(&mut self, dot: &Val<'a>, nodes: &[Node]) -> Result<(), TemplateError> {
        for n in nodes {
            self.walk(dot, n)?;
        }
        Ok(())
    }

    fn walk(&mut self, dot: &Val<'a>, node: &Node) -> Result<(), TemplateError> {
        match node {
            Node::Text(t) => self.out.push_str(t),
            Node::Action(pipe) => {
                let v = self.pipe(dot, pipe)?;
                if pipe.decl.is_empty() {
                    self.out.push_str(&print(&v));
                }
            }
            Node::If(pipe, body, else_body) | Node::With(pipe, body, else_body) => {
                let mark = self.vars.len();
                let v = self.pipe(dot, pipe)?;
                if v.truth() {
                    let dot = if matches!(node, Node::With(..)) {
                        v
                    } else {
                        dot.clone()
                    };
                    self.walk_list(&dot, body)?;
                } else {
                    self.walk_list(dot, else_body)?;
                }
                self.vars.truncate(mark);
            }
            Node::Range(pipe, body, else_body) => {
                let mark = self.vars.len();
                let v = self.eval_cmd(dot, pipe)?;
                let elems: Vec<(Val<'a>, Val<'a>)> = match v {
                    Val::Pulls(ps) => ps
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (Val::Int(i as i64), Val::Pull(p)))
                        .collect(),
                    Val::Root(r) => vec![(Val::Str(Cow::Borrowed("Refs")), Val::Refs(r))],
                    Val::Invalid | Val::Nil => Vec::new(),
                    Val::Refs(None) => Vec::new(),
                    other => {
                        return Err(
                            self.err(pipe, format!("range can't iterate over {}", print(&other)))
                        )
                    }
                };
                if elems.is_empty() {
                    self.walk_list(dot, else_body)?;
                } else {
                    for (k, e) in elems {
                        match pipe.decl.as_slice() {
                            [v] => self.vars.push((v.clone(), e.clone())),
                            [i, v] => {
                                self.vars.push((i.clone(), k));
                                self.vars.push((v.clone(), e.clone()));
                            }
                            _ => {}
                        }
                        self.walk_list(&e, body)?;
                        self.vars.truncate(mark);
                    }
                }
                self.vars.truncate(mark);
            }
        }
        Ok(())
    }

    /// Evaluates a pipeline and declares its variable, if any.
    fn pipe(&mut self, dot: &Val<'a>, pipe: &Pipe) -> Result<Val<'a>, TemplateError> {
        let v = self.eval_cmd(dot, pipe)?;
        if let [name] = pipe.decl.as_slice() {
            self.vars.push((name.clone(), v.clone()));
        }
        Ok(v)
    }

    fn eval_cmd(&mut self, dot: &Val<'a>, pipe: &Pipe) -> Result<Val<'a>, TemplateError> {
        match &pipe.cmd[0] {
            Arg::Func(f) => {
                let args: Vec<Val<'a>> = pipe.cmd[1..]
                    .iter()
                    .map(|a| match a {
                        // `nil` is a value only as an argument.
                        Arg::Nil => Ok(Val::Nil),
                        a => self.eval_arg(dot, pipe, a),
                    })
                    .collect::<Result<_, _>>()?;
                debug_assert_eq!(f, "index");
                self.index(pipe, args)
            }
            a => self.eval_arg(dot, pipe, a),
        }
    }

    fn eval_arg(
        &mut self,
        dot: &Val<'a>,
        pipe: &Pipe,
        arg: &Arg,
    ) -> Result<Val<'a>, TemplateError> {
        match arg {
            Arg::Dot(fields) => self.fields(pipe, dot.clone(), fields),
            Arg::Var(name, fields) => {
                let v = self
                    .vars
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| self.err(pipe, format!("undefined variable: {name}")))?;
                self.fields(pipe, v, fields)
            }
            Arg::Paren(inner, fields) => {
                let v = self.eval_cmd(dot, inner)?;
                self.fields(pipe, v, fields)
            }
            Arg::Func(f) => Err(self.err(pipe, format!("{f} is a function: call it first"))),
            Arg::Str(s) => Ok(Val::Str(Cow::Owned(s.clone()))),
            Arg::Int(i) => Ok(Val::Int(*i)),
            Arg::Bool(b) => Ok(Val::Bool(*b)),
            Arg::Nil => Err(self.err(pipe, "nil is not a command")),
        }
    }

    fn fields(
        &self,
        pipe: &Pipe,
        mut v: Val<'a>,
        fields: &[String],
    ) -> Result<Val<'a>, TemplateError> {
        for f in fields {
            v = self.field(pipe, v, f)?;
        }
        Ok(v)
    }

    /// `v.name`, as text/template's `evalField`.
    fn field(&self, pipe: &Pipe, v: Val<'a>, name: &str) -> Result<Val<'a>, TemplateError> {
        let cannot = |v: &Val<'_>| {
            self.err(
                pipe,
                format!("can't evaluate field {name} in type {}", v.type_name()),
            )
        };
        match v {
            Val::Invalid => Ok(Val::Invalid),
            Val::Root(r) => Ok(if name == "Refs" {
                Val::Refs(r)
            } else {
                Val::Invalid
            }),
            Val::Refs(r) => {
                const FIELDS: &[&str] = &[
                    "Org",
                    "Repo",
                    "RepoLink",
                    "BaseRef",
                    "BaseSHA",
                    "BaseLink",
                    "Pulls",
                    "PathAlias",
                    "CloneURI",
                    "SkipSubmodules",
                    "CloneDepth",
                ];
                let Some(r) = r else {
                    if name == "String" {
                        return Err(self.err(
                            pipe,
                            "error calling String: runtime error: invalid memory address or nil pointer dereference",
                        ));
                    }
                    if FIELDS.contains(&name) {
                        return Err(self.err(
                            pipe,
                            format!("nil pointer evaluating *v1alpha1.Refs.{name}"),
                        ));
                    }
                    return Err(cannot(&v));
                };
                Ok(match name {
                    "Org" => Val::Str(Cow::Borrowed(&r.org)),
                    "Repo" => Val::Str(Cow::Borrowed(&r.repo)),
                    "RepoLink" => opt(&r.repo_link),
                    "BaseRef" => opt(&r.base_ref),
                    "BaseSHA" => opt(&r.base_sha),
                    "BaseLink" => opt(&r.base_link),
                    "Pulls" => Val::Pulls(&r.pulls),
                    "PathAlias" => opt(&r.path_alias),
                    "CloneURI" => opt(&r.clone_uri),
                    "SkipSubmodules" => Val::Bool(r.skip_submodules),
                    "CloneDepth" => Val::Int(r.clone_depth),
                    "String" => Val::Str(Cow::Owned(refs_string(r))),
                    _ => return Err(cannot(&v)),
                })
            }
            Val::Pull(p) => Ok(match name {
                "Number" => Val::Int(p.number),
                "Author" => Val::Str(Cow::Borrowed(&p.author)),
                "SHA" => Val::Str(Cow::Borrowed(&p.sha)),
                "Title" => opt(&p.title),
                "Ref" => opt(&p.ref_),
                "Link" => opt(&p.link),
                "CommitLink" => opt(&p.commit_link),
                "AuthorLink" => opt(&p.author_link),
                _ => return Err(cannot(&v)),
            }),
            Val::Nil => Err(self.err(
                pipe,
                format!("nil pointer evaluating interface {{}}.{name}"),
            )),
            other => Err(cannot(&other)),
        }
    }

    /// Go's `index`.
    fn index(&self, pipe: &Pipe, args: Vec<Val<'a>>) -> Result<Val<'a>, TemplateError> {
        let mut it = args.into_iter();
        let Some(mut item) = it.next() else {
            return Err(self.err(
                pipe,
                "wrong number of args for index: want at least 1 got 0",
            ));
        };
        let fail = |msg: String| self.err(pipe, format!("error calling index: {msg}"));
        for ix in it {
            item = match (&item, &ix) {
                (Val::Nil, _) => return Err(fail("index of untyped nil".into())),
                (Val::Invalid, _) => return Err(fail("index of untyped nil".into())),
                (Val::Pulls(ps), Val::Int(i)) => {
                    match usize::try_from(*i).ok().and_then(|i| ps.get(i)) {
                        Some(p) => Val::Pull(p),
                        None => return Err(fail(format!("index out of range: {i}"))),
                    }
                }
                (Val::Str(s), Val::Int(i)) => {
                    match usize::try_from(*i).ok().and_then(|i| s.as_bytes().get(i)) {
                        Some(b) => Val::Int(i64::from(*b)),
                        None => return Err(fail(format!("index out of range: {i}"))),
                    }
                }
                (Val::Pulls(_) | Val::Str(_), other) => {
                    return Err(fail(format!(
                        "cannot index slice/array with type {}",
                        other.type_name()
                    )))
                }
                (Val::Root(r), Val::Str(k)) => {
                    if k == "Refs" {
                        Val::Refs(*r)
                    } else {
                        Val::Invalid
                    }
                }
                (Val::Root(_), other) => {
                    return Err(fail(format!(
                        "value has type {}; should be string",
                        other.type_name()
                    )))
                }
                (other, _) => {
                    return Err(fail(format!(
                        "can't index item of type {}",
                        other.type_name()
                    )))
                }
            };
        }
        Ok(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> Refs {
        Refs {
            org: "jenkins-x".into(),
            repo: "lighthouse".into(),
            base_ref: Some("master".into()),
            base_sha: Some("e8d56b5".into()),
            clone_uri: Some("https://github.com/jenkins-x/lighthouse.git".into()),
            pulls: vec![
                Pull {
                    number: 813,
                    author: "abayer".into(),
                    sha: "dd64c73".into(),
                    ref_: Some("refs/pull/813/head".into()),
                    ..Pull::default()
                },
                Pull {
                    number: 814,
                    author: "abayer".into(),
                    sha: "abcdefg".into(),
                    ref_: Some("refs/pull/814/head".into()),
                    ..Pull::default()
                },
            ],
            ..Refs::default()
        }
    }

    fn run(t: &str) -> Result<String, TemplateError> {
        render("p", t, Some(&refs()))
    }

    #[test]
    fn literal_text_and_fields() {
        assert_eq!(run("bar-value").unwrap(), "bar-value");
        assert_eq!(run("").unwrap(), "");
        assert_eq!(
            run("{{ .Refs.CloneURI }}").unwrap(),
            "https://github.com/jenkins-x/lighthouse.git"
        );
        assert_eq!(
            run("{{.Refs.Org}}/{{.Refs.Repo}}@{{ .Refs.BaseRef }}").unwrap(),
            "jenkins-x/lighthouse@master"
        );
        assert_eq!(
            run("{{ .Refs.BaseLink }}|{{ .Refs.PathAlias }}|").unwrap(),
            "||"
        );
        assert_eq!(
            run("{{ .Refs.SkipSubmodules }} {{ .Refs.CloneDepth }}").unwrap(),
            "false 0"
        );
    }

    #[test]
    fn index_and_fields_of_its_result() {
        assert_eq!(run("{{ (index .Refs.Pulls 0).SHA }}").unwrap(), "dd64c73");
        assert_eq!(run("{{ (index .Refs.Pulls 1).Number }}").unwrap(), "814");
        assert_eq!(
            run("{{ index .Refs.Pulls 0 }}").unwrap(),
            "{813 abayer dd64c73  refs/pull/813/head   }"
        );
        assert_eq!(
            run("{{ index . \"Refs\" }}").unwrap(),
            "master:e8d56b5,813:dd64c73:refs/pull/813/head,814:abcdefg:refs/pull/814/head"
        );
        let e = run("{{ (index .Refs.Pulls 2).SHA }}").unwrap_err();
        assert_eq!(
            e.0,
            "template: p:1: executing \"p\" at <index .Refs.Pulls 2>: error calling index: index out of range: 2"
        );
    }

    #[test]
    fn lighthouse_range_over_pulls() {
        // Lighthouse's own test data (start-batch-pullrequest).
        let t = "{{ range $i, $v := .Refs.Pulls }}{{if $i}} {{end}}{{ $v.Ref }}{{ end }}";
        assert_eq!(run(t).unwrap(), "refs/pull/813/head refs/pull/814/head");
        let t = "{{ range $i, $v := .Refs.Pulls }}{{if $i}} {{end}}{{ $v.SHA }}{{ end }}";
        assert_eq!(run(t).unwrap(), "dd64c73 abcdefg");
        assert_eq!(
            run("{{range .Refs.Pulls}}{{.Number}},{{end}}").unwrap(),
            "813,814,"
        );
        let mut r = refs();
        r.pulls.clear();
        assert_eq!(
            render("p", "{{range .Refs.Pulls}}x{{else}}none{{end}}", Some(&r)).unwrap(),
            "none"
        );
    }

    #[test]
    fn if_else_with_and_variables() {
        assert_eq!(
            run("{{if .Refs.Pulls}}pr{{else}}push{{end}}").unwrap(),
            "pr"
        );
        assert_eq!(
            run("{{if .Refs.PathAlias}}a{{else if .Refs.BaseRef}}b{{else}}c{{end}}").unwrap(),
            "b"
        );
        assert_eq!(
            run("{{if .Nope}}a{{else if .Refs.PathAlias}}b{{else}}c{{end}}").unwrap(),
            "c"
        );
        assert_eq!(
            run("{{with .Refs.BaseRef}}on {{.}}{{end}}").unwrap(),
            "on master"
        );
        assert_eq!(
            run("{{$r := .Refs}}{{$r.Org}}-{{ $.Refs.Repo }}").unwrap(),
            "jenkins-x-lighthouse"
        );
        assert_eq!(
            run("{{range $p := .Refs.Pulls}}{{$p.Author}}{{end}}").unwrap(),
            "abayerabayer"
        );
    }

    #[test]
    fn trim_markers_and_comments() {
        assert_eq!(run("a  {{- .Refs.Org -}}  \n b").unwrap(), "ajenkins-xb");
        assert_eq!(run("a {{/* a comment */}} b").unwrap(), "a  b");
        assert_eq!(run("a {{- /* a comment */ -}} b").unwrap(), "ab");
        // `{{-3}}` is the number -3, not a trim marker.
        assert_eq!(run("a {{-3}}").unwrap(), "a -3");
    }

    #[test]
    fn go_missing_and_nil_behaviour() {
        assert_eq!(run("{{ .Missing }}").unwrap(), "<no value>");
        assert_eq!(run("{{ .Missing.Deeper }}").unwrap(), "<no value>");
        assert_eq!(render("p", "{{ .Refs }}", None).unwrap(), "<nil>");
        assert_eq!(
            render("p", "{{ .Refs.Org }}", None).unwrap_err().0,
            "template: p:1: executing \"p\" at <.Refs.Org>: nil pointer evaluating *v1alpha1.Refs.Org"
        );
        assert_eq!(
            run("{{ .Refs.Nope }}").unwrap_err().0,
            "template: p:1: executing \"p\" at <.Refs.Nope>: can't evaluate field Nope in type *v1alpha1.Refs"
        );
        assert_eq!(
            run("{{ (index .Refs.Pulls 0).sha }}").unwrap_err().0,
            "template: p:1: executing \"p\" at <(index .Refs.Pulls 0).sha>: can't evaluate field sha in type v1alpha1.Pull"
        );
        assert_eq!(run("{{ .Refs.String }}").unwrap(), refs_string(&refs()));
        assert!(run("{{ index nil 0 }}")
            .unwrap_err()
            .0
            .ends_with("error calling index: index of untyped nil"));
        assert!(run("{{ nil }}")
            .unwrap_err()
            .0
            .ends_with("nil is not a command"));
    }

    #[test]
    fn refused_constructs_say_so() {
        for (t, want) in [
            (
                "{{ .Refs.Org | printf \"%s\" }}",
                "pipelines (|) are not supported by bosun",
            ),
            (
                "{{ printf \"%s\" .Refs.Org }}",
                "function \"printf\" is not supported by bosun (supported: index)",
            ),
            (
                "{{ if eq .Refs.Org \"x\" }}y{{ end }}",
                "function \"eq\" is not supported by bosun",
            ),
            (
                "{{ len .Refs.Pulls }}",
                "function \"len\" is not supported by bosun",
            ),
            ("{{ upper .Refs.Org }}", "function \"upper\" not defined"),
            (
                "{{ define \"x\" }}{{ end }}",
                "{{define}} is not supported by bosun",
            ),
            (
                "{{ template \"x\" }}",
                "{{template}} is not supported by bosun",
            ),
            (
                "{{ $x := 1 }}{{ $x = 2 }}",
                "assigning a variable with = is not supported by bosun",
            ),
            ("{{ .Refs.Org", "unclosed action"),
            ("{{ end }}", "unexpected {{end}}"),
            ("{{ if .Refs }}x", "unexpected EOF in if"),
            ("{{ $nope }}", "undefined variable \"$nope\""),
            ("{{ .Refs.Org 1 }}", "can't give argument to non-function"),
            ("{{ 1.5 }}", "number 1.5 is not supported by bosun"),
        ] {
            let e = run(t).expect_err(t);
            assert!(e.0.contains(want), "{t}: {e}");
            assert!(e.0.starts_with("template: p:"), "{t}: {e}");
        }
    }

    #[test]
    fn errors_name_the_line() {
        let e = run("line one\n{{ .Refs.Nope }}").unwrap_err();
        assert!(e.0.starts_with("template: p:2: "), "{e}");
        let e = run("a\nb\n{{ printf }}").unwrap_err();
        assert!(e.0.starts_with("template: p:3: "), "{e}");
    }

    #[test]
    fn refs_string_is_lighthouses() {
        let mut r = refs();
        assert_eq!(
            refs_string(&r),
            "master:e8d56b5,813:dd64c73:refs/pull/813/head,814:abcdefg:refs/pull/814/head"
        );
        r.base_sha = None;
        r.pulls.clear();
        assert_eq!(refs_string(&r), "master");
    }
}
