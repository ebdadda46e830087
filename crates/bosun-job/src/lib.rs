//! Prow's job vocabulary, as bosun's runs carry it to their jobs, whatever
//! runs them (a pod, a PipelineRun, a local process):
//!
//! - [`env`](mod@env): Prow's run environment and `JOB_SPEC`;
//! - [`refs`]: where refs are cloned, which clone is the working directory;
//! - [`artifacts`]: the documents Prow's utilities write (`started.json`,
//!   `finished.json`, metadata, `prowjob.json`) and the ProwJob's types;
//! - [`prowjob`]: a run as its ProwJob document;
//! - [`job`]: what a decorated local run is given, and how a `bosun run-*`
//!   program takes its options;
//! - [`gojson`]: JSON exactly as Go's `encoding/json` writes it;
//! - [`gotemplate`]: bosun's Go `text/template` engine, over JSON data
//!   (Lighthouse's `value_template`, Prow's job URL template).
//!
//! Pure data and formatting: it runs nothing, and knows no executor.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod artifacts;
pub mod env;
pub mod gojson;
pub mod gotemplate;
pub mod job;
pub mod prowjob;
pub mod refs;
