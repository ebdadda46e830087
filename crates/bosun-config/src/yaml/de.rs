//! The serde deserializer over the tree: any `Deserialize` type read from a
//! [`Node`], errors at the innermost node that saw them, keys no field takes
//! noted (serde would drop them silently), and Prow's configuration read with
//! Go's key matching ([`from_node_as_go`]). Plain scalars are read as YAML 1.1
//! reads them (`yes` is true, `0x10` is 16), as Prow's YAML library does.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::go::{go_routes, merge_group, note_folded, FoldedKey, Route, UnknownField};
use super::tree::{is_null_text, Mark, Node, Value};

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
/// field; otherwise a key equal to one up to case (see [`go_fold_eq`](super::go_fold_eq)) is that
/// field too, and is noted in `notes.folded` so users can fix it; other keys are
/// noted in `notes.unknown`. Several keys read as the same field (`name` and
/// `NAME`) are all decoded into it, in Go's order (see [`go_order`](super::go_order)).
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

#[derive(Clone, Copy)]
struct NodeDe<'n, 'a> {
    node: &'n Node<'a>,
    unknown: &'n RefCell<Vec<UnknownField>>,
    /// `Some` when keys are matched as Go matches them (see [`from_node_as_go`]).
    folded: Option<&'n RefCell<Vec<FoldedKey>>>,
    /// True below a value merged from several keys, whose mappings may hold a key
    /// twice (see [`super::go`]'s `go_merge`).
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
    use crate::yaml::{go_fold_eq, go_key_field, parse_documents};
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
