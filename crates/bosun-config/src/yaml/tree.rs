//! The YAML tree: every node with its position (line and column for messages,
//! byte offsets for editing) and how it is written (quoting, flow or block,
//! anchor, alias, tag), built from `saphyr-parser`'s event stream. Scalars are
//! borrowed from the source text, so building the tree costs little more than
//! the event scan itself.
//!
//! Two readings of the same stream. [`parse_documents`] is YAML's meaning, for
//! loading: merge keys (`<<: *anchor`) are applied, duplicate keys are errors,
//! an alias holds a copy of what its anchor names (bounded, against "billion
//! laughs" documents). [`parse_as_written`] keeps the text's shape, for
//! editing: merge keys stay entries of their mapping, duplicate keys are kept,
//! and it says which anchors some alias repeats.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;

use saphyr_parser::{Event, Parser, ScalarStyle};

/// A position in a source file: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash, serde::Serialize)]
pub struct Mark {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
}

impl Mark {
    fn from_span(span: &saphyr_parser::Span) -> Mark {
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

/// Where a node is written: byte offsets into the source text (texts over
/// 4 GiB are refused).
///
/// `start` is where the node's first token starts: its anchor or tag when it
/// has one (a block scalar's content, after its `|` or `>` line). `end` is
/// exact for plain scalars, aliases and flow collections; a quoted scalar's
/// may take in what follows it on its line (a comment), and a block
/// collection's runs to the next token after it. [`super::edit::scalar_range`]
/// finds the exact bytes of a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Span {
    /// The first byte.
    pub start: u32,
    /// The byte after the last.
    pub end: u32,
}

impl Span {
    /// The span as a range of byte offsets.
    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// How a node is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Form {
    /// A plain (unquoted) scalar.
    Plain,
    /// A `'single-quoted'` scalar.
    SingleQuoted,
    /// A `"double-quoted"` scalar.
    DoubleQuoted,
    /// A literal block scalar (`|`).
    Literal,
    /// A folded block scalar (`>`).
    Folded,
    /// A block collection: indented lines (`key: value`, `- item`). Also what a
    /// node made by bosun, written nowhere, says.
    #[default]
    Block,
    /// A flow collection (`{key: value}`, `[item]`).
    Flow,
    /// An alias (`*name`): its value is a copy of the node its anchor names,
    /// and its [`Node::anchor`] is that anchor.
    Alias,
}

/// One YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    /// Where the node starts.
    pub mark: Mark,
    /// Its bytes in the source.
    pub span: Span,
    /// The id of the anchor it defines (`&name`) or, for an alias, of the one
    /// it repeats; 0 for none. The parser numbers each definition anew, so a
    /// name defined twice has two ids.
    pub anchor: u32,
    /// How it is written.
    pub form: Form,
    /// Whether a tag (`!!str`, `!custom`) is written on it.
    pub tagged: bool,
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
        /// Plain (unquoted, not `!!str`) scalars may be nulls, booleans or numbers.
        plain: bool,
    },
    /// A sequence.
    Seq(Vec<Node<'a>>),
    /// A mapping, in source order. Its keys are scalars. Read by
    /// [`parse_documents`], keys are unique (duplicates are an error; only a
    /// value merged from several keys, see [`Node::go_field`], may repeat one).
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

    /// Whether this node is an alias (`*name`).
    pub fn is_alias(&self) -> bool {
        self.form == Form::Alias
    }

    /// The id of the anchor this node defines (`&name`), if it defines one.
    pub fn defined_anchor(&self) -> Option<u32> {
        (self.anchor != 0 && !self.is_alias()).then_some(self.anchor)
    }
}

pub(super) fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// Parses every document of a YAML stream, as YAML means it: merge keys are
/// applied, duplicate keys are errors. An empty stream has no documents.
pub fn parse_documents(src: &str) -> Result<Vec<Node<'_>>, YamlError> {
    Ok(parse(src, Reading::Meaning)?.docs)
}

/// The documents of a YAML stream as written, for editing the text.
#[derive(Debug)]
pub struct AsWritten<'a> {
    /// Every document: merge keys (`<<`) are entries of their mapping like
    /// any other, and duplicate keys are kept.
    pub docs: Vec<Node<'a>>,
    /// The ids of the anchors some alias repeats.
    pub aliased: HashSet<u32>,
}

impl AsWritten<'_> {
    /// Whether `node` defines an anchor that some alias repeats, so that
    /// editing it would edit what the alias says too.
    pub fn is_aliased(&self, node: &Node<'_>) -> bool {
        node.defined_anchor()
            .is_some_and(|id| self.aliased.contains(&id))
    }
}

/// Parses every document of a YAML stream as written: see [`AsWritten`].
pub fn parse_as_written(src: &str) -> Result<AsWritten<'_>, YamlError> {
    let builder = parse(src, Reading::AsWritten)?;
    Ok(AsWritten {
        docs: builder.docs,
        aliased: builder.aliased,
    })
}

/// Which tree [`parse`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Merge keys applied, duplicate keys refused: [`parse_documents`].
    Meaning,
    /// Mappings as written: [`parse_as_written`].
    AsWritten,
}

fn parse(src: &str, reading: Reading) -> Result<Builder<'_>, YamlError> {
    if u32::try_from(src.len()).is_err() {
        return Err(YamlError {
            mark: Mark { line: 1, col: 1 },
            message: "the text is over 4 GiB: too large to read".into(),
        });
    }
    let mut parser = Parser::new_from_str(src);
    let mut builder = Builder::new(src, reading);
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
    Ok(builder)
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

/// The parser counts positions in characters; nodes keep byte offsets. The
/// positions of successive events mostly move forward, so a cursor walks the
/// text once (ASCII text needs no walk: the numbers are the same).
struct ByteOffsets<'a> {
    src: &'a str,
    ascii: bool,
    /// The character index and byte offset of the cursor.
    chars: usize,
    bytes: usize,
}

impl<'a> ByteOffsets<'a> {
    fn new(src: &'a str) -> Self {
        ByteOffsets {
            src,
            ascii: src.is_ascii(),
            chars: 0,
            bytes: 0,
        }
    }

    /// The byte offset of the character at `index` (the text's length past
    /// its end), as a `u32`: the text is no longer than `u32::MAX` bytes.
    #[inline]
    fn byte(&mut self, index: usize) -> u32 {
        if self.ascii {
            index.min(self.src.len()) as u32
        } else {
            self.walk(index) as u32
        }
    }

    /// Moves the cursor to the character at `index`.
    fn walk(&mut self, index: usize) -> usize {
        // Mostly ASCII between two events: one jump.
        let ahead = index.saturating_sub(self.chars);
        if self
            .src
            .as_bytes()
            .get(self.bytes..self.bytes + ahead)
            .is_some_and(|b| b.is_ascii())
        {
            self.bytes += ahead;
            self.chars += ahead;
        }
        // A character starts at each byte that does not continue one.
        let bytes = self.src.as_bytes();
        while self.chars < index && self.bytes < bytes.len() {
            self.bytes += 1;
            while bytes.get(self.bytes).is_some_and(|b| b & 0xC0 == 0x80) {
                self.bytes += 1;
            }
            self.chars += 1;
        }
        while self.chars > index {
            let c = self.src[..self.bytes]
                .chars()
                .next_back()
                .expect("not at the start");
            self.bytes -= c.len_utf8();
            self.chars -= 1;
        }
        self.bytes
    }
}

/// All of a node but its value: what an event says of it.
#[derive(Clone, Copy)]
struct Head {
    mark: Mark,
    span: Span,
    anchor: u32,
    form: Form,
    tagged: bool,
}

impl Head {
    fn node(self, value: Value<'_>) -> Node<'_> {
        let Head {
            mark,
            span,
            anchor,
            form,
            tagged,
        } = self;
        Node {
            mark,
            span,
            anchor,
            form,
            tagged,
            value,
        }
    }
}

/// A collection being read: its head, and where its children start on the
/// builder's `items` or `entries`.
enum Frame<'a> {
    Seq(Head, usize),
    /// Also the key awaiting its value.
    Map(Head, usize, Option<Node<'a>>),
}

struct Builder<'a> {
    src: &'a str,
    reading: Reading,
    offsets: ByteOffsets<'a>,
    stack: Vec<Frame<'a>>,
    /// The items of the sequences being read, innermost last: a collection's
    /// children are moved out once, into a vector of their exact number.
    items: Vec<Node<'a>>,
    /// The entries of the mappings being read, innermost last.
    entries: Vec<(Node<'a>, Node<'a>)>,
    /// Anchored nodes with their sizes in nodes.
    anchors: Vec<Option<(Node<'a>, usize)>>,
    /// The anchors some alias repeats.
    aliased: HashSet<u32>,
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
    fn new(src: &'a str, reading: Reading) -> Self {
        Builder {
            src,
            reading,
            offsets: ByteOffsets::new(src),
            stack: Vec::new(),
            items: Vec::new(),
            entries: Vec::new(),
            anchors: Vec::new(),
            aliased: HashSet::new(),
            docs: Vec::new(),
            events: 0,
            expanded: 0,
        }
    }

    fn on_event(&mut self, event: Event<'a>, span: &saphyr_parser::Span) -> Result<(), YamlError> {
        let mark = Mark::from_span(span);
        let at = Span {
            start: self.offsets.byte(span.start.index()),
            end: self.offsets.byte(span.end.index()),
        };
        // Anchor ids count definitions: fewer than the text has bytes.
        let head = |anchor: usize, form: Form, tagged: bool| Head {
            mark,
            span: at,
            anchor: anchor as u32,
            form,
            tagged,
        };
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
                self.aliased.insert(id as u32);
                let value = self.anchors[id].as_ref().expect("checked").0.value.clone();
                self.push(head(id, Form::Alias, false).node(value))
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == ScalarStyle::Plain
                    && !tag
                        .as_ref()
                        .is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                let form = match style {
                    ScalarStyle::Plain => Form::Plain,
                    ScalarStyle::SingleQuoted => Form::SingleQuoted,
                    ScalarStyle::DoubleQuoted => Form::DoubleQuoted,
                    ScalarStyle::Literal => Form::Literal,
                    ScalarStyle::Folded => Form::Folded,
                };
                self.push(head(anchor, form, tag.is_some()).node(Value::Scalar { text, plain }))
            }
            Event::SequenceStart(anchor, tag) => {
                let head = head(anchor, self.collection_form(at), tag.is_some());
                self.stack.push(Frame::Seq(head, self.items.len()));
                Ok(())
            }
            Event::MappingStart(anchor, tag) => {
                let head = head(anchor, self.collection_form(at), tag.is_some());
                self.stack.push(Frame::Map(head, self.entries.len(), None));
                Ok(())
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame::Seq(mut head, first)) => {
                    head.span.end = at.end;
                    let items = self.items.drain(first..).collect();
                    self.push(head.node(Value::Seq(items)))
                }
                _ => Err(YamlError {
                    mark,
                    message: "unbalanced sequence end".into(),
                }),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Map(mut head, first, _)) => {
                    head.span.end = at.end;
                    let entries = self.entries.drain(first..).collect();
                    let entries = match self.reading {
                        Reading::Meaning => finish_map(entries)?,
                        Reading::AsWritten => entries,
                    };
                    self.push(head.node(Value::Map(entries)))
                }
                _ => Err(YamlError {
                    mark,
                    message: "unbalanced mapping end".into(),
                }),
            },
        }
    }

    /// A collection starting at `at` is a flow one when its start token
    /// (after its anchor and tag) is the `[` or `{` that ends `at`; a block
    /// collection's start takes no character of its own.
    fn collection_form(&self, at: Span) -> Form {
        let start = &self.src.as_bytes()[at.range()];
        match start.last() {
            Some(b'[' | b'{') => Form::Flow,
            _ => Form::Block,
        }
    }

    fn push(&mut self, node: Node<'a>) -> Result<(), YamlError> {
        if let Some(id) = node.defined_anchor() {
            let id = id as usize;
            if self.anchors.len() <= id {
                self.anchors.resize(id + 1, None);
            }
            let size = subtree_size(&node);
            self.anchors[id] = Some((node.clone(), size));
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq(..)) => self.items.push(node),
            Some(Frame::Map(_, _, key)) => match key.take() {
                None => {
                    if !matches!(node.value, Value::Scalar { .. }) {
                        return Err(YamlError {
                            mark: node.mark,
                            message: format!("mapping keys must be scalars, found {}", node.kind()),
                        });
                    }
                    *key = Some(node);
                }
                Some(k) => self.entries.push((k, node)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_one(src: &str) -> Node<'_> {
        let mut docs = parse_documents(src).unwrap();
        assert_eq!(docs.len(), 1);
        docs.remove(0)
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
    fn syntax_errors_have_positions() {
        let err = parse_documents("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.mark.line >= 1);
        assert!(!err.message.is_empty());
    }

    #[test]
    fn spans_are_byte_offsets_of_what_is_written() {
        let src = "# café ☕\nk: [ä, &a 'b', *a]\nm: {x: y}\nl:\n- naïve\n";
        let doc = parse_one(src);
        let text = |n: &Node<'_>| &src[n.span.range()];
        let k = doc.get("k").unwrap();
        assert_eq!(text(k), "[ä, &a 'b', *a]");
        assert_eq!(k.mark, Mark { line: 2, col: 4 });
        assert_eq!(text(&k.items()[0]), "ä");
        assert!(text(&k.items()[1]).starts_with("&a 'b'"));
        assert_eq!(text(&k.items()[2]), "*a");
        assert_eq!(text(doc.get("m").unwrap()), "{x: y}");
        assert_eq!(text(&doc.get("l").unwrap().items()[0]), "naïve");
    }

    #[test]
    fn forms_anchors_and_aliases_are_recorded() {
        let src = "a: plain\nb: 'single'\nc: \"double\"\nd: |\n  lit\ne: >\n  fold\n\
                   f: &f [1]\ng: *f\nh: !!str &h x\ni:\n  j: k\n";
        let doc = parse_one(src);
        let n = |k: &str| doc.get(k).unwrap();
        let forms: Vec<Form> = doc.entries().iter().map(|(_, v)| v.form).collect();
        use Form::*;
        assert_eq!(
            forms,
            [
                Plain,
                SingleQuoted,
                DoubleQuoted,
                Literal,
                Folded,
                Flow,
                Alias,
                Plain,
                Block
            ]
        );
        assert_eq!(doc.form, Block);
        let f = n("f").defined_anchor().unwrap();
        assert!(f > 0);
        assert_eq!((n("g").anchor, n("g").defined_anchor()), (f, None));
        // The alias reads as what it repeats.
        assert_eq!(n("g").items()[0].as_str(), Some("1"));
        assert!(n("h").tagged && !n("a").tagged);
        assert!(n("h").defined_anchor().is_some_and(|h| h != f));
        assert_eq!(n("a").defined_anchor(), None);
    }

    #[test]
    fn as_written_keeps_merge_keys_and_says_which_anchors_are_repeated() {
        let src = "base: &b {x: 1}\nother: &o 2\nuse:\n  <<: *b\n  y: 3\n";
        let meaning = parse_one(src);
        let keys = |n: &Node<'_>| -> Vec<String> {
            n.entries()
                .iter()
                .map(|(k, _)| k.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(keys(meaning.get("use").unwrap()), ["y", "x"]);
        let written = parse_as_written(src).unwrap();
        let doc = &written.docs[0];
        let used = doc.get("use").unwrap();
        assert_eq!(keys(used), ["<<", "y"]);
        assert!(used.get("<<").unwrap().is_alias());
        assert!(written.is_aliased(doc.get("base").unwrap()));
        assert!(!written.is_aliased(doc.get("other").unwrap()));
        assert!(!written.is_aliased(used.get("<<").unwrap()));
        // Duplicate keys are kept as written.
        let written = parse_as_written("a: 1\na: 2\n").unwrap();
        assert_eq!(written.docs[0].entries().len(), 2);
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn nodes_stay_small() {
        // Every value of every configuration file is one: their size is
        // loading's memory traffic.
        assert!(std::mem::size_of::<Node<'_>>() <= 56);
    }
}
