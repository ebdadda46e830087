//! Editing YAML text in place, byte for byte: everything around an edit
//! (comments, order, formatting) stays as it is. Edits are made from a tree
//! read with [`parse_as_written`](super::parse_as_written) from the same
//! text: a scalar's bytes replaced in the quoting it is written in, an entry
//! inserted after another, a set of edits applied at once; and the line,
//! indentation and line-ending helpers those need. Which values to change,
//! and checking that the result reads back as meant, is the caller's.

use std::fmt::Write as _;
use std::ops::Range;

use super::tree::{Form, Node, Value};

/// One change to a text: the bytes `start..end` replaced by `text` (an
/// insertion when `start == end`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The first byte replaced.
    pub start: usize,
    /// The byte after the last one replaced.
    pub end: usize,
    /// What goes there.
    pub text: String,
}

impl Edit {
    /// `text` in place of the bytes `range`.
    pub fn replace(range: Range<usize>, text: impl Into<String>) -> Edit {
        Edit {
            start: range.start,
            end: range.end,
            text: text.into(),
        }
    }

    /// `text` inserted at byte `at`.
    pub fn insert(at: usize, text: impl Into<String>) -> Edit {
        Edit::replace(at..at, text)
    }
}

/// `src` with `edits` made, given in any order. They must not overlap; an
/// insertion may sit where another edit ends, and insertions at the same
/// place are made in the order given.
pub fn apply(src: &str, mut edits: Vec<Edit>) -> Result<String, &'static str> {
    edits.sort_by_key(|e| (e.start, e.end));
    let mut out = String::with_capacity(src.len() + 64 * edits.len());
    let mut at = 0;
    for e in &edits {
        if e.start < at {
            return Err("overlapping edits");
        }
        let kept = src
            .get(at..e.start)
            .filter(|_| src.is_char_boundary(e.end) && e.end >= e.start)
            .ok_or("an edit outside the text or inside a character")?;
        out.push_str(kept);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&src[at..]);
    Ok(out)
}

/// The text of the scalar written at `node`: `None` for a collection, and
/// for an alias (whose value is a copy of what its anchor names).
pub fn scalar_text<'n>(node: &'n Node<'_>) -> Option<&'n str> {
    match &node.value {
        Value::Scalar { text, .. } if !node.is_alias() => Some(text),
        _ => None,
    }
}

/// The first property written where `node` starts: its anchor (`&name`) or,
/// for an alias, the alias itself (`*name`); a tag when one comes first.
pub fn property<'s>(src: &'s str, node: &Node<'_>) -> &'s str {
    let rest = src.get(node.span.start as usize..).unwrap_or_default();
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, ',' | ']' | '}'))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The bytes of the one-line scalar `node` as written, its quotes included.
/// `Err` says what it is instead, to finish a sentence such as "its value
/// is ...": "a block scalar", "tagged", "a plain scalar over several lines".
pub fn scalar_range(src: &str, node: &Node<'_>) -> Result<Range<usize>, &'static str> {
    if node.is_alias() {
        return Err("an alias");
    }
    let Value::Scalar { text, .. } = &node.value else {
        return Err("not a scalar");
    };
    if node.tagged {
        return Err("tagged");
    }
    let start = node.span.start as usize;
    match node.form {
        Form::Plain => {
            if src.get(node.span.range()) == Some(&**text) {
                Ok(node.span.range())
            } else {
                Err("a plain scalar over several lines")
            }
        }
        Form::SingleQuoted | Form::DoubleQuoted => {
            let end = quoted_end(src, start).ok_or("an unterminated quoted scalar")?;
            Ok(start..end)
        }
        _ => Err("a block scalar"),
    }
}

/// The end of the quoted scalar whose opening quote is at `start` (the span
/// the parser gives may run past it).
fn quoted_end(src: &str, start: usize) -> Option<usize> {
    let b = src.as_bytes();
    let q = *b.get(start)?;
    if q != b'"' && q != b'\'' {
        return None;
    }
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' if q == b'"' => i += 2,
            c if c == q => {
                if q == b'\'' && b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                } else {
                    return Some(i + 1);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// Whether `value`, written as a plain scalar, reads back as this same
/// string. Strict: letters, digits and `-_./`, starting with a letter or a
/// digit, and nothing YAML 1.1 reads as a null, a boolean or a number.
pub fn plain_reads_back(value: &str) -> bool {
    let first_ok = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    let chars_ok = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    let lower = value.to_ascii_lowercase();
    let special = matches!(
        lower.as_str(),
        "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n"
    ) || value.parse::<f64>().is_ok()
        || value
            .chars()
            .all(|c| c.is_ascii_digit() || c == '_' || c == '.')
        || lower.starts_with("0x")
        || lower.starts_with("0o")
        || lower.starts_with("0b");
    first_ok && chars_ok && !special
}

fn double_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `value` written as a one-line scalar of `form`: single- or double-quoted
/// as `form` says; otherwise plain, or double-quoted when plain would not
/// read back as `value` (see [`plain_reads_back`]).
pub fn format_scalar(value: &str, form: Form) -> String {
    match form {
        Form::SingleQuoted => format!("'{}'", value.replace('\'', "''")),
        Form::DoubleQuoted => double_quoted(value),
        _ if plain_reads_back(value) => value.to_string(),
        _ => double_quoted(value),
    }
}

/// The edit that makes the one-line scalar `node` read `value`, in the
/// quoting it is written in (see [`format_scalar`]); `Err` as
/// [`scalar_range`]'s.
pub fn replace_scalar(src: &str, node: &Node<'_>, value: &str) -> Result<Edit, &'static str> {
    let range = scalar_range(src, node)?;
    Ok(Edit::replace(range, format_scalar(value, node.form)))
}

/// The edit that adds `entry` (a `key: value` text) to the mapping `map`
/// right after its entry `key: value`. In a flow mapping it follows the
/// value as `, entry`; in a block mapping it is a line of its own after the
/// value's, indented as `key`, ended with the text's line ending (at the end
/// of a text that has no final line ending, one goes before it instead).
/// The value must be a one-line scalar; `Err` says what it is otherwise, as
/// [`scalar_range`]'s.
pub fn insert_entry_after(
    src: &str,
    map: &Node<'_>,
    key: &Node<'_>,
    value: &Node<'_>,
    entry: &str,
) -> Result<Edit, &'static str> {
    let value_end = scalar_range(src, value)?.end;
    if map.form == Form::Flow {
        return Ok(Edit::insert(value_end, format!(", {entry}")));
    }
    let indent = " ".repeat(key.mark.col.saturating_sub(1) as usize);
    let nl = eol(src);
    let end = line_end(src, value_end);
    if end >= src.len() {
        return Ok(Edit::insert(src.len(), format!("{nl}{indent}{entry}")));
    }
    let next = src[end..].find('\n').map_or(src.len(), |i| end + i + 1);
    Ok(Edit::insert(next, format!("{indent}{entry}{nl}")))
}

/// The end of the line holding byte `pos`, before its `\r\n` or `\n`.
pub fn line_end(src: &str, pos: usize) -> usize {
    let e = src[pos..].find('\n').map_or(src.len(), |i| pos + i);
    if e > 0 && src.as_bytes()[e - 1] == b'\r' {
        e - 1
    } else {
        e
    }
}

/// The text's line ending: `\r\n` when it has one, else `\n`.
pub fn eol(src: &str) -> &'static str {
    if src.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

/// The number of spaces the line holding byte `pos` starts with.
pub fn indent_of(src: &str, pos: usize) -> usize {
    let line_start = src[..pos].rfind('\n').map_or(0, |i| i + 1);
    let line = &src[line_start..];
    line.len() - line.trim_start_matches(' ').len()
}

/// The byte after the `:` that follows the mapping key `key` (spaces and
/// tabs may come between); `None` when no `:` follows it there.
pub fn after_colon(src: &str, key: &Node<'_>) -> Option<usize> {
    let end = scalar_range(src, key).ok()?.end;
    let rest = &src[end..];
    let skipped = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    (rest[skipped..].starts_with(':')).then_some(end + skipped + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_as_written;

    /// `src`'s first document, as written.
    fn root(src: &str) -> Node<'_> {
        parse_as_written(src).unwrap().docs.remove(0)
    }

    /// The value at `path` (mapping keys) below `node`.
    fn at<'n, 'a>(node: &'n Node<'a>, path: &[&str]) -> &'n Node<'a> {
        path.iter()
            .fold(node, |n, k| n.get(k).unwrap_or_else(|| panic!("no {k}")))
    }

    /// `src` with the scalar at `path` made to read `value`.
    fn replaced(src: &str, path: &[&str], value: &str) -> String {
        let doc = root(src);
        let edit = replace_scalar(src, at(&doc, path), value).unwrap();
        apply(src, vec![edit]).unwrap()
    }

    #[test]
    fn a_replaced_scalar_keeps_its_quoting_and_its_surroundings() {
        let src = "a: x   # plain\nb: 'x' # single\nc: \"x\" # double\n";
        assert_eq!(
            replaced(src, &["a"], "new-one"),
            "a: new-one   # plain\nb: 'x' # single\nc: \"x\" # double\n"
        );
        assert_eq!(
            replaced(src, &["b"], "it's"),
            "a: x   # plain\nb: 'it''s' # single\nc: \"x\" # double\n"
        );
        assert_eq!(
            replaced(src, &["c"], "say \"hi\"\\"),
            "a: x   # plain\nb: 'x' # single\nc: \"say \\\"hi\\\"\\\\\" # double\n"
        );
        // Each reads back as the value.
        for (path, value) in [("a", "new-one"), ("b", "it's"), ("c", "say \"hi\"\\")] {
            let out = replaced(src, &[path], value);
            let docs = crate::yaml::parse_documents(&out).unwrap();
            assert_eq!(docs[0].get(path).unwrap().as_str(), Some(value));
        }
    }

    #[test]
    fn a_plain_scalar_is_quoted_when_plain_would_read_otherwise() {
        let src = "k: old\n";
        for (value, written) in [
            ("true", "\"true\""),
            ("1.5", "\"1.5\""),
            ("a: b", "\"a: b\""),
            ("", "\"\""),
            ("tab\there\n", "\"tab\\there\\n\""),
            ("bell\u{7}", "\"bell\\u0007\""),
            ("build01", "build01"),
        ] {
            let out = replaced(src, &["k"], value);
            assert_eq!(out, format!("k: {written}\n"), "{value:?}");
            let docs = crate::yaml::parse_documents(&out).unwrap();
            assert_eq!(docs[0].get("k").unwrap().as_str(), Some(value));
        }
    }

    #[test]
    fn plain_values_that_read_as_something_else_are_not_plain() {
        for v in [
            "true", "No", "y", "null", "1", "1.5", "0x1f", "1_000", "-x", ".a", "a b", "a:b", "",
        ] {
            assert!(!plain_reads_back(v), "{v}");
        }
        for v in [
            "build01",
            "k8s-infra-prow-build",
            "app.ci",
            "a_b",
            "x/y",
            "1a",
        ] {
            assert!(plain_reads_back(v), "{v}");
        }
    }

    #[test]
    fn scalar_ranges_are_the_exact_bytes_or_say_why_not() {
        let src = "# café\na: 'it''s' # c\nb: \"q\\\"\" # d\nc: plain # e\n\
                   d: |\n  block\ne: !!str x\nf: two\n  lines\ng: [x]\nh: &x v\n";
        let doc = root(src);
        let range = |k: &str| scalar_range(src, at(&doc, &[k])).map(|r| &src[r]);
        assert_eq!(range("a"), Ok("'it''s'"));
        assert_eq!(range("b"), Ok("\"q\\\"\""));
        assert_eq!(range("c"), Ok("plain"));
        assert_eq!(range("d"), Err("a block scalar"));
        assert_eq!(range("e"), Err("tagged"));
        assert_eq!(range("f"), Err("a plain scalar over several lines"));
        assert_eq!(range("g"), Err("not a scalar"));
        assert_eq!(property(src, at(&doc, &["h"])), "&x");
    }

    #[test]
    fn an_entry_is_inserted_after_another_at_its_indentation() {
        let src = "jobs:\n  - name: a # c\n    other: 1\n  - other: 2\n    name: b\n";
        let doc = root(src);
        let jobs = at(&doc, &["jobs"]).items();
        let edits = jobs
            .iter()
            .map(|job| {
                let (key, value) = job
                    .entries()
                    .iter()
                    .find(|(k, _)| k.as_str() == Some("name"))
                    .unwrap();
                insert_entry_after(src, job, key, value, "cluster: x").unwrap()
            })
            .collect();
        assert_eq!(
            apply(src, edits).unwrap(),
            "jobs:\n  - name: a # c\n    cluster: x\n    other: 1\n  - other: 2\n    name: b\n    cluster: x\n"
        );
    }

    #[test]
    fn an_entry_inserted_at_the_end_gets_the_texts_line_ending() {
        let src = "a: 1\r\nb:\r\n  name: x";
        let doc = root(src);
        let map = at(&doc, &["b"]);
        let (key, value) = &map.entries()[0];
        let edit = insert_entry_after(src, map, key, value, "k: v").unwrap();
        assert_eq!(
            apply(src, vec![edit]).unwrap(),
            "a: 1\r\nb:\r\n  name: x\r\n  k: v"
        );
    }

    #[test]
    fn in_a_flow_mapping_the_entry_follows_the_value() {
        let src = "- {name: 'a', other: 1}\n";
        let doc = root(src);
        let map = &doc.items()[0];
        assert_eq!(map.form, Form::Flow);
        let (key, value) = &map.entries()[0];
        let edit = insert_entry_after(src, map, key, value, "k: v").unwrap();
        assert_eq!(
            apply(src, vec![edit]).unwrap(),
            "- {name: 'a', k: v, other: 1}\n"
        );
        // The value must be a one-line scalar.
        let src = "name: [a]\n";
        let doc = root(src);
        let (key, value) = &doc.entries()[0];
        assert_eq!(
            insert_entry_after(src, &doc, key, value, "k: v"),
            Err("not a scalar")
        );
    }

    #[test]
    fn edits_apply_in_any_order_and_must_not_overlap() {
        let src = "0123456789";
        let out = apply(
            src,
            vec![
                Edit::replace(6..8, "x"),
                Edit::insert(8, "y"),
                Edit::replace(1..3, "ab"),
                Edit::insert(8, "z"),
            ],
        );
        assert_eq!(out.as_deref(), Ok("0ab345xyz89"));
        assert_eq!(
            apply(src, vec![Edit::replace(1..5, ""), Edit::replace(4..6, "")]),
            Err("overlapping edits")
        );
        assert_eq!(
            apply("é", vec![Edit::insert(1, "x")]),
            Err("an edit outside the text or inside a character")
        );
        assert_eq!(apply(src, Vec::new()).as_deref(), Ok(src));
    }

    #[test]
    fn line_helpers() {
        let src = "a:\r\n  b  : c\r\nd: e";
        let b = src.find('b').unwrap();
        assert_eq!(line_end(src, b), src.find(" c").unwrap() + 2);
        assert_eq!(line_end(src, src.len() - 1), src.len());
        assert_eq!(indent_of(src, b + 1), 2);
        assert_eq!(indent_of(src, 0), 0);
        assert_eq!(eol(src), "\r\n");
        assert_eq!(eol("a\nb"), "\n");
        let doc = root(src);
        let key = &doc.entries()[0].1.entries()[0].0;
        assert_eq!(&src[after_colon(src, key).unwrap()..], " c\r\nd: e");
    }
}
