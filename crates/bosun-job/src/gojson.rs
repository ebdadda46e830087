//! JSON as Go's `encoding/json` writes it, for the files and options Prow's
//! programs read from bosun: `JOB_SPEC`, the pod utilities' options,
//! `clone-records.json`, `started.json`, `finished.json`, `prowjob.json`.
//!
//! Go's `json.Marshal` writes struct fields in declaration order and leaves
//! an `omitempty` field out when it is empty; bosun's serializable structs
//! declare their fields in Go's order and use the `skip_serializing_if`
//! predicates here (`empty_str`, `is_false`, `is_zero`). On top of
//! that, [`go_json`] writes what serde_json writes differently:
//! - `<`, `>`, `&`, U+2028 and U+2029 inside strings are escaped as
//!   `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029` (Go's HTML escaping,
//!   on by default);
//! - floating-point numbers are printed as Go prints a `float64`
//!   ([`go_float`]: `1` for `1.0`, `1e+21`).
//!
//! `RefsJson` is Prow's `Refs` (with its `Pull`s) in Go's field order and
//! with Go's `omitempty`, as `JOB_SPEC`, `CLONEREFS_OPTIONS` and the clone
//! records hold it.

use std::io::{self, Write};

use bosun_config::types::{Pull, Refs};
use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter, PrettyFormatter};

/// `value` as Go's `json.Marshal` writes it (no trailing newline).
pub fn go_json<T: Serialize + ?Sized>(value: &T) -> String {
    render(value, GoFormatter(CompactFormatter))
}

/// `value` as Go's `json.MarshalIndent(value, "", "\t")` writes it.
pub fn go_json_indent<T: Serialize + ?Sized>(value: &T) -> String {
    render(value, GoFormatter(PrettyFormatter::with_indent(b"\t")))
}

fn render<T: Serialize + ?Sized, F: Formatter>(value: &T, formatter: F) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut ser)
        .expect("bosun's JSON documents serialize");
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// A `float64` as Go's `encoding/json` prints it: the shortest digits that
/// read back the same, plain below 1e21 and from 1e-6, else with an exponent
/// (`1e+21`, `1e-7`).
pub fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').expect("LowerExp has an exponent");
        match exp.strip_prefix('-') {
            Some(neg) => format!("{mantissa}e-{neg}"),
            None => format!("{mantissa}e+{exp}"),
        }
    } else {
        format!("{f}")
    }
}

/// `omitempty` of a Go string.
pub fn empty_str(s: &str) -> bool {
    s.is_empty()
}

/// `omitempty` of a Go `bool`.
pub fn is_false(b: &bool) -> bool {
    !*b
}

/// `omitempty` of a Go integer.
pub fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// An optional string as Go holds it: unset is empty.
fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

/// Prow's `Refs` as Go writes it: its fields in Prow's order, the
/// `omitempty` ones left out when empty (`org`, `repo` always written).
#[derive(Serialize)]
pub struct RefsJson<'a> {
    org: &'a str,
    repo: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    repo_link: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    base_ref: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    base_sha: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    base_link: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pulls: Vec<PullJson<'a>>,
    #[serde(skip_serializing_if = "empty_str")]
    path_alias: &'a str,
    #[serde(skip_serializing_if = "is_false")]
    workdir: bool,
    #[serde(skip_serializing_if = "is_false")]
    auxiliary: bool,
    #[serde(skip_serializing_if = "empty_str")]
    clone_uri: &'a str,
    #[serde(skip_serializing_if = "is_false")]
    skip_submodules: bool,
    #[serde(skip_serializing_if = "is_zero")]
    clone_depth: i64,
    #[serde(skip_serializing_if = "is_false")]
    skip_fetch_head: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    blobless_fetch: Option<bool>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    sparse_checkout_files: &'a [String],
}

/// Prow's `Pull` as Go writes it (`number`, `author`, `sha` always written;
/// bosun's pull has no `head_ref`).
#[derive(Serialize)]
struct PullJson<'a> {
    number: i64,
    author: &'a str,
    sha: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    title: &'a str,
    #[serde(rename = "ref", skip_serializing_if = "empty_str")]
    ref_: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    link: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    commit_link: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    author_link: &'a str,
}

impl<'a> From<&'a Refs> for RefsJson<'a> {
    fn from(r: &'a Refs) -> Self {
        RefsJson {
            org: &r.org,
            repo: &r.repo,
            repo_link: opt(&r.repo_link),
            base_ref: opt(&r.base_ref),
            base_sha: opt(&r.base_sha),
            base_link: opt(&r.base_link),
            pulls: r.pulls.iter().map(PullJson::from).collect(),
            path_alias: opt(&r.path_alias),
            workdir: r.workdir,
            auxiliary: r.auxiliary,
            clone_uri: opt(&r.clone_uri),
            skip_submodules: r.skip_submodules,
            clone_depth: r.clone_depth,
            skip_fetch_head: r.skip_fetch_head,
            blobless_fetch: r.blobless_fetch,
            sparse_checkout_files: &r.sparse_checkout_files,
        }
    }
}

impl<'a> From<&'a Pull> for PullJson<'a> {
    fn from(p: &'a Pull) -> Self {
        PullJson {
            number: p.number,
            author: &p.author,
            sha: &p.sha,
            title: opt(&p.title),
            ref_: opt(&p.ref_),
            link: opt(&p.link),
            commit_link: opt(&p.commit_link),
            author_link: opt(&p.author_link),
        }
    }
}

/// serde_json's compact or pretty layout with Go's escaping and `float64`
/// printing.
struct GoFormatter<F>(F);

impl<F: Formatter> Formatter for GoFormatter<F> {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(go_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        w.write_all(go_float(f64::from(value)).as_bytes())
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let escaped = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            w.write_all(&fragment.as_bytes()[start..i])?;
            w.write_all(escaped.as_bytes())?;
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        self.0.write_char_escape(w, escape)
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_written_in_prows_field_order_without_empty_fields() {
        let refs = Refs {
            org: "o".into(),
            repo: "r".into(),
            base_ref: Some("main".into()),
            base_sha: Some(String::new()),
            pulls: vec![Pull {
                number: 7,
                author: "a".into(),
                sha: "s".into(),
                ref_: Some("refs/pull/7/head".into()),
                title: Some("<b> & c".into()),
                ..Pull::default()
            }],
            workdir: true,
            clone_depth: 1,
            blobless_fetch: Some(false),
            ..Refs::default()
        };
        assert_eq!(
            go_json(&RefsJson::from(&refs)),
            r#"{"org":"o","repo":"r","base_ref":"main","pulls":[{"number":7,"author":"a","sha":"s","title":"\u003cb\u003e \u0026 c","ref":"refs/pull/7/head"}],"workdir":true,"clone_depth":1,"blobless_fetch":false}"#
        );
        assert_eq!(
            go_json(&RefsJson::from(&Refs::default())),
            r#"{"org":"","repo":""}"#
        );
    }

    #[test]
    fn html_characters_are_escaped_in_keys_and_values_and_indent_is_a_tab() {
        let v = serde_json::json!({"a<b": ["x>y", "\u{2028}\u{2029}"], "n": 1.0});
        assert_eq!(
            go_json(&v),
            r#"{"a\u003cb":["x\u003ey","\u2028\u2029"],"n":1}"#
        );
        assert_eq!(
            go_json_indent(&serde_json::json!({"k": [1]})),
            "{\n\t\"k\": [\n\t\t1\n\t]\n}"
        );
    }
}
