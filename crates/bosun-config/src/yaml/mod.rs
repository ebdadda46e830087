//! YAML with positions, for bosun's configuration and for the commands that
//! edit configuration files.
//!
//! Why not `serde_yaml` or a similar crate: diagnostics must name the file, line and
//! column of *any* field (not only of the first syntax error), unknown fields are
//! warnings that must point at the offending key, one bad job must not hide the
//! others in the same file, and duplicate keys are errors. That needs a tree with a
//! position on every node; and a command that rewrites a value in a file must
//! change those bytes and no others, which needs each node's bytes.
//!
//! - `tree`: the tree, built from `saphyr-parser`'s events: each
//!   node's line and column, byte span and written form; YAML's meaning
//!   ([`parse_documents`]) or the text's shape ([`parse_as_written`]).
//! - `go`: Go's key matching, how Prow reads a key as a struct field
//!   ([`go_fold_eq`], [`Node::go_fields`]).
//! - `de`: the serde deserializer over the tree ([`from_node`],
//!   [`from_node_as_go`]).
//! - [`edit`]: changing the text in place: a scalar's bytes replaced in its
//!   quoting, a line inserted after an entry, a set of edits applied.

mod de;
pub mod edit;
mod go;
mod tree;

pub use de::{from_node, from_node_as_go, DeError, KeyNotes};
pub use go::{go_fold_eq, go_key_field, go_order, FoldedKey, GoFields, UnknownField};
pub use tree::{
    parse_as_written, parse_documents, AsWritten, Form, Mark, Node, Span, Value, YamlError,
};
