//! Writes `docs/config-reference.md`, the configuration reference, from the
//! doc comments of the configuration types in `src/types.rs`:
//!
//! ```text
//! cargo run -p bosun-config --example config_reference             # write it
//! cargo run -p bosun-config --example config_reference -- --check  # exit 1 if stale
//! ```
//!
//! `tests/it/config_reference.rs` fails when the committed page differs from
//! what this writes, and checks what it reads against serde's own field and
//! variant lists.
//!
//! The reader is line-based (no Rust parser is a dependency of this crate):
//! it reads rustfmt-formatted source, keeps the brace depth of every line
//! (strings, raw strings, character literals and comments skipped), and at
//! depth 0 reads `pub struct` and `pub enum` items with their `///` docs and
//! `#[serde(...)]` attributes; inside them, at depth 1, their fields and
//! variants. What it does not understand (an undocumented field or variant,
//! `#[serde(flatten)]`, an unknown `rename_all`, a type it cannot name) is an
//! error, never a silently wrong page.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::process::ExitCode;

/// A configuration type read from the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The Rust name.
    pub name: String,
    /// Its doc comment (Markdown, lines joined with `\n`).
    pub doc: String,
    /// What it is.
    pub kind: Kind,
}

/// The shape of an [`Item`].
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A struct with named fields: a YAML mapping.
    Struct(Vec<Field>),
    /// An enum: one of its variants' names.
    Enum(Vec<Variant>),
    /// A unit or tuple struct with its own deserializer (a scalar).
    Value,
}

/// A field of a struct, as YAML spells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The YAML key (`rename` and `rename_all` applied).
    pub key: String,
    /// The Rust type as written.
    pub ty: String,
    /// Its doc comment.
    pub doc: String,
}

/// A variant of an enum, as YAML spells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// The YAML value (`rename` and `rename_all` applied).
    pub value: String,
    /// Its doc comment.
    pub doc: String,
}

/// The types the reference starts from, with their section titles; every
/// other type is documented because one of these reaches it.
pub const ROOTS: [(&str, &str); 7] = [
    ("ProwConfig", "`config.yaml`"),
    ("JobBase", "Every job"),
    ("PeriodicFields", "Periodics"),
    ("PresubmitFields", "Presubmits"),
    ("PostsubmitFields", "Postsubmits"),
    ("Preset", "Presets"),
    ("TriggerConfigFile", "Lighthouse `triggers.yaml`"),
];

/// The Kubernetes API reference the `k8s-openapi` types link to (the
/// version of its enabled feature, `v1_33`).
const K8S_REFERENCE: &str = "https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.33/";

// ---------------------------------------------------------------------------
// Reading the source

/// The brace depth at the start of each line of `src`, outside strings,
/// raw strings, character literals and comments.
fn line_depths(src: &str) -> Vec<usize> {
    let chars: Vec<char> = src.chars().collect();
    let mut depths = vec![0];
    let mut depth: usize = 0;
    let mut i = 0;
    let mut block_comment = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            depths.push(depth);
            i += 1;
            continue;
        }
        if block_comment > 0 {
            if c == '*' && next == Some('/') {
                block_comment -= 1;
                i += 2;
            } else if c == '/' && next == Some('*') {
                block_comment += 1;
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        match c {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                block_comment = 1;
                i += 2;
            }
            'r' if matches!(next, Some('#') | Some('"'))
                && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while chars.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if chars.get(j) != Some(&'"') {
                    i += 1;
                    continue;
                }
                j += 1;
                // Up to the closing quote followed by as many hashes.
                loop {
                    match chars.get(j) {
                        None => break,
                        Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                            j += 1 + hashes;
                            break;
                        }
                        Some('\n') => {
                            depths.push(depth);
                            j += 1;
                        }
                        Some(_) => j += 1,
                    }
                }
                i = j;
            }
            '"' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '"' {
                    if chars[j] == '\\' {
                        j += 1;
                    }
                    if chars.get(j) == Some(&'\n') {
                        depths.push(depth);
                    }
                    j += 1;
                }
                i = j + 1;
            }
            '\'' => {
                // A character literal ('x', '\n', '\u{7f}'), else a lifetime.
                if next == Some('\\') {
                    let mut j = i + 2;
                    while j < chars.len() && chars[j] != '\'' {
                        j += 1;
                    }
                    i = j + 1;
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            '{' => {
                depth += 1;
                i += 1;
            }
            '}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    depths
}

/// The text of a `///` line, else `None`.
fn doc_line(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t.strip_prefix("///")?;
    if rest.starts_with('/') {
        return None;
    }
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// The value of `key = "value"` in a `#[serde(...)]` attribute.
fn serde_value(attr: &str, key: &str) -> Option<String> {
    let body = serde_body(attr)?;
    split_top(body, ',').into_iter().find_map(|part| {
        let (k, v) = part.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Whether a `#[serde(...)]` attribute holds the bare word `word`.
fn serde_flag(attr: &str, word: &str) -> bool {
    serde_body(attr).is_some_and(|b| split_top(b, ',').iter().any(|p| p.trim() == word))
}

fn serde_body(attr: &str) -> Option<&str> {
    attr.trim()
        .strip_prefix("#[serde(")?
        .strip_suffix(")]")
        .map(str::trim)
}

/// `s` split at `sep` outside `<>`, `()`, `[]` and quotes.
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '<' | '(' | '[' if !quoted => depth += 1,
            '>' | ')' | ']' if !quoted => depth -= 1,
            c if c == sep && depth == 0 && !quoted => {
                out.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A Rust identifier as serde names it under `rename_all` (`None`: as written).
fn renamed(ident: &str, rename_all: Option<&str>, variant: bool) -> Result<String, String> {
    let ident = ident.strip_prefix("r#").unwrap_or(ident);
    // Variants are CamelCase; fields are snake_case.
    let words: Vec<String> = if variant {
        let mut words = Vec::new();
        let mut cur = String::new();
        for c in ident.chars() {
            if c.is_uppercase() && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            cur.extend(c.to_lowercase());
        }
        words.push(cur);
        words
    } else {
        ident.split('_').map(str::to_string).collect()
    };
    Ok(match rename_all {
        None => ident.to_string(),
        Some("lowercase") if variant => ident.to_lowercase(),
        Some("lowercase") => ident.to_string(),
        Some("snake_case") => words.join("_"),
        Some("kebab-case") => words.join("-"),
        Some("camelCase") => words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    w.clone()
                } else {
                    let mut c = w.chars();
                    c.next()
                        .map(|f| f.to_uppercase().chain(c).collect())
                        .unwrap_or_default()
                }
            })
            .collect(),
        Some(other) => return Err(format!("rename_all = {other:?} is not supported")),
    })
}

/// Reads the `pub struct` and `pub enum` items of `src`, with their docs,
/// fields and variants; also returns the names imported from
/// `k8s_openapi::api::core::v1`.
pub fn parse(src: &str) -> Result<(Vec<Item>, BTreeSet<String>), String> {
    let lines: Vec<&str> = src.lines().collect();
    let depths = line_depths(src);
    let mut items = Vec::new();
    let mut core_v1 = BTreeSet::new();
    let mut doc: Vec<&str> = Vec::new();
    let mut attrs: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim();
        if depths[i] != 0 {
            i += 1;
            continue;
        }
        if let Some(d) = doc_line(line) {
            doc.push(d);
            i += 1;
            continue;
        }
        if t.starts_with("#[") {
            let (attr, next) = attribute(&lines, i);
            attrs.push(attr);
            i = next;
            continue;
        }
        if t.starts_with("use k8s_openapi::api::core::v1::") {
            let mut text = t.to_string();
            while !text.ends_with(';') && i + 1 < lines.len() {
                i += 1;
                text.push_str(lines[i].trim());
            }
            let names = text
                .trim_start_matches("use k8s_openapi::api::core::v1::")
                .trim_end_matches(';')
                .trim_matches(|c| c == '{' || c == '}');
            core_v1.extend(
                names
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
            );
        }
        let header = t
            .strip_prefix("pub struct ")
            .map(|r| (r, false))
            .or_else(|| t.strip_prefix("pub enum ").map(|r| (r, true)));
        if let Some((rest, is_enum)) = header {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after = rest[name.len()..].trim();
            if after.starts_with('<') {
                // Generic types are not configuration; naming one in a
                // field is an error (an unknown type).
                doc.clear();
                attrs.clear();
                i += 1;
                continue;
            }
            let rename_all = attrs.iter().find_map(|a| serde_value(a, "rename_all"));
            let item_doc = doc.join("\n");
            let kind = if after.starts_with('{') {
                let (members, end) = members(&lines, &depths, i + 1)?;
                i = end;
                if is_enum {
                    Kind::Enum(variants(&name, members, rename_all.as_deref())?)
                } else {
                    Kind::Struct(fields(&name, members, rename_all.as_deref())?)
                }
            } else {
                Kind::Value
            };
            items.push(Item {
                name,
                doc: item_doc,
                kind,
            });
        }
        doc.clear();
        attrs.clear();
        i += 1;
    }
    Ok((items, core_v1))
}

/// The attribute starting at line `i` (it may span lines) and the line after it.
fn attribute(lines: &[&str], mut i: usize) -> (String, usize) {
    let mut text = lines[i].trim().to_string();
    let open = |s: &str| s.matches('[').count() as i64 - s.matches(']').count() as i64;
    while open(&text) > 0 && i + 1 < lines.len() {
        i += 1;
        text.push(' ');
        text.push_str(lines[i].trim());
    }
    (text, i + 1)
}

/// One member (field or variant) of a struct or enum body: its docs, its
/// attributes and its declaration (joined over lines).
struct Member {
    line: usize,
    doc: Vec<String>,
    attrs: Vec<String>,
    decl: String,
}

/// The members of the body starting at line `start`, and the line of its
/// closing brace.
fn members(lines: &[&str], depths: &[usize], start: usize) -> Result<(Vec<Member>, usize), String> {
    let mut out = Vec::new();
    let (mut doc, mut attrs) = (Vec::new(), Vec::new());
    let mut i = start;
    while i < lines.len() {
        let t = lines[i].trim();
        if depths[i] == 1 && t.starts_with('}') {
            return Ok((out, i));
        }
        if depths[i] > 1 || t.is_empty() || (t.starts_with("//") && doc_line(t).is_none()) {
            i += 1;
            continue;
        }
        if let Some(d) = doc_line(t) {
            doc.push(d.to_string());
            i += 1;
            continue;
        }
        if t.starts_with("#[") {
            let (attr, next) = attribute(lines, i);
            attrs.push(attr);
            i = next;
            continue;
        }
        // A declaration: up to its `,` (or its `{` for a struct variant),
        // possibly over several lines at this depth.
        let line = i;
        let mut decl = t.to_string();
        while !(decl.ends_with(',') || decl.ends_with('{') || decl.ends_with('}'))
            && i + 1 < lines.len()
            && depths[i + 1] == 1
        {
            i += 1;
            decl.push(' ');
            decl.push_str(lines[i].trim());
        }
        out.push(Member {
            line: line + 1,
            doc: std::mem::take(&mut doc),
            attrs: std::mem::take(&mut attrs),
            decl,
        });
        i += 1;
    }
    Err("unterminated item".into())
}

fn fields(
    owner: &str,
    members: Vec<Member>,
    rename_all: Option<&str>,
) -> Result<Vec<Field>, String> {
    let mut out = Vec::new();
    for m in members {
        let at = || format!("line {}: {owner}", m.line);
        if m.attrs
            .iter()
            .any(|a| serde_flag(a, "skip") || serde_flag(a, "skip_deserializing"))
        {
            continue;
        }
        if m.attrs.iter().any(|a| serde_flag(a, "flatten")) {
            return Err(format!("{}: #[serde(flatten)] is not supported", at()));
        }
        let decl = m.decl.trim_end_matches(',');
        let Some(rest) = decl.strip_prefix("pub ") else {
            return Err(format!("{}: a field that is not `pub`: {decl}", at()));
        };
        let Some((ident, ty)) = rest.split_once(':') else {
            return Err(format!("{}: cannot read the field {decl:?}", at()));
        };
        let ident = ident.trim();
        if m.doc.is_empty() {
            return Err(format!("{}.{ident} has no doc comment", at()));
        }
        let key = match m.attrs.iter().find_map(|a| serde_value(a, "rename")) {
            Some(k) => k,
            None => renamed(ident, rename_all, false)?,
        };
        out.push(Field {
            key,
            ty: ty.trim().to_string(),
            doc: m.doc.join("\n"),
        });
    }
    Ok(out)
}

fn variants(
    owner: &str,
    members: Vec<Member>,
    rename_all: Option<&str>,
) -> Result<Vec<Variant>, String> {
    let mut out = Vec::new();
    for m in members {
        if m.attrs
            .iter()
            .any(|a| serde_flag(a, "skip") || serde_flag(a, "skip_deserializing"))
        {
            continue;
        }
        let ident: String = m
            .decl
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() {
            return Err(format!(
                "line {}: {owner}: cannot read the variant {:?}",
                m.line, m.decl
            ));
        }
        if m.doc.is_empty() {
            return Err(format!(
                "line {}: {owner}::{ident} has no doc comment",
                m.line
            ));
        }
        let value = match m.attrs.iter().find_map(|a| serde_value(a, "rename")) {
            Some(v) => v,
            None => renamed(&ident, rename_all, true)?,
        };
        out.push(Variant {
            value,
            doc: m.doc.join("\n"),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Types

/// A Rust type: a (last path segment) name and its generic arguments.
#[derive(Debug, Clone, PartialEq)]
struct Ty {
    name: String,
    args: Vec<Ty>,
}

fn parse_ty(s: &str) -> Result<Ty, String> {
    let s = s.trim();
    let (head, args) = match s.find('<') {
        Some(open) => {
            let inner = s[open + 1..]
                .strip_suffix('>')
                .ok_or_else(|| format!("cannot read the type {s:?}"))?;
            let args = split_top(inner, ',')
                .into_iter()
                .filter(|a| !a.trim().is_empty())
                .map(parse_ty)
                .collect::<Result<_, _>>()?;
            (&s[..open], args)
        }
        None => (s, Vec::new()),
    };
    let name = head.rsplit("::").next().unwrap_or(head).trim().to_string();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(format!("cannot read the type {s:?}"));
    }
    Ok(Ty { name, args })
}

/// What the page says of types and which of `items` they name.
struct Namer<'a> {
    items: &'a BTreeMap<String, &'a Item>,
    core_v1: &'a BTreeSet<String>,
}

impl Namer<'_> {
    /// `ty` in words, with links; the local items it names are added to `uses`.
    fn describe(&self, ty: &Ty, uses: &mut Vec<String>) -> Result<String, String> {
        let arg = |n: usize| {
            ty.args
                .get(n)
                .ok_or_else(|| format!("{} needs a type argument", ty.name))
        };
        Ok(match ty.name.as_str() {
            "Option" | "Box" | "Arc" => self.describe(arg(0)?, uses)?,
            "Vec" => format!("list of {}", self.describe(arg(0)?, uses)?),
            "BTreeMap" | "HashMap" => format!(
                "map of {} to {}",
                self.describe(arg(0)?, uses)?,
                self.describe(arg(1)?, uses)?
            ),
            "String" => "string".into(),
            "bool" => "boolean".into(),
            "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" => {
                "integer".into()
            }
            "f32" | "f64" => "number".into(),
            "GoDuration" => "duration".into(),
            "FreeForm" | "Value" => "object".into(),
            "Ignored" => "any".into(),
            name if self.items.contains_key(name) => {
                uses.push(name.to_string());
                format!("[`{name}`](#{})", anchor(name))
            }
            name if self.core_v1.contains(name) => {
                format!("[{name}]({K8S_REFERENCE}#{}-v1-core)", name.to_lowercase())
            }
            name => {
                return Err(format!(
                    "the type {name} is unknown to the reference's generator"
                ))
            }
        })
    }
}

/// The anchor of an item's section: a root's title, else its heading
/// (`### \`Name\``) as GitHub makes it.
fn anchor(name: &str) -> String {
    match ROOTS.iter().find(|(root, _)| *root == name) {
        Some((_, title)) => title_anchor(title),
        None => name.to_lowercase(),
    }
}

// ---------------------------------------------------------------------------
// Rendering

/// Rustdoc's intra-doc links (`` [`X`] ``, `` [`X::y`] ``) as code: on the
/// page they point nowhere.
fn markdown(doc: &str) -> String {
    let mut out = String::new();
    let mut rest = doc;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find("`]") {
            Some(end) if !after[end + 2..].starts_with('(') => {
                out.push_str(&after[..end + 1]);
                rest = &after[end + 2..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A doc comment as one table cell: paragraphs separated by `<br>`, `|` escaped.
fn cell(doc: &str) -> String {
    markdown(doc)
        .split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("<br>")
        .replace('|', "\\|")
}

/// The whole page for the source `src` of `types.rs`.
pub fn render(src: &str) -> Result<String, String> {
    let (items, core_v1) = parse(src)?;
    let by_name: BTreeMap<String, &Item> = items.iter().map(|i| (i.name.clone(), i)).collect();
    let namer = Namer {
        items: &by_name,
        core_v1: &core_v1,
    };
    // The items in the order the page shows them: roots first, then every
    // item they reach, breadth first.
    let mut order: Vec<&Item> = Vec::new();
    let mut queue: VecDeque<String> = VecDeque::new();
    for (root, _) in ROOTS {
        let item = by_name
            .get(root)
            .ok_or_else(|| format!("the root type {root} is not in types.rs"))?;
        if !matches!(item.kind, Kind::Struct(_)) {
            return Err(format!("the root type {root} is not a struct"));
        }
        queue.push_back(root.to_string());
    }
    let mut seen: BTreeSet<String> = queue.iter().cloned().collect();
    // Who uses each item: `Owner.key`.
    let mut used_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut tables: BTreeMap<String, String> = BTreeMap::new();
    while let Some(name) = queue.pop_front() {
        let item = by_name[&name];
        order.push(item);
        let mut body = String::new();
        match &item.kind {
            Kind::Struct(fields) => {
                body.push_str("| key | type | description |\n|---|---|---|\n");
                for f in fields {
                    let mut uses = Vec::new();
                    let ty = parse_ty(&f.ty)
                        .and_then(|t| namer.describe(&t, &mut uses))
                        .map_err(|e| format!("{name}.{}: {e}", f.key))?;
                    for u in uses {
                        used_by.entry(u.clone()).or_default().push(format!(
                            "[`{name}`](#{}).`{}`",
                            anchor(&name),
                            f.key
                        ));
                        if seen.insert(u.clone()) {
                            queue.push_back(u);
                        }
                    }
                    body.push_str(&format!("| `{}` | {ty} | {} |\n", f.key, cell(&f.doc)));
                }
            }
            Kind::Enum(variants) => {
                body.push_str("One of:\n\n| value | meaning |\n|---|---|\n");
                for v in variants {
                    body.push_str(&format!("| `{}` | {} |\n", v.value, cell(&v.doc)));
                }
            }
            Kind::Value => {}
        }
        tables.insert(name, body);
    }

    let mut page = String::new();
    page.push_str(
        "<!-- Generated from crates/bosun-config/src/types.rs by \
         `cargo run -p bosun-config --example config_reference`; do not edit. -->\n\n",
    );
    page.push_str(
        "# Configuration reference\n\n\
         Every key bosun reads from Prow's `config.yaml`, from job-config files and from \
         in-repo configuration, generated from the doc comments of the configuration types \
         (`crates/bosun-config/src/types.rs`), so it says what the code reads. Keys are \
         Prow's; bosun matches them as Prow does, up to case. Keys marked **bosun** are \
         bosun's additions (Prow's `checkconfig` would call them unknown) and keys marked \
         **Lighthouse** come from Lighthouse's in-repo format. A key bosun does not know is \
         a warning at its line. How the files are found, and what bosun checks, is in \
         [config.md](config.md); schedules in [schedules.md](schedules.md).\n\n\
         Types: *duration* is a Go duration (`90s`, `1h30m`); *object* is free-form YAML; \
         *any* is accepted and not read by bosun (unless its description says who reads it); \
         Kubernetes types link to the Kubernetes API reference.\n\n\
         A job-config file holds `periodics` (a list of jobs), `presubmits` and \
         `postsubmits` (maps of `ORG/REPO` to lists of jobs) and `presets`; every job takes \
         the keys of [Every job](#every-job) and those of its kind.\n\n",
    );
    page.push_str("## Contents\n\n");
    for (_, title) in ROOTS {
        page.push_str(&format!("- [{title}](#{})\n", title_anchor(title)));
    }
    page.push_str("- [Types](#types)\n\n");
    for (root, title) in ROOTS {
        let item = by_name[root];
        page.push_str(&format!("## {title}\n\n"));
        page.push_str(&format!("`{root}`: {}\n\n", markdown(&item.doc)));
        page.push_str(&tables[root]);
        page.push('\n');
    }
    page.push_str(
        "## Types\n\nThe types the keys above refer to, in the order they are first met.\n\n",
    );
    for item in order.iter().skip(ROOTS.len()) {
        page.push_str(&format!("### `{}`\n\n", item.name));
        if let Some(users) = used_by.get(&item.name) {
            let mut users = users.clone();
            users.dedup();
            page.push_str(&format!("Used by {}.\n\n", users.join(", ")));
        }
        if !item.doc.is_empty() {
            page.push_str(&markdown(&item.doc));
            page.push_str("\n\n");
        }
        let body = &tables[&item.name];
        if !body.is_empty() {
            page.push_str(body);
            page.push('\n');
        }
    }
    // One newline at the end.
    while page.ends_with("\n\n") {
        page.pop();
    }
    Ok(page)
}

/// The anchor GitHub makes for a section title: lower case, punctuation
/// dropped, spaces as `-`.
fn title_anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `crates/bosun-config/src/types.rs` and `docs/config-reference.md`.
pub fn paths() -> (PathBuf, PathBuf) {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir.ancestors().nth(2).unwrap_or(&crate_dir);
    (
        crate_dir.join("src/types.rs"),
        root.join("docs/config-reference.md"),
    )
}

fn main() -> ExitCode {
    let check = std::env::args().skip(1).any(|a| a == "--check");
    let (types, page) = paths();
    let src = match std::fs::read_to_string(&types) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: {e}", types.display());
            return ExitCode::FAILURE;
        }
    };
    let text = match render(&src) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{}: {e}", types.display());
            return ExitCode::FAILURE;
        }
    };
    if check {
        let old = std::fs::read_to_string(&page).unwrap_or_default();
        if old != text {
            eprintln!(
                "{} is stale: run `cargo run -p bosun-config --example config_reference`",
                page.display()
            );
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    if let Err(e) = std::fs::write(&page, text) {
        eprintln!("{}: {e}", page.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", page.display());
    ExitCode::SUCCESS
}
