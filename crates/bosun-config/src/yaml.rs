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
    /// A mapping, in source order (keys are unique: duplicates are a load error).
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

/// Deserializes `T` from `node`; keys that `T` does not know are appended to
/// `unknown` (serde would otherwise drop them silently).
pub fn from_node<'a, T: de::Deserialize<'a>>(
    node: &Node<'a>,
    unknown: &RefCell<Vec<UnknownField>>,
) -> Result<T, DeError> {
    T::deserialize(NodeDe { node, unknown }).map_err(|e| e.at(node.mark))
}

#[derive(Clone, Copy)]
struct NodeDe<'n, 'a> {
    node: &'n Node<'a>,
    unknown: &'n RefCell<Vec<UnknownField>>,
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
        NodeDe {
            node,
            unknown: self.unknown,
        }
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
            Value::Map(entries) => v.visit_map(MapAccess {
                de: self,
                iter: entries.iter(),
                value: None,
                fields: None,
                owner: "",
            }),
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
            Value::Map(entries) => v.visit_map(MapAccess {
                de: self,
                iter: entries.iter(),
                value: None,
                fields,
                owner,
            }),
            _ if self.node.is_null() => v.visit_map(MapAccess {
                de: self,
                iter: [].iter(),
                value: None,
                fields,
                owner,
            }),
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
    iter: std::slice::Iter<'n, (Node<'a>, Node<'a>)>,
    value: Option<&'n Node<'a>>,
    fields: Option<&'static [&'static str]>,
    owner: &'static str,
}

impl<'de, 'n> de::MapAccess<'de> for MapAccess<'n, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((key, value)) = self.iter.next() else {
            return Ok(None);
        };
        if let (Some(fields), Some(text)) = (self.fields, key.as_str()) {
            if !fields.contains(&text) {
                self.de.unknown.borrow_mut().push(UnknownField {
                    mark: key.mark,
                    key: text.to_string(),
                    owner: self.owner,
                    expected: fields,
                });
            }
        }
        self.value = Some(value);
        seed.deserialize(self.de.child(key))
            .map(Some)
            .map_err(|e| e.at(key.mark))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let node = self.value.take().expect("next_value before next_key");
        seed.deserialize(self.de.child(node))
            .map_err(|e| e.at(node.mark))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
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
