//! bosun's Go `text/template` engine: a parser and executor of the part of
//! Go's template language bosun's templates use, over JSON data whose object
//! keys are Go field names.
//!
//! Two templates run on it: Lighthouse's
//! `pipeline_run_params[].value_template` (`bosun-tekton`'s `gotemplate`)
//! and Prow's `plank.job_url_template` (`bosun-daemon`'s job URL).
//!
//! Supported, with Go's meaning:
//! - literal text, `{{- ` and ` -}}` trim markers, `{{/* comments */}}`;
//! - `.`, field chains (`.Refs.BaseRef`, `$v.SHA`, `(index .Refs.Pulls 0).SHA`),
//!   `$` and variables declared with `:=` (in an action or a `range`);
//! - `if`/`else if`/`else`, `range` (with `$v :=` or `$i, $v :=`, and
//!   `else`) and `with` (and `else`), each closed by `end`; Go's truth
//!   (empty strings, zero, nil and empty lists are false);
//! - string (`"..."`, `` `...` ``), integer, `true`/`false` and `nil`
//!   constants;
//! - pipelines (`|`) and the functions `index`, `eq`, `ne`, `lt`, `le`,
//!   `gt`, `ge`, `and`, `or`, `not`, `len`, `print`, `printf`, each only
//!   when the caller's [`Language`] allows it.
//!
//! Refused, with an error that says so: a function or pipeline the
//! [`Language`] does not allow, `define`/`template`/`block`,
//! `break`/`continue`, and assignment with `=`.
//!
//! The caller describes its data to the engine with a [`Model`]: every
//! value carries a Go type name (`*v1alpha1.Refs`), and the model looks up
//! fields and map keys, names element types and may print values its own
//! way. Go's behaviour is kept where it shows: a missing map key prints
//! `<no value>`, a field of no value is no value, an unknown field is
//! `can't evaluate field F in type T` ([`cant_evaluate`]), `index` out of
//! range is `error calling index: index out of range: N`, and errors read
//! `template: NAME:LINE: executing "NAME" at <PIPELINE>: ...`.

use serde_json::Value;

/// Why a template cannot be parsed or executed, in Go's words where Go has
/// them (`template: NAME:LINE: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

/// The functions a template may call, and whether it may use pipelines.
#[derive(Debug, Clone, Copy)]
pub struct Language {
    /// The functions allowed, of `index eq ne lt le gt ge and or not len
    /// print printf`.
    pub funcs: &'static [&'static str],
    /// Whether `a | b` is allowed.
    pub pipelines: bool,
}

/// A typed value: a JSON value and its Go type name.
pub type Typed = (Value, &'static str);

/// How a template's data looks to Go: types, fields, map keys, printing.
pub trait Model {
    /// The Go type of the data (`.`).
    fn root_type(&self) -> &'static str;

    /// `v.name`, `v` being of Go type `ty`: the field's value and type,
    /// `None` for no value (a missing map key), or an error message
    /// ([`cant_evaluate`] for an unknown field).
    fn field(&self, v: &Value, ty: &'static str, name: &str) -> Result<Option<Typed>, String>;

    /// Whether values of type `ty` are structs (or pointers to them): they
    /// have fields but cannot be indexed or ranged over.
    fn is_struct(&self, ty: &'static str) -> bool {
        let _ = ty;
        false
    }

    /// The element type of the slice or map type `ty`.
    fn elem(&self, ty: &'static str) -> &'static str {
        let _ = ty;
        "interface {}"
    }

    /// The key `key` of the map `map` (of type `ty`), for `index` and
    /// `range`: `None` for a missing key.
    fn key(&self, map: &Value, ty: &'static str, key: &str) -> Option<Typed> {
        map.get(key).map(|v| (v.clone(), self.elem(ty)))
    }

    /// How `v` of type `ty` prints, when not as the engine prints JSON
    /// (`<nil>`, the string, the number, `[a b]`, `map[k:v]`).
    fn print(&self, v: &Value, ty: &'static str) -> Option<String> {
        let _ = (v, ty);
        None
    }
}

/// Go's error for a field `name` that type `ty` does not have.
pub fn cant_evaluate(name: &str, ty: &str) -> String {
    format!("can't evaluate field {name} in type {ty}")
}

/// Every function the engine runs.
const FUNCS: &[&str] = &[
    "index", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "len", "print", "printf",
];

/// Go's built-in functions, refused as unsupported when not allowed.
const GO_FUNCS: &[&str] = &[
    "and", "call", "html", "js", "len", "not", "or", "print", "printf", "println", "slice",
    "urlquery", "eq", "ge", "gt", "le", "lt", "ne", "index",
];

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    nodes: Vec<Node>,
}

impl Template {
    /// Parses `text` in `lang`; `name` names the template in errors.
    pub fn parse(name: &str, text: &str, lang: &Language) -> Result<Template, TemplateError> {
        let items = lex(name, text)?;
        let mut p = Parser {
            name,
            lang,
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

    /// Executes the template over `data`, which `model` describes.
    pub fn execute(&self, data: &Value, model: &dyn Model) -> Result<String, TemplateError> {
        let root = Val::V(data.clone(), model.root_type());
        let mut s = State {
            name: &self.name,
            model,
            out: String::new(),
            vars: vec![("$".to_string(), root.clone())],
        };
        s.walk_list(&root, &self.nodes)?;
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

/// A pipeline: its declared variables and its commands.
#[derive(Debug, Clone)]
struct Pipe {
    line: usize,
    decl: Vec<String>,
    cmds: Vec<Vec<Arg>>,
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
    lang: &'t Language,
    items: Vec<Item>,
    pos: usize,
    /// Variables in scope.
    vars: Vec<String>,
}

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
        let mut cmds = vec![Vec::new()];
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
                Some(Tok::Pipe) if !self.lang.pipelines => {
                    return Err(self.err_at(line, "pipelines (|) are not supported by bosun"))
                }
                Some(Tok::Pipe) => {
                    self.pos += 1;
                    cmds.push(Vec::new());
                }
                None | Some(Tok::Close) | Some(Tok::RParen) => {
                    return Err(self.err_at(line, "unclosed action"))
                }
                _ => {
                    let arg = self.operand(line)?;
                    cmds.last_mut().expect("a command").push(arg);
                }
            }
        }
        for (i, cmd) in cmds.iter().enumerate() {
            match cmd.first() {
                None => return Err(self.err_at(line, "missing value for command")),
                Some(Arg::Func(_)) => {}
                Some(_) if cmd.len() > 1 || i > 0 => {
                    return Err(self.err_at(line, "can't give argument to non-function"));
                }
                Some(_) => {}
            }
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
            cmds,
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
                f if self.lang.funcs.contains(&f) && FUNCS.contains(&f) => Arg::Func(id),
                f if GO_FUNCS.contains(&f) => {
                    return Err(self.err_at(
                        line,
                        &format!(
                            "function {f:?} is not supported by bosun (supported: {})",
                            self.lang.funcs.join(", ")
                        ),
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

/// A value while executing.
#[derive(Debug, Clone)]
enum Val {
    /// No value (a missing map key).
    NoValue,
    /// Untyped `nil`.
    Nil,
    /// A value of the data, or a constant or function result, with its Go
    /// type.
    V(Value, &'static str),
}

impl Val {
    fn type_name(&self) -> &'static str {
        match self {
            Val::NoValue => "<invalid>",
            Val::Nil => "nil",
            Val::V(_, ty) => ty,
        }
    }

    /// Go's `truth`.
    fn truth(&self) -> bool {
        match self {
            Val::NoValue | Val::Nil => false,
            Val::V(v, _) => match v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Object(_) => true,
            },
        }
    }

    fn int(i: i64) -> Val {
        Val::V(Value::from(i), "int")
    }

    fn bool(b: bool) -> Val {
        Val::V(Value::Bool(b), "bool")
    }

    fn string(s: String) -> Val {
        Val::V(Value::String(s), "string")
    }
}

/// A map's keys in Go's printing and `range` order (sorted).
fn sorted_keys(m: &serde_json::Map<String, Value>) -> Vec<&String> {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    keys
}

struct State<'t> {
    name: &'t str,
    model: &'t dyn Model,
    out: String,
    vars: Vec<(String, Val)>,
}

impl State<'_> {
    fn err(&self, pipe: &Pipe, msg: impl std::fmt::Display) -> TemplateError {
        TemplateError(format!(
            "template: {}:{}: executing {:?} at <{}>: {msg}",
            self.name, pipe.line, self.name, pipe.text
        ))
    }

    /// Text/template's printing of a value.
    fn print(&self, v: &Val) -> String {
        let (v, ty) = match v {
            Val::NoValue => return "<no value>".into(),
            Val::Nil => return "<nil>".into(),
            Val::V(v, ty) => (v, *ty),
        };
        if let Some(s) = self.model.print(v, ty) {
            return s;
        }
        match v {
            Value::Null => "<nil>".into(),
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Array(a) => {
                let elem = self.model.elem(ty);
                let items: Vec<String> = a
                    .iter()
                    .map(|x| self.print(&Val::V(x.clone(), elem)))
                    .collect();
                format!("[{}]", items.join(" "))
            }
            Value::Object(m) => {
                let items: Vec<String> = sorted_keys(m)
                    .into_iter()
                    .map(|k| {
                        let x = self
                            .model
                            .key(v, ty, k)
                            .map_or(Val::NoValue, |(x, t)| Val::V(x, t));
                        format!("{k}:{}", self.print(&x))
                    })
                    .collect();
                format!("map[{}]", items.join(" "))
            }
        }
    }

    fn walk_list(&mut self, dot: &Val, nodes: &[Node]) -> Result<(), TemplateError> {
        for n in nodes {
            self.walk(dot, n)?;
        }
        Ok(())
    }

    fn walk(&mut self, dot: &Val, node: &Node) -> Result<(), TemplateError> {
        match node {
            Node::Text(t) => self.out.push_str(t),
            Node::Action(pipe) => {
                let v = self.pipe(dot, pipe)?;
                if pipe.decl.is_empty() {
                    let s = self.print(&v);
                    self.out.push_str(&s);
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
                let v = self.eval_pipe(dot, pipe)?;
                let elems: Vec<(Val, Val)> = match &v {
                    Val::V(Value::Array(a), ty) => {
                        let elem = self.model.elem(ty);
                        a.iter()
                            .enumerate()
                            .map(|(i, x)| (Val::int(i as i64), Val::V(x.clone(), elem)))
                            .collect()
                    }
                    Val::V(Value::Object(m), ty) if !self.model.is_struct(ty) => sorted_keys(m)
                        .into_iter()
                        .map(|k| {
                            let x = self
                                .model
                                .key(&Value::Object(m.clone()), ty, k)
                                .map_or(Val::NoValue, |(x, t)| Val::V(x, t));
                            (Val::string(k.clone()), x)
                        })
                        .collect(),
                    Val::NoValue | Val::Nil | Val::V(Value::Null, _) => Vec::new(),
                    other => {
                        return Err(self.err(
                            pipe,
                            format!("range can't iterate over {}", self.print(other)),
                        ))
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
    fn pipe(&mut self, dot: &Val, pipe: &Pipe) -> Result<Val, TemplateError> {
        let v = self.eval_pipe(dot, pipe)?;
        if let [name] = pipe.decl.as_slice() {
            self.vars.push((name.clone(), v.clone()));
        }
        Ok(v)
    }

    /// Evaluates a pipeline's commands, each given the one before's value
    /// as its last argument.
    fn eval_pipe(&mut self, dot: &Val, pipe: &Pipe) -> Result<Val, TemplateError> {
        let mut piped = None;
        for cmd in &pipe.cmds {
            piped = Some(match &cmd[0] {
                Arg::Func(f) => self.call(dot, pipe, f, &cmd[1..], piped.take())?,
                a => self.eval_arg(dot, pipe, a)?,
            });
        }
        Ok(piped.unwrap_or(Val::NoValue))
    }

    /// An argument of a function (`nil` is a value only there).
    fn func_arg(&mut self, dot: &Val, pipe: &Pipe, a: &Arg) -> Result<Val, TemplateError> {
        match a {
            Arg::Nil => Ok(Val::Nil),
            a => self.eval_arg(dot, pipe, a),
        }
    }

    fn call(
        &mut self,
        dot: &Val,
        pipe: &Pipe,
        name: &str,
        args: &[Arg],
        piped: Option<Val>,
    ) -> Result<Val, TemplateError> {
        // `and` and `or` stop at the first argument that decides.
        if name == "and" || name == "or" {
            if args.is_empty() && piped.is_none() {
                return Err(self.err(
                    pipe,
                    format!("wrong number of args for {name}: want at least 1 got 0"),
                ));
            }
            let mut last = Val::NoValue;
            for a in args {
                last = self.func_arg(dot, pipe, a)?;
                if last.truth() != (name == "and") {
                    return Ok(last);
                }
            }
            return Ok(piped.unwrap_or(last));
        }
        let mut vals = Vec::with_capacity(args.len() + 1);
        for a in args {
            vals.push(self.func_arg(dot, pipe, a)?);
        }
        vals.extend(piped);
        let want = |n: usize| -> Result<(), TemplateError> {
            if vals.len() < n {
                Err(self.err(
                    pipe,
                    format!(
                        "wrong number of args for {name}: want at least {n} got {}",
                        vals.len()
                    ),
                ))
            } else {
                Ok(())
            }
        };
        let fail = |msg: String| self.err(pipe, format!("error calling {name}: {msg}"));
        let json = |v: &Val| match v {
            Val::V(v, _) => v.clone(),
            _ => Value::Null,
        };
        Ok(match name {
            "index" => {
                want(1)?;
                self.index(pipe, vals)?
            }
            "eq" => {
                want(2)?;
                Val::bool(vals[1..].iter().any(|v| json(v) == json(&vals[0])))
            }
            "ne" => {
                want(2)?;
                Val::bool(json(&vals[0]) != json(&vals[1]))
            }
            "lt" | "le" | "gt" | "ge" => {
                want(2)?;
                let o = match (json(&vals[0]), json(&vals[1])) {
                    (Value::Number(x), Value::Number(y)) => x.as_f64().partial_cmp(&y.as_f64()),
                    (Value::String(x), Value::String(y)) => Some(x.cmp(&y)),
                    _ => None,
                }
                .ok_or_else(|| fail("incompatible types for comparison".into()))?;
                use std::cmp::Ordering::*;
                Val::bool(match name {
                    "lt" => o == Less,
                    "le" => o != Greater,
                    "gt" => o == Greater,
                    _ => o != Less,
                })
            }
            "not" => {
                want(1)?;
                Val::bool(!vals[0].truth())
            }
            "len" => {
                want(1)?;
                Val::int(match json(&vals[0]) {
                    Value::String(s) => s.len() as i64,
                    Value::Array(a) => a.len() as i64,
                    Value::Object(m) => m.len() as i64,
                    Value::Null => 0,
                    _ => return Err(fail(format!("len of type {}", vals[0].type_name()))),
                })
            }
            "printf" => {
                want(1)?;
                let format = self.print(&vals[0]);
                Val::string(self.printf(&format, &vals[1..]))
            }
            "print" => Val::string(vals.iter().map(|v| self.print(v)).collect()),
            other => unreachable!("function {other} passed the parser"),
        })
    }

    /// Go's `printf` for `%s %d %v %q %%`.
    fn printf(&self, format: &str, args: &[Val]) -> String {
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
                        .map(|a| serde_json::to_string(&self.print(a)).unwrap_or_default())
                        .unwrap_or_default(),
                ),
                Some(_) => out.push_str(&args.next().map(|a| self.print(a)).unwrap_or_default()),
                None => out.push('%'),
            }
        }
        out
    }

    fn eval_arg(&mut self, dot: &Val, pipe: &Pipe, arg: &Arg) -> Result<Val, TemplateError> {
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
                let v = self.eval_pipe(dot, inner)?;
                self.fields(pipe, v, fields)
            }
            Arg::Func(f) => Err(self.err(pipe, format!("{f} is a function: call it first"))),
            Arg::Str(s) => Ok(Val::string(s.clone())),
            Arg::Int(i) => Ok(Val::int(*i)),
            Arg::Bool(b) => Ok(Val::bool(*b)),
            Arg::Nil => Err(self.err(pipe, "nil is not a command")),
        }
    }

    fn fields(&self, pipe: &Pipe, mut v: Val, fields: &[String]) -> Result<Val, TemplateError> {
        for f in fields {
            v = match v {
                Val::NoValue => Val::NoValue,
                Val::Nil => {
                    return Err(self.err(pipe, format!("nil pointer evaluating interface {{}}.{f}")))
                }
                Val::V(x, ty) => match self.model.field(&x, ty, f) {
                    Ok(Some((x, ty))) => Val::V(x, ty),
                    Ok(None) => Val::NoValue,
                    Err(e) => return Err(self.err(pipe, e)),
                },
            };
        }
        Ok(v)
    }

    /// Go's `index`.
    fn index(&self, pipe: &Pipe, args: Vec<Val>) -> Result<Val, TemplateError> {
        let mut it = args.into_iter();
        let mut item = it.next().unwrap_or(Val::NoValue);
        let fail = |msg: String| self.err(pipe, format!("error calling index: {msg}"));
        for ix in it {
            let (v, ty) = match &item {
                Val::Nil | Val::NoValue => return Err(fail("index of untyped nil".into())),
                Val::V(v, ty) => (v, *ty),
            };
            let at = |i: &Val, len: usize| match i {
                Val::V(Value::Number(n), _) => match n.as_i64() {
                    Some(i) if i >= 0 && (i as usize) < len => Ok(i as usize),
                    _ => Err(fail(format!("index out of range: {n}"))),
                },
                other => Err(fail(format!(
                    "cannot index slice/array with type {}",
                    other.type_name()
                ))),
            };
            item = match v {
                Value::Array(a) => Val::V(a[at(&ix, a.len())?].clone(), self.model.elem(ty)),
                Value::String(s) => Val::int(i64::from(s.as_bytes()[at(&ix, s.len())?])),
                Value::Object(_) if !self.model.is_struct(ty) => match &ix {
                    Val::V(Value::String(k), _) => self
                        .model
                        .key(v, ty, k)
                        .map_or(Val::NoValue, |(x, t)| Val::V(x, t)),
                    other => {
                        return Err(fail(format!(
                            "value has type {}; should be string",
                            other.type_name()
                        )))
                    }
                },
                _ => return Err(fail(format!("can't index item of type {ty}"))),
            };
        }
        Ok(item)
    }
}

// ---------------------------------------------------------------------------
// A ProwJob as template data.

/// The language of Prow's templates over a ProwJob (`plank.job_url_template`,
/// `plank.report_templates`): pipelines and the functions such templates use.
pub const PROWJOB_LANGUAGE: Language = Language {
    funcs: &[
        "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "len", "index", "printf", "print",
    ],
    pipelines: true,
};

/// Parses `text` as a template over a ProwJob ([`PROWJOB_LANGUAGE`]) and
/// executes it over the ProwJob document `data` ([`ProwJobJson`]).
pub fn render_prowjob(name: &str, text: &str, data: &Value) -> Result<String, TemplateError> {
    Template::parse(name, text, &PROWJOB_LANGUAGE)?.execute(data, &ProwJobJson)
}

/// The type of every value of a ProwJob document.
const ANY: &str = "interface {}";

/// A ProwJob document (as JSON) seen by a template as Go sees the ProwJob
/// struct: a field `.Spec.BuildID` is looked up as written, then as
/// `snake_case` (`build_id`), then `lowerCamel` (`startTime`);
/// `ObjectMeta` is `metadata`, and a field missing at a level with
/// `metadata` is looked for there (Go's embedded `ObjectMeta`). A missing
/// field or key is empty; `null` prints as nothing and an object as JSON.
pub struct ProwJobJson;

impl Model for ProwJobJson {
    fn root_type(&self) -> &'static str {
        ANY
    }

    fn field(&self, v: &Value, _: &'static str, name: &str) -> Result<Option<Typed>, String> {
        prowjob_field(v, name).map(|x| Some((x, ANY)))
    }

    fn key(&self, map: &Value, _: &'static str, key: &str) -> Option<Typed> {
        Some((map.get(key).cloned().unwrap_or_default(), ANY))
    }

    fn print(&self, v: &Value, _: &'static str) -> Option<String> {
        match v {
            Value::Null => Some(String::new()),
            Value::Object(_) => Some(v.to_string()),
            _ => None,
        }
    }
}

/// Go's field name as `snake_case` (`BuildID` is `build_id`).
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

/// `v`'s field `name` (see [`ProwJobJson`] for the names tried).
fn prowjob_field(v: &Value, name: &str) -> Result<Value, String> {
    let m = match v {
        Value::Object(m) => m,
        Value::Null => return Err(format!("nil pointer evaluating field {name}")),
        Value::String(_) => return Err(cant_evaluate(name, "string")),
        Value::Number(_) => return Err(cant_evaluate(name, "float64")),
        Value::Bool(_) => return Err(cant_evaluate(name, "bool")),
        Value::Array(_) => return Err(cant_evaluate(name, "[]interface {}")),
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
        if let Ok(x) = prowjob_field(meta, name) {
            if !x.is_null() {
                return Ok(x);
            }
        }
    }
    Ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ROOT: &str = "map[string]interface {}";
    const REFS: &str = "*t.Refs";
    const PULLS: &str = "[]t.Pull";
    const PULL: &str = "t.Pull";

    /// `{"Refs": *Refs}`, Refs and Pull structs whose fields are their keys.
    struct Test;

    impl Model for Test {
        fn root_type(&self) -> &'static str {
            ROOT
        }

        fn field(&self, v: &Value, ty: &'static str, name: &str) -> Result<Option<Typed>, String> {
            match ty {
                ROOT => Ok(self.key(v, ty, name)),
                REFS | PULL => match v.get(name) {
                    Some(x @ Value::Array(_)) => Ok(Some((x.clone(), PULLS))),
                    Some(x @ Value::Number(_)) => Ok(Some((x.clone(), "int"))),
                    Some(x) => Ok(Some((x.clone(), "string"))),
                    None => Err(cant_evaluate(name, ty)),
                },
                _ => Err(cant_evaluate(name, ty)),
            }
        }

        fn is_struct(&self, ty: &'static str) -> bool {
            matches!(ty, REFS | PULL)
        }

        fn elem(&self, ty: &'static str) -> &'static str {
            match ty {
                ROOT => REFS,
                PULLS => PULL,
                _ => "interface {}",
            }
        }
    }

    const INDEX_ONLY: Language = Language {
        funcs: &["index"],
        pipelines: false,
    };

    const ALL: Language = Language {
        funcs: FUNCS,
        pipelines: true,
    };

    fn data() -> Value {
        json!({"Refs": {"Org": "jenkins-x", "Repo": "lighthouse", "BaseRef": "master",
            "Pulls": [{"Number": 813, "SHA": "dd64c73"}, {"Number": 814, "SHA": "abcdefg"}]}})
    }

    fn run_in(lang: &Language, t: &str) -> Result<String, TemplateError> {
        Template::parse("p", t, lang)?.execute(&data(), &Test)
    }

    fn run(t: &str) -> Result<String, TemplateError> {
        run_in(&INDEX_ONLY, t)
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
    fn maps_and_missing_keys_print_as_go_prints_them() {
        assert_eq!(run("{{ .Missing }}").unwrap(), "<no value>");
        assert_eq!(run("{{ index . \"Missing\" }}").unwrap(), "<no value>");
        assert_eq!(
            run("{{ range $k, $v := . }}{{ $k }}={{ $v.Org }}{{ end }}").unwrap(),
            "Refs=jenkins-x"
        );
        assert_eq!(run("{{ (index .Refs.Pulls 1).SHA }}").unwrap(), "abcdefg");
        assert_eq!(
            run("{{ index .Refs \"Org\" }}").unwrap_err().0,
            "template: p:1: executing \"p\" at <index .Refs \"Org\">: error calling index: can't index item of type *t.Refs"
        );
        assert_eq!(
            run("{{ .Refs.Nope }}").unwrap_err().0,
            "template: p:1: executing \"p\" at <.Refs.Nope>: can't evaluate field Nope in type *t.Refs"
        );
    }

    #[test]
    fn the_language_allows_functions_and_pipelines() {
        let t = |src: &str| run_in(&ALL, src).unwrap();
        assert_eq!(t("{{ .Refs.Org | len }}"), "9");
        assert_eq!(
            t("{{ .Refs.Pulls | len | printf \"%d pulls\" }}"),
            "2 pulls"
        );
        assert_eq!(
            t("{{ printf \"%s/%s %q\" .Refs.Org .Refs.Repo \"x\" }}"),
            "jenkins-x/lighthouse \"x\""
        );
        assert_eq!(
            t("{{ if eq .Refs.BaseRef \"main\" \"master\" }}y{{ end }}"),
            "y"
        );
        assert_eq!(t("{{ if and .Refs (not .Missing) }}y{{ end }}"), "y");
        assert_eq!(t("{{ or .Missing .Refs.Org }}"), "jenkins-x");
        assert_eq!(
            t("{{ and .Refs.Org \"\" }}|{{ lt 1 2 }} {{ ge \"a\" \"b\" }}"),
            "|true false"
        );
        assert_eq!(t("{{ print 1 \"a\" }}{{ ne 1 2 }}"), "1atrue");
        let e = run_in(&ALL, "{{ .Refs.Org | .Refs.Repo }}").unwrap_err();
        assert!(e.0.ends_with("can't give argument to non-function"), "{e}");
        let lang = Language {
            funcs: &["index", "len"],
            pipelines: true,
        };
        assert!(run_in(&lang, "{{ printf \"x\" }}")
            .unwrap_err()
            .0
            .ends_with("function \"printf\" is not supported by bosun (supported: index, len)"));
    }

    /// The ProwJob model: Go names over JSON keys, `ObjectMeta` embedded,
    /// missing fields empty (as the daemon's job URLs and crier's report
    /// templates see a run).
    #[test]
    fn prowjob_documents_as_go_sees_them() {
        let data = serde_json::json!({
            "metadata": {"name": "3f2a", "labels": {"prow.k8s.io/type": "presubmit"}},
            "spec": {"job": "pull-unit", "refs": {"org": "acme", "pulls": [{"number": 42}]}},
            "status": {"build_id": "1700", "startTime": "2026-03-02T10:00:00Z"}
        });
        let t = |src: &str| render_prowjob("t", src, &data);
        assert_eq!(
            t("{{.Spec.Job}}/{{.Status.BuildID}}/{{.Status.StartTime}}/{{.Name}}/{{.ObjectMeta.Name}}")
                .unwrap(),
            "pull-unit/1700/2026-03-02T10:00:00Z/3f2a/3f2a"
        );
        assert_eq!(
            t(r#"{{index .ObjectMeta.Labels "prow.k8s.io/type"}}|{{.Spec.Nope}}|{{with index .Spec.Refs.Pulls 0}}{{.Number}}{{end}}"#)
                .unwrap(),
            "presubmit||42"
        );
        assert!(t("{{.Spec.Nope.Deeper}}").is_err());
    }
}
