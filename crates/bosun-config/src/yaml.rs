//! A YAML document tree that remembers where every node came from, and a serde
//! deserializer over it.
//!
//! Why not `serde_yaml` or a similar crate: diagnostics must name the file, line and
//! column of *any* field (not only of the first syntax error), unknown fields are
//! warnings that must point at the offending key, one bad job must not hide the
//! others in the same file, and duplicate keys are errors. That needs a tree with a
//! position on every node, which we build from `saphyr-parser`'s event stream; the
//! tree borrows scalars from the source text, so building it costs little more than
//! the event scan itself.
//!
//! Keys are matched to struct fields as Prow matches them ([`from_node_as_go`]):
//! Prow decodes through Go's `encoding/json`, where `NAME:` is the field `name`.
//! Such keys are read, and noted so the loader can warn about them.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

/// A position in a source file: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash, serde::Serialize)]
pub struct Mark {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
}

impl Mark {
    fn from_span(span: &Span) -> Mark {
        Mark {
            line: span.start.line() as u32,
            col: span.start.col() as u32 + 1,
        }
    }
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    /// Where the node starts.
    pub mark: Mark,
    /// Its content.
    pub value: Value<'a>,
}

/// The content of a node.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// A scalar; `plain` is false for quoted and block scalars and for `!!str`,
    /// whose text is never read as a null, a boolean or a number.
    Scalar {
        /// The text, borrowed from the source where possible.
        text: Cow<'a, str>,
        /// Plain (unquoted, untagged) scalars may be nulls, booleans or numbers.
        plain: bool,
    },
    /// A sequence.
    Seq(Vec<Node<'a>>),
    /// A mapping, in source order (keys are unique: duplicates are a load error;
    /// only a value merged from several keys, see [`Node::go_field`], may repeat one).
    Map(Vec<(Node<'a>, Node<'a>)>),
}

/// A YAML syntax or structure error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// Where it was found.
    pub mark: Mark,
    /// What is wrong.
    pub message: String,
}

impl<'a> Node<'a> {
    /// The scalar text of this node, if it is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// True for `~`, `null`, `Null`, `NULL` and the empty plain scalar.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true } if is_null_text(text))
    }

    /// The value of `key` in this mapping.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The entries of this mapping (empty for anything else).
    pub fn entries(&self) -> &[(Node<'a>, Node<'a>)] {
        match &self.value {
            Value::Map(entries) => entries,
            _ => &[],
        }
    }

    /// The items of this sequence (empty for anything else).
    pub fn items(&self) -> &[Node<'a>] {
        match &self.value {
            Value::Seq(items) => items,
            _ => &[],
        }
    }

    /// A short name of the node's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match &self.value {
            Value::Scalar { .. } if self.is_null() => "null",
            Value::Scalar { .. } => "a scalar",
            Value::Seq(_) => "a sequence",
            Value::Map(_) => "a mapping",
        }
    }
}

fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// Parses every document of a YAML stream. An empty stream has no documents.
pub fn parse_documents(src: &str) -> Result<Vec<Node<'_>>, YamlError> {
    let mut parser = Parser::new_from_str(src);
    let mut builder = Builder::default();
    while let Some(event) = parser.next_event() {
        let (event, span) = event.map_err(|e| {
            let mut mark = Mark {
                line: e.marker().line() as u32,
                col: e.marker().col() as u32 + 1,
            };
            if e.info().contains("tab") {
                mark = first_tab_indent(src, mark.line).unwrap_or(mark);
            }
            YamlError {
                mark,
                message: e.info().to_string(),
            }
        })?;
        builder.events += 1;
        builder.on_event(event, &span)?;
    }
    Ok(builder.docs)
}

/// The parser reports a tab in indentation where the scalar before it started;
/// the reader wants the line with the tab.
fn first_tab_indent(src: &str, from_line: u32) -> Option<Mark> {
    src.lines()
        .enumerate()
        .skip(from_line.saturating_sub(1) as usize)
        .find_map(|(i, line)| {
            let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
            line[..indent].find('\t').map(|col| Mark {
                line: i as u32 + 1,
                col: line[..col].chars().count() as u32 + 1,
            })
        })
}

enum Frame<'a> {
    Seq(Mark, usize, Vec<Node<'a>>),
    Map(Mark, usize, Vec<(Node<'a>, Node<'a>)>, Option<Node<'a>>),
}

#[derive(Default)]
struct Builder<'a> {
    stack: Vec<Frame<'a>>,
    /// Anchored nodes with their sizes in nodes.
    anchors: Vec<Option<(Node<'a>, usize)>>,
    docs: Vec<Node<'a>>,
    /// Events seen so far.
    events: usize,
    /// Nodes created by expanding aliases so far.
    expanded: usize,
}

/// Aliases may expand to at most this many nodes plus [`ALIAS_RATIO`] times the
/// events of the document: enough for any real configuration, and a "billion
/// laughs" document (nested aliases, exponential expansion) is refused early.
const ALIAS_BUDGET: usize = 100_000;
const ALIAS_RATIO: usize = 10;

fn subtree_size(node: &Node<'_>) -> usize {
    match &node.value {
        Value::Scalar { .. } => 1,
        Value::Seq(items) => 1 + items.iter().map(subtree_size).sum::<usize>(),
        Value::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| subtree_size(k) + subtree_size(v))
                .sum::<usize>()
        }
    }
}

/// Mappings with more keys than this use a hash set to find duplicates.
const LINEAR_DUP_SCAN: usize = 16;

impl<'a> Builder<'a> {
    fn on_event(&mut self, event: Event<'a>, span: &Span) -> Result<(), YamlError> {
        let mark = Mark::from_span(span);
        match event {
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd
            | Event::Nothing => Ok(()),
            Event::Alias(id) => {
                let size = match self.anchors.get(id) {
                    Some(Some((_, size))) => *size,
                    _ => {
                        return Err(YamlError {
                            mark,
                            message: "alias refers to an unknown or unfinished anchor".into(),
                        })
                    }
                };
                self.expanded += size;
                if self.expanded > ALIAS_BUDGET + ALIAS_RATIO * self.events {
                    return Err(YamlError {
                        mark,
                        message: format!(
                            "excessive aliasing: aliases expand to more than {} nodes",
                            ALIAS_BUDGET + ALIAS_RATIO * self.events
                        ),
                    });
                }
                let node = self.anchors[id].as_ref().expect("checked").0.clone();
                self.push(Node { mark, ..node }, 0)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == ScalarStyle::Plain
                    && !tag
                        .as_ref()
                        .is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                self.push(
                    Node {
                        mark,
                        value: Value::Scalar { text, plain },
                    },
                    anchor,
                )
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Seq(mark, anchor, Vec::new()));
                Ok(())
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map(mark, anchor, Vec::new(), None));
                Ok(())
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame::Seq(mark, anchor, items)) => self.push(
                    Node {
                        mark,
                        value: Value::Seq(items),
                    },
                    anchor,
                ),
                _ => Err(YamlError {
                    mark,
                    message: "unbalanced sequence end".into(),
                }),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Map(mark, anchor, entries, _)) => {
                    let entries = finish_map(entries)?;
                    self.push(
                        Node {
                            mark,
                            value: Value::Map(entries),
                        },
                        anchor,
                    )
                }
                _ => Err(YamlError {
                    mark,
                    message: "unbalanced mapping end".into(),
                }),
            },
        }
    }

    fn push(&mut self, node: Node<'a>, anchor: usize) -> Result<(), YamlError> {
        if anchor > 0 {
            if self.anchors.len() <= anchor {
                self.anchors.resize(anchor + 1, None);
            }
            let size = subtree_size(&node);
            self.anchors[anchor] = Some((node.clone(), size));
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq(_, _, items)) => items.push(node),
            Some(Frame::Map(_, _, entries, key)) => match key.take() {
                None => {
                    if !matches!(node.value, Value::Scalar { .. }) {
                        return Err(YamlError {
                            mark: node.mark,
                            message: format!("mapping keys must be scalars, found {}", node.kind()),
                        });
                    }
                    *key = Some(node);
                }
                Some(k) => entries.push((k, node)),
            },
        }
        Ok(())
    }
}

/// Checks for duplicate keys and applies merge keys (`<<: *anchor`), whose entries
/// never override keys written in the mapping itself, as in YAML 1.1.
fn finish_map<'a>(
    entries: Vec<(Node<'a>, Node<'a>)>,
) -> Result<Vec<(Node<'a>, Node<'a>)>, YamlError> {
    let is_merge =
        |k: &Node<'_>| matches!(&k.value, Value::Scalar { text, plain: true } if text == "<<");
    let has_merge = entries.iter().any(|(k, _)| is_merge(k));
    check_duplicates(&entries)?;
    if !has_merge {
        return Ok(entries);
    }
    let (merges, mut own): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(k, _)| is_merge(k));
    for (_, value) in merges {
        let sources: Vec<Node<'a>> = match value.value {
            Value::Map(_) => vec![value],
            Value::Seq(items) => items,
            _ => {
                return Err(YamlError {
                    mark: value.mark,
                    message: "a merge key `<<` needs a mapping or a sequence of mappings".into(),
                })
            }
        };
        for source in sources {
            let Value::Map(src_entries) = source.value else {
                return Err(YamlError {
                    mark: source.mark,
                    message: "a merge key `<<` needs a mapping or a sequence of mappings".into(),
                });
            };
            for (k, v) in src_entries {
                if !own.iter().any(|(ok, _)| ok.as_str() == k.as_str()) {
                    own.push((k, v));
                }
            }
        }
    }
    Ok(own)
}

fn check_duplicates(entries: &[(Node<'_>, Node<'_>)]) -> Result<(), YamlError> {
    let dup = |first: &Node<'_>, second: &Node<'_>| YamlError {
        mark: second.mark,
        message: format!(
            "duplicate key `{}` (first defined at line {})",
            second.as_str().unwrap_or_default(),
            first.mark.line
        ),
    };
    if entries.len() <= LINEAR_DUP_SCAN {
        for (i, (k, _)) in entries.iter().enumerate() {
            if let Some((first, _)) = entries[..i].iter().find(|(p, _)| p.as_str() == k.as_str()) {
                return Err(dup(first, k));
            }
        }
    } else {
        let mut seen = std::collections::HashMap::with_capacity(entries.len());
        for (k, _) in entries {
            if let Some(first) = seen.insert(k.as_str().unwrap_or_default(), k) {
                return Err(dup(first, k));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// serde

/// A deserialization error with the position of the node it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeError {
    /// Where; `None` until the innermost node that saw the error fills it in.
    pub mark: Option<Mark>,
    /// What.
    pub message: String,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            mark: None,
            message: msg.to_string(),
        }
    }
}

impl DeError {
    fn at(mut self, mark: Mark) -> Self {
        self.mark.get_or_insert(mark);
        self
    }
}

/// A key that no field of the target type accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Position of the key.
    pub mark: Mark,
    /// The key as written.
    pub key: String,
    /// The type that has no such field.
    pub owner: &'static str,
    /// The fields it does have (for "did you mean" hints).
    pub expected: &'static [&'static str],
}

/// A key read as a struct field whose name it matches only case-insensitively,
/// as Go's `encoding/json` (and so Prow) reads it: `NAME:` is read as `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedKey {
    /// Position of the key.
    pub mark: Mark,
    /// The key as written.
    pub key: String,
    /// The field it is read as.
    pub field: &'static str,
    /// The type that has the field.
    pub owner: &'static str,
    /// When several keys of the mapping are read as the same field: all of them
    /// (this one included), in the order Go decodes them (see [`go_order`]);
    /// empty when this key is the only one.
    pub group: Vec<(String, Mark)>,
}

/// What decoding as Prow does learned about the keys of the document.
#[derive(Debug, Default)]
pub struct KeyNotes {
    /// Keys no field takes (serde would otherwise drop them silently).
    pub unknown: RefCell<Vec<UnknownField>>,
    /// Keys taken by a field whose name they match only case-insensitively.
    pub folded: RefCell<Vec<FoldedKey>>,
}

/// Deserializes `T` from `node`, matching keys to field names exactly; keys that
/// `T` does not know are appended to `unknown` (serde would otherwise drop them
/// silently). Prow's configuration is read with [`from_node_as_go`].
pub fn from_node<'a, T: de::Deserialize<'a>>(
    node: &Node<'a>,
    unknown: &RefCell<Vec<UnknownField>>,
) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        unknown,
        folded: None,
        merged: false,
    })
    .map_err(|e| e.at(node.mark))
}

/// Deserializes `T` from `node` matching keys to struct fields as Go's
/// `encoding/json` does, which is how Prow (through `sigs.k8s.io/yaml`) and
/// Lighthouse read their configuration: a key equal to a field name is that
/// field; otherwise a key equal to one up to case (see [`go_fold_eq`]) is that
/// field too, and is noted in `notes.folded` so users can fix it; other keys are
/// noted in `notes.unknown`. Several keys read as the same field (`name` and
/// `NAME`) are all decoded into it, in Go's order (see [`go_order`]).
///
/// This applies to every struct (`deserialize_struct`: bosun's types and
/// `k8s-openapi`'s, whose generated impls name their fields); maps (labels,
/// free-form values) keep their keys as written, as in Go.
pub fn from_node_as_go<'a, T: de::Deserialize<'a>>(
    node: &Node<'a>,
    notes: &KeyNotes,
) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        unknown: &notes.unknown,
        folded: Some(&notes.folded),
        merged: false,
    })
    .map_err(|e| e.at(node.mark))
}

// ---------------------------------------------------------------------------
// Go's key matching
//
// Prow reads YAML with `sigs.k8s.io/yaml`, which converts the document to JSON
// (`json.Marshal` of a `map[string]interface{}`: the keys of each mapping in
// byte order) and decodes that with Go's `encoding/json`. For each key of an
// object, `encoding/json` takes the struct field whose name equals the key, else
// the first field whose name equals it under Unicode simple case folding
// (`bytes.EqualFold`), and decodes the value into that field. A second key read
// as the same field is decoded into it again, over what the first left: scalars
// are replaced, structs and maps are merged, slices are decoded into element by
// element (the later slice's length wins). Checked against Go 1.26 with
// `sigs.k8s.io/yaml` v1.6.0.
//
// bosun does the same on its YAML tree: [`go_routes`] says which field each key
// goes to, and a group of keys for one field is decoded once, from the values
// merged in Go's order ([`go_merge`]). The common case (every key is a field
// name as written) costs one check per key, as the unknown-key check did.

/// Whether Go's `encoding/json` reads `key` as the field named `field` when no
/// field is named `key` exactly: equality under Unicode simple case folding.
/// Every field name bosun reads is ASCII, and the only non-ASCII runes Go folds
/// to an ASCII letter are U+017F (long s, `s`) and U+212A (Kelvin sign, `k`)
/// (checked over every rune with Go), so those are the only ones folded here;
/// other non-ASCII characters must be equal.
pub fn go_fold_eq(key: &str, field: &str) -> bool {
    fn fold(c: char) -> char {
        match c {
            'a'..='z' => c.to_ascii_uppercase(),
            '\u{17F}' => 'S',
            '\u{212A}' => 'K',
            _ => c,
        }
    }
    key.chars().map(fold).eq(field.chars().map(fold))
}

/// The field of a struct with `fields` that Go reads `key` as: the field named
/// `key`, else the first one equal to it up to case.
pub fn go_key_field(key: &str, fields: &[&'static str]) -> Option<&'static str> {
    fields
        .iter()
        .find(|f| **f == key)
        .or_else(|| fields.iter().find(|f| go_fold_eq(key, f)))
        .copied()
}

/// Go decodes the keys of a mapping in byte order of the keys (`sigs.k8s.io/yaml`
/// hands `encoding/json` a marshalled map); so when several keys are read as one
/// field, the greatest key is decoded last (`NAME` then `Name` then `name`).
pub fn go_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.as_bytes().cmp(b.as_bytes())
}

/// What Go leaves in a field after decoding `next` into it over `prev`: mappings
/// merge (the entries of both, `next`'s last: struct fields and map keys are
/// then resolved by the same rules, so later ones win and nested structs merge);
/// a sequence is decoded over the earlier one element by element and keeps its
/// own length; anything else replaces `prev`.
///
/// Known difference: Go decodes a null into a non-pointer field (a string, a
/// number, a struct) as a no-op, keeping `prev`; here a null replaces it, as it
/// does for pointers, slices and maps.
fn go_merge<'a>(prev: Node<'a>, next: &Node<'a>) -> Node<'a> {
    match (prev.value, &next.value) {
        (Value::Map(mut entries), Value::Map(more)) => {
            entries.extend(more.iter().cloned());
            Node {
                mark: next.mark,
                value: Value::Map(entries),
            }
        }
        (Value::Seq(items), Value::Seq(more)) => {
            let mut items = items.into_iter();
            let merged = more
                .iter()
                .map(|n| match items.next() {
                    Some(p) => go_merge(p, n),
                    None => n.clone(),
                })
                .collect();
            Node {
                mark: next.mark,
                value: Value::Seq(merged),
            }
        }
        _ => next.clone(),
    }
}

/// Where one entry of a mapping goes when Go decodes the mapping into a struct.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// No field takes the key.
    Unknown,
    /// This field, from this entry alone.
    One(&'static str),
    /// This field, from the entries at these indexes (in Go's order), merged;
    /// the route of the group's first entry in the mapping.
    Group(&'static str, Vec<usize>),
    /// Part of a group read at another entry.
    Skip,
}

/// The route of each entry of `entries` into a struct with `fields`.
fn go_routes(entries: &[(Node<'_>, Node<'_>)], fields: &[&'static str]) -> Vec<Route> {
    let targets: Vec<Option<&'static str>> = entries
        .iter()
        .map(|(k, _)| go_key_field(k.as_str().unwrap_or_default(), fields))
        .collect();
    let mut routes = vec![Route::Unknown; entries.len()];
    for (i, target) in targets.iter().enumerate() {
        let Some(field) = *target else { continue };
        if routes[i] != Route::Unknown {
            continue;
        }
        let mut group: Vec<usize> = (i..entries.len())
            .filter(|&j| targets[j] == Some(field))
            .collect();
        if group.len() == 1 {
            routes[i] = Route::One(field);
            continue;
        }
        for &j in &group[1..] {
            routes[j] = Route::Skip;
        }
        // Stable: equal keys (only in merged mappings) keep their order.
        let key = |j: usize| entries[j].0.as_str().unwrap_or_default();
        group.sort_by(|&a, &b| go_order(key(a), key(b)));
        routes[i] = Route::Group(field, group);
    }
    routes
}

/// The entries of a mapping as Go reads them into a struct: see
/// [`Node::go_fields`].
#[derive(Debug, Default)]
pub struct GoFields<'n, 'a> {
    /// Each field that keys set, with the mark of its first key and its value
    /// (the values merged when several keys set it), in the mapping's order.
    pub fields: Vec<(&'static str, Mark, Cow<'n, Node<'a>>)>,
    /// Keys no field takes.
    pub unknown: Vec<UnknownField>,
    /// Keys taken by a field they match only up to case.
    pub folded: Vec<FoldedKey>,
}

impl<'a> Node<'a> {
    /// The entries of this mapping as Go decodes them into a struct `owner` with
    /// `fields` (for the loader's hand-read sections: `presubmits`, ...).
    pub fn go_fields<'n>(
        &'n self,
        fields: &'static [&'static str],
        owner: &'static str,
    ) -> GoFields<'n, 'a> {
        let entries = self.entries();
        let mut out = GoFields::default();
        for (i, route) in go_routes(entries, fields).into_iter().enumerate() {
            let (key, value) = &entries[i];
            match route {
                Route::Unknown => out.unknown.push(UnknownField {
                    mark: key.mark,
                    key: key.as_str().unwrap_or_default().to_string(),
                    owner,
                    expected: fields,
                }),
                Route::Skip => {}
                Route::One(field) => {
                    note_folded(&mut out.folded, entries, &[i], field, owner);
                    out.fields.push((field, key.mark, Cow::Borrowed(value)));
                }
                Route::Group(field, group) => {
                    note_folded(&mut out.folded, entries, &group, field, owner);
                    out.fields
                        .push((field, key.mark, Cow::Owned(merge_group(entries, &group))));
                }
            }
        }
        out
    }

    /// The value of field `name` of this mapping as Go decodes it into a struct
    /// whose field names are distinct up to case (every struct bosun reads):
    /// the value of the keys equal to `name` up to case, merged in Go's order.
    pub fn go_field(&self, name: &str) -> Option<Cow<'_, Node<'a>>> {
        let entries = self.entries();
        let mut group: Vec<usize> = (0..entries.len())
            .filter(|&i| go_fold_eq(entries[i].0.as_str().unwrap_or_default(), name))
            .collect();
        match group.len() {
            0 => None,
            1 => Some(Cow::Borrowed(&entries[group[0]].1)),
            _ => {
                let key = |j: usize| entries[j].0.as_str().unwrap_or_default();
                group.sort_by(|&a, &b| go_order(key(a), key(b)));
                Some(Cow::Owned(merge_group(entries, &group)))
            }
        }
    }
}

/// The values of the entries at `group` (in Go's order), merged.
fn merge_group<'a>(entries: &[(Node<'a>, Node<'a>)], group: &[usize]) -> Node<'a> {
    let mut merged = entries[group[0]].1.clone();
    for &j in &group[1..] {
        merged = go_merge(merged, &entries[j].1);
    }
    merged
}

/// Notes the keys of `group` (entries read as `field`) that are not `field` as
/// written.
fn note_folded(
    out: &mut Vec<FoldedKey>,
    entries: &[(Node<'_>, Node<'_>)],
    group: &[usize],
    field: &'static str,
    owner: &'static str,
) {
    let key = |j: usize| (entries[j].0.as_str().unwrap_or_default(), entries[j].0.mark);
    for &j in group {
        let (text, mark) = key(j);
        if text != field {
            out.push(FoldedKey {
                mark,
                key: text.to_string(),
                field,
                owner,
                group: if group.len() > 1 {
                    group
                        .iter()
                        .map(|&g| (key(g).0.to_string(), key(g).1))
                        .collect()
                } else {
                    Vec::new()
                },
            });
        }
    }
}

#[derive(Clone, Copy)]
struct NodeDe<'n, 'a> {
    node: &'n Node<'a>,
    unknown: &'n RefCell<Vec<UnknownField>>,
    /// `Some` when keys are matched as Go matches them (see [`from_node_as_go`]).
    folded: Option<&'n RefCell<Vec<FoldedKey>>>,
    /// True below a value merged from several keys, whose mappings may hold a key
    /// twice (see [`go_merge`]).
    merged: bool,
}

enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str,
}

fn classify(text: &str) -> Plain {
    if is_null_text(text) {
        return Plain::Null;
    }
    if let Some(b) = parse_bool(text) {
        return Plain::Bool(b);
    }
    if let Some(i) = parse_int(text) {
        return match i {
            Ok(i) => Plain::Int(i),
            Err(u) => Plain::UInt(u),
        };
    }
    if let Some(f) = parse_float(text) {
        return Plain::Float(f);
    }
    Plain::Str
}

/// YAML 1.1 booleans, which is what Prow's YAML library accepts.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
            Some(true)
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => {
            Some(false)
        }
        _ => None,
    }
}

/// Decimal, `0x`, `0o` and `0b` integers with an optional sign and `_` separators.
/// `Err(u)` carries values above `i64::MAX`.
fn parse_int(text: &str) -> Option<Result<i64, u64>> {
    let first = text.as_bytes().first()?;
    if !(first.is_ascii_digit() || *first == b'-' || *first == b'+') {
        return None;
    }
    let (neg, digits) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(d) = digits.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = digits.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = digits.strip_prefix("0b") {
        (2, d)
    } else {
        (10, digits)
    };
    if digits.is_empty() || digits.starts_with('_') {
        return None;
    }
    let cleaned: Cow<'_, str> = if digits.contains('_') {
        Cow::Owned(digits.replace('_', ""))
    } else {
        Cow::Borrowed(digits)
    };
    let magnitude = u64::from_str_radix(&cleaned, radix).ok()?;
    if neg {
        if magnitude <= i64::MAX as u64 + 1 {
            Some(Ok((magnitude as i128).wrapping_neg() as i64))
        } else {
            None
        }
    } else if magnitude <= i64::MAX as u64 {
        Some(Ok(magnitude as i64))
    } else {
        Some(Err(magnitude))
    }
}

fn parse_float(text: &str) -> Option<f64> {
    match text {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        _ => {}
    }
    let b = text.as_bytes();
    let digit_start = matches!(b.first(), Some(b'0'..=b'9' | b'-' | b'+' | b'.'));
    if !digit_start || !b.iter().any(u8::is_ascii_digit) {
        return None;
    }
    text.parse().ok()
}

impl<'n, 'a> NodeDe<'n, 'a> {
    fn child(&self, node: &'n Node<'a>) -> NodeDe<'n, 'a> {
        NodeDe { node, ..*self }
    }

    fn invalid<T>(&self, exp: &dyn de::Expected) -> Result<T, DeError> {
        let unexp = match &self.node.value {
            Value::Scalar { text, .. } if self.node.is_null() => {
                let _ = text;
                de::Unexpected::Unit
            }
            Value::Scalar { text, .. } => de::Unexpected::Str(text),
            Value::Seq(_) => de::Unexpected::Seq,
            Value::Map(_) => de::Unexpected::Map,
        };
        Err(de::Error::invalid_type(unexp, exp))
    }

    fn visit_text<V: Visitor<'a>>(
        &self,
        text: &'n Cow<'a, str>,
        v: V,
    ) -> Result<V::Value, DeError> {
        match text {
            Cow::Borrowed(s) => v.visit_borrowed_str(s),
            Cow::Owned(s) => v.visit_str(s),
        }
    }

    fn visit_number<V: Visitor<'a>>(&self, v: V) -> Result<V::Value, DeError> {
        match &self.node.value {
            Value::Scalar { text, plain: true } => match classify(text) {
                Plain::Int(i) => v.visit_i64(i),
                Plain::UInt(u) => v.visit_u64(u),
                Plain::Float(f) => v.visit_f64(f),
                _ => self.invalid(&v),
            },
            _ => self.invalid(&v),
        }
    }
}

macro_rules! number_methods {
    ($($name:ident)*) => {$(
        fn $name<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
            self.visit_number(v).map_err(|e| e.at(self.node.mark))
        }
    )*};
}

impl<'de, 'n> de::Deserializer<'de> for NodeDe<'n, 'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Scalar { text, plain: true } => match classify(text) {
                Plain::Null => v.visit_unit(),
                Plain::Bool(b) => v.visit_bool(b),
                Plain::Int(i) => v.visit_i64(i),
                Plain::UInt(u) => v.visit_u64(u),
                Plain::Float(f) => v.visit_f64(f),
                Plain::Str => self.visit_text(text, v),
            },
            Value::Scalar { text, .. } => self.visit_text(text, v),
            Value::Seq(items) => v.visit_seq(SeqAccess {
                de: self,
                iter: items.iter(),
            }),
            Value::Map(entries) => v.visit_map(MapAccess::new(self, entries, None, "")),
        };
        r.map_err(|e| e.at(self.node.mark))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Scalar { text, plain: true } => match parse_bool(text) {
                Some(b) => v.visit_bool(b),
                None => self.invalid(&v),
            },
            _ => self.invalid(&v),
        };
        r.map_err(|e| e.at(self.node.mark))
    }

    number_methods!(deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64);

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        // Any scalar reads as its text (`cpu: 2` is the quantity "2"); a null reads
        // as the empty string, as Go's zero value.
        let r = match &self.node.value {
            Value::Scalar { .. } if self.node.is_null() => v.visit_borrowed_str(""),
            Value::Scalar { text, .. } => self.visit_text(text, v),
            _ => self.invalid(&v),
        };
        r.map_err(|e| e.at(self.node.mark))
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            v.visit_none()
        } else {
            v.visit_some(self)
        }
        .map_err(|e| e.at(self.node.mark))
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            v.visit_unit()
        } else {
            self.invalid(&v)
        }
        .map_err(|e| e.at(self.node.mark))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        v.visit_newtype_struct(self)
            .map_err(|e| e.at(self.node.mark))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        // A null reads as an empty list, as Go's nil slice.
        let r = match &self.node.value {
            Value::Seq(items) => v.visit_seq(SeqAccess {
                de: self,
                iter: items.iter(),
            }),
            _ if self.node.is_null() => v.visit_seq(SeqAccess {
                de: self,
                iter: [].iter(),
            }),
            _ => self.invalid(&v),
        };
        r.map_err(|e| e.at(self.node.mark))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, DeError> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.map_with_fields(None, "", v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        self.map_with_fields(Some(fields), name, v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Scalar { text, .. } => {
                v.visit_enum(de::value::StrDeserializer::<DeError>::new(text).into_deserializer())
            }
            Value::Map(entries) if entries.len() == 1 => v.visit_enum(EnumAccess {
                de: self,
                key: &entries[0].0,
                value: &entries[0].1,
            }),
            _ => self.invalid(&v),
        };
        r.map_err(|e| e.at(self.node.mark))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        self.deserialize_str(v)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_unit()
    }
}

impl<'n, 'de> NodeDe<'n, 'de> {
    fn map_with_fields<V: Visitor<'de>>(
        self,
        fields: Option<&'static [&'static str]>,
        owner: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        let r = match &self.node.value {
            Value::Map(entries) => v.visit_map(MapAccess::new(self, entries, fields, owner)),
            _ if self.node.is_null() => v.visit_map(MapAccess::new(self, &[], fields, owner)),
            _ => self.invalid(&v),
        };
        r.map_err(|e| e.at(self.node.mark))
    }
}

struct SeqAccess<'n, 'a> {
    de: NodeDe<'n, 'a>,
    iter: std::slice::Iter<'n, Node<'a>>,
}

impl<'de, 'n> de::SeqAccess<'de> for SeqAccess<'n, 'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.iter.next() {
            Some(node) => seed
                .deserialize(self.de.child(node))
                .map(Some)
                .map_err(|e| e.at(node.mark)),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct MapAccess<'n, 'a> {
    de: NodeDe<'n, 'a>,
    entries: &'n [(Node<'a>, Node<'a>)],
    /// The next entry.
    at: usize,
    value: Option<Cow<'n, Node<'a>>>,
    fields: Option<&'static [&'static str]>,
    owner: &'static str,
    /// Where each entry goes, when a struct is read as Go reads it and some key
    /// is not a field name as written (or a merged mapping may repeat a key);
    /// `None` when every key goes to the field of its name.
    routes: Option<Vec<Route>>,
    /// True when every key is known to be a field name as written.
    all_fields: bool,
}

impl<'n, 'a> MapAccess<'n, 'a> {
    fn new(
        de: NodeDe<'n, 'a>,
        entries: &'n [(Node<'a>, Node<'a>)],
        fields: Option<&'static [&'static str]>,
        owner: &'static str,
    ) -> Self {
        let mut all_fields = false;
        let mut routes = None;
        if let (Some(fields), Some(_)) = (fields, de.folded) {
            all_fields = !de.merged
                && entries
                    .iter()
                    .all(|(k, _)| k.as_str().is_some_and(|t| fields.contains(&t)));
            if !all_fields {
                routes = Some(go_routes(entries, fields));
            }
        }
        MapAccess {
            de,
            entries,
            at: 0,
            value: None,
            fields,
            owner,
            routes,
            all_fields,
        }
    }

    fn note_unknown(&self, key: &Node<'a>, text: &str, fields: &'static [&'static str]) {
        self.de.unknown.borrow_mut().push(UnknownField {
            mark: key.mark,
            key: text.to_string(),
            owner: self.owner,
            expected: fields,
        });
    }
}

impl<'de, 'n> de::MapAccess<'de> for MapAccess<'n, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        loop {
            let i = self.at;
            let Some((key, value)) = self.entries.get(i) else {
                return Ok(None);
            };
            self.at += 1;
            let (Some(fields), Some(text)) = (self.fields, key.as_str()) else {
                self.value = Some(Cow::Borrowed(value));
                return seed
                    .deserialize(self.de.child(key))
                    .map(Some)
                    .map_err(|e| e.at(key.mark));
            };
            let route = match &self.routes {
                None => {
                    if !self.all_fields && !fields.contains(&text) {
                        self.note_unknown(key, text, fields);
                    }
                    self.value = Some(Cow::Borrowed(value));
                    return seed
                        .deserialize(self.de.child(key))
                        .map(Some)
                        .map_err(|e| e.at(key.mark));
                }
                Some(routes) => &routes[i],
            };
            let folded = self.de.folded.expect("routes only when reading as Go");
            let field = match route {
                Route::Skip => continue,
                Route::Unknown => {
                    self.note_unknown(key, text, fields);
                    self.value = Some(Cow::Borrowed(value));
                    return seed
                        .deserialize(self.de.child(key))
                        .map(Some)
                        .map_err(|e| e.at(key.mark));
                }
                Route::One(field) => {
                    note_folded(
                        &mut folded.borrow_mut(),
                        self.entries,
                        &[i],
                        field,
                        self.owner,
                    );
                    self.value = Some(Cow::Borrowed(value));
                    *field
                }
                Route::Group(field, group) => {
                    note_folded(
                        &mut folded.borrow_mut(),
                        self.entries,
                        group,
                        field,
                        self.owner,
                    );
                    self.value = Some(Cow::Owned(merge_group(self.entries, group)));
                    *field
                }
            };
            // The field's own name, whatever the key's case.
            return seed
                .deserialize(de::value::BorrowedStrDeserializer::<DeError>::new(field))
                .map(Some)
                .map_err(|e| e.at(key.mark));
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        match self.value.take().expect("next_value before next_key") {
            Cow::Borrowed(node) => seed
                .deserialize(self.de.child(node))
                .map_err(|e| e.at(node.mark)),
            Cow::Owned(node) => seed
                .deserialize(NodeDe {
                    node: &node,
                    unknown: self.de.unknown,
                    folded: self.de.folded,
                    merged: true,
                })
                .map_err(|e| e.at(node.mark)),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len() - self.at)
    }
}

struct EnumAccess<'n, 'a> {
    de: NodeDe<'n, 'a>,
    key: &'n Node<'a>,
    value: &'n Node<'a>,
}

impl<'de, 'n> de::EnumAccess<'de> for EnumAccess<'n, 'de> {
    type Error = DeError;
    type Variant = NodeDe<'n, 'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), DeError> {
        let variant = seed.deserialize(self.de.child(self.key))?;
        Ok((variant, self.de.child(self.value)))
    }
}

impl<'de, 'n> de::VariantAccess<'de> for NodeDe<'n, 'de> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        de::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, DeError> {
        de::Deserializer::deserialize_seq(self, v)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        self.map_with_fields(Some(fields), "", v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn parse_one(src: &str) -> Node<'_> {
        let mut docs = parse_documents(src).unwrap();
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Job {
        name: String,
        #[serde(default)]
        max_concurrency: i64,
        #[serde(default)]
        always_run: Option<bool>,
        #[serde(default)]
        branches: Vec<String>,
    }

    #[test]
    fn marks_are_one_based() {
        let node = parse_one("a:\n  b: [1, 2]\n");
        assert_eq!(node.mark, Mark { line: 1, col: 1 });
        let b = node.get("a").unwrap().get("b").unwrap();
        assert_eq!(b.mark, Mark { line: 2, col: 6 });
        assert_eq!(b.items()[1].mark, Mark { line: 2, col: 10 });
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let err = parse_documents("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.mark.line, 3);
        assert_eq!(err.message, "duplicate key `a` (first defined at line 1)");
        let many: String = (0..40).map(|i| format!("k{i}: 1\n")).collect::<String>() + "k7: 2\n";
        let err = parse_documents(&many).unwrap_err();
        assert_eq!(err.mark.line, 41);
    }

    #[test]
    fn merge_keys_and_aliases() {
        let node = parse_one("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n");
        let used = node.get("use").unwrap();
        assert_eq!(used.get("x").unwrap().as_str(), Some("1"));
        assert_eq!(used.get("y").unwrap().as_str(), Some("3"));
        assert_eq!(used.entries().len(), 2);
    }

    #[test]
    fn typed_deserialization_and_unknown_fields() {
        let node = parse_one("name: a\nmax_concurrency: 0x10\nalways_run: yes\nextra: 1\n");
        let unknown = RefCell::new(Vec::new());
        let job: Job = from_node(&node, &unknown).unwrap();
        assert_eq!(job.max_concurrency, 16);
        assert_eq!(job.always_run, Some(true));
        assert!(job.branches.is_empty());
        let unknown = unknown.into_inner();
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].key, "extra");
        assert_eq!(unknown[0].mark, Mark { line: 4, col: 1 });
        assert_eq!(unknown[0].owner, "Job");
    }

    #[test]
    fn go_folding() {
        assert!(go_fold_eq("NAME", "name"));
        assert!(go_fold_eq("Max_Concurrency", "max_concurrency"));
        assert!(go_fold_eq("valuefrom", "valueFrom"));
        // The two non-ASCII runes Go folds to ASCII letters.
        assert!(go_fold_eq("\u{17F}pec", "spec"));
        assert!(go_fold_eq("\u{212A}ind", "kind"));
        // Not simple folds: dotless i, dotted I; nor underscores.
        assert!(!go_fold_eq("l\u{131}mit", "limit"));
        assert!(!go_fold_eq("L\u{130}MIT", "limit"));
        assert!(!go_fold_eq("maxconcurrency", "max_concurrency"));
        assert!(!go_fold_eq("name", "names"));
        // An exact name wins over a folded one; of folded ones, the first field.
        assert_eq!(go_key_field("A", &["a", "A"]), Some("A"));
        assert_eq!(go_key_field("a", &["a", "A"]), Some("a"));
        assert_eq!(go_key_field("AB", &["Ab", "aB"]), Some("Ab"));
        assert_eq!(go_key_field("x", &["a"]), None);
    }

    #[test]
    fn keys_are_read_as_go_reads_them() {
        // Go (sigs.k8s.io/yaml v1.6.0, Go 1.26): `NAME` alone is `name`; with
        // both, the keys are decoded in byte order, so the greatest wins
        // whatever the document order.
        for (src, want) in [
            ("NAME: upper\n", "upper"),
            ("name: lower\nNAME: upper\n", "lower"),
            ("NAME: upper\nname: lower\n", "lower"),
            ("Name: title\nNAME: upper\n", "title"),
            ("nAME: x\nName: title\n", "x"),
        ] {
            let node = parse_one(src);
            let notes = KeyNotes::default();
            let job: Job = from_node_as_go(&node, &notes).unwrap();
            assert_eq!(job.name, want, "{src:?}");
            assert!(notes.unknown.borrow().is_empty(), "{src:?}");
        }
        let node = parse_one("name: lower\nMAX_CONCURRENCY: 2\nNAME: upper\n");
        let notes = KeyNotes::default();
        let job: Job = from_node_as_go(&node, &notes).unwrap();
        assert_eq!((job.name.as_str(), job.max_concurrency), ("lower", 2));
        let mut folded = notes.folded.into_inner();
        folded.sort_by_key(|f| f.mark);
        assert_eq!(folded.len(), 2);
        assert_eq!(
            (folded[0].key.as_str(), folded[0].field, folded[0].owner),
            ("MAX_CONCURRENCY", "max_concurrency", "Job")
        );
        assert!(folded[0].group.is_empty());
        assert_eq!((folded[1].key.as_str(), folded[1].field), ("NAME", "name"));
        assert_eq!(folded[1].mark, Mark { line: 3, col: 1 });
        assert_eq!(
            folded[1].group,
            vec![
                ("NAME".to_string(), Mark { line: 3, col: 1 }),
                ("name".to_string(), Mark { line: 1, col: 1 })
            ]
        );
        // Matching exactly, `NAME` is unknown.
        let unknown = RefCell::new(Vec::new());
        let job: Job = from_node(&parse_one("name: a\nNAME: b\n"), &unknown).unwrap();
        assert_eq!(job.name, "a");
        assert_eq!(unknown.into_inner()[0].key, "NAME");
    }

    #[derive(Deserialize, Debug, PartialEq, Default)]
    #[serde(default)]
    struct Env {
        name: String,
        value: Option<String>,
    }

    #[derive(Deserialize, Debug, PartialEq, Default)]
    #[serde(default)]
    struct Spec {
        a: Option<String>,
        b: Option<String>,
        env: Vec<Env>,
        labels: std::collections::BTreeMap<String, String>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct WithSpec {
        spec: Spec,
    }

    #[test]
    fn several_keys_for_one_field_merge_as_in_go() {
        // Go decodes `Spec` (first in byte order) then `spec` into the same
        // struct: fields merge, the list is decoded over element by element and
        // keeps the later length, map entries merge with the later winning.
        let node = parse_one(
            "spec:\n  b: '2'\n  env: [{name: w}]\n  labels: {a: '1', c: '3'}\n\
             Spec:\n  a: '1'\n  env: [{name: x, value: v}, {name: x2}]\n  \
             Labels: {b: '2', c: '4'}\n",
        );
        let notes = KeyNotes::default();
        let got: WithSpec = from_node_as_go(&node, &notes).unwrap();
        let labels = [("a", "1"), ("b", "2"), ("c", "3")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        assert_eq!(
            got.spec,
            Spec {
                a: Some("1".into()),
                b: Some("2".into()),
                env: vec![Env {
                    name: "w".into(),
                    value: Some("v".into())
                }],
                labels,
            }
        );
        let keys: Vec<&str> = notes.folded.borrow().iter().map(|f| f.field).collect();
        assert_eq!(keys, ["spec", "labels"]);
        assert!(notes.unknown.borrow().is_empty());
    }

    #[test]
    fn type_errors_point_at_the_innermost_node() {
        let node = parse_one("name: a\nbranches:\n  - main\n  - [x]\n");
        let err = from_node::<Job>(&node, &RefCell::new(Vec::new())).unwrap_err();
        assert_eq!(err.mark, Some(Mark { line: 4, col: 5 }));
        assert!(err.message.contains("expected a string"), "{}", err.message);
        let node = parse_one("max_concurrency: 1\n");
        let err = from_node::<Job>(&node, &RefCell::new(Vec::new())).unwrap_err();
        assert_eq!(err.message, "missing field `name`");
        assert_eq!(err.mark, Some(Mark { line: 1, col: 1 }));
        let node = parse_one("name: a\nmax_concurrency: \"3\"\n");
        let err = from_node::<Job>(&node, &RefCell::new(Vec::new())).unwrap_err();
        assert_eq!(err.mark, Some(Mark { line: 2, col: 18 }));
    }

    #[test]
    fn quoted_scalars_stay_strings() {
        let node = parse_one("a: 'true'\nb: !!str 12\nc: 12\n");
        let v: serde_json::Value = from_node(&node, &RefCell::new(Vec::new())).unwrap();
        assert_eq!(v, serde_json::json!({"a": "true", "b": "12", "c": 12}));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let err = parse_documents("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.mark.line >= 1);
        assert!(!err.message.is_empty());
    }

    #[test]
    fn integers() {
        assert!(matches!(
            classify("-9223372036854775808"),
            Plain::Int(i64::MIN)
        ));
        assert!(matches!(
            classify("18446744073709551615"),
            Plain::UInt(u64::MAX)
        ));
        assert!(matches!(classify("1_000"), Plain::Int(1000)));
        assert!(matches!(classify("1.5"), Plain::Float(_)));
        assert!(matches!(classify("1h"), Plain::Str));
        assert!(matches!(classify("-"), Plain::Str));
        assert!(matches!(classify("0 0 * * *"), Plain::Str));
    }
}
