//! Go's key matching: which struct field each key of a mapping is read as,
//! the way Prow (through `sigs.k8s.io/yaml` and Go's `encoding/json`) reads
//! it, and the values of several keys read as one field merged as Go merges
//! them. The deserializer and the loader's hand-read sections both use it.

use std::borrow::Cow;

use super::tree::{Mark, Node, Value};

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
                value: Value::Map(entries),
                ..*next
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
                value: Value::Seq(merged),
                ..*next
            }
        }
        _ => next.clone(),
    }
}

/// Where one entry of a mapping goes when Go decodes the mapping into a struct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
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
pub(super) fn go_routes(entries: &[(Node<'_>, Node<'_>)], fields: &[&'static str]) -> Vec<Route> {
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
pub(super) fn merge_group<'a>(entries: &[(Node<'a>, Node<'a>)], group: &[usize]) -> Node<'a> {
    let mut merged = entries[group[0]].1.clone();
    for &j in &group[1..] {
        merged = go_merge(merged, &entries[j].1);
    }
    merged
}

/// Notes the keys of `group` (entries read as `field`) that are not `field` as
/// written.
pub(super) fn note_folded(
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
