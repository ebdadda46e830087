//! Fuzzes the YAML layer alone: `parse_documents` (saphyr-parser events to a tree with
//! positions, anchors, merge keys, duplicate-key checks) and `from_node` into an
//! untyped `serde_json::Value` (the path free-form fields such as Tekton specs take).
//!
//! Input: the whole input is one YAML stream (the seeds of `config_loader` work as they
//! are). Invariants: no panic; parsing is deterministic; deserializing into a
//! `serde_json::Value`, which accepts any key, never reports an unknown field.
#![no_main]

use std::cell::RefCell;

use bosun_config::yaml::{from_node, parse_documents};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = parse_documents(text);
    assert_eq!(first, parse_documents(text), "parsing is not deterministic");
    let Ok(docs) = first else {
        return;
    };
    for doc in &docs {
        let _ = doc.kind();
        let unknown = RefCell::new(Vec::new());
        let _ = from_node::<serde_json::Value>(doc, &unknown);
        assert!(
            unknown.borrow().is_empty(),
            "unknown fields reported for an untyped value: {:?}",
            unknown.borrow()
        );
    }
});
