//! `docs/config-reference.md` is what `examples/config_reference.rs` writes
//! from `src/types.rs` (so a doc comment changed without regenerating the
//! page fails here), and the generator reads `types.rs` as serde does: every
//! documented type's keys and values are checked against serde's own lists
//! (the field names a derived `Deserialize` knows, the variants it accepts).

#[allow(dead_code)]
#[path = "../../examples/config_reference.rs"]
mod generator;

use std::cell::RefCell;

use bosun_config::types::*;
use bosun_config::yaml::{from_node, parse_documents};
use generator::{Kind, ROOTS};
use serde::de::DeserializeOwned;

const REGENERATE: &str = "run `cargo run -p bosun-config --example config_reference`";

fn types_rs() -> String {
    std::fs::read_to_string(generator::paths().0).unwrap()
}

#[test]
fn the_committed_reference_is_what_the_generator_writes() {
    let (_, page) = generator::paths();
    let want = generator::render(&types_rs()).unwrap_or_else(|e| panic!("types.rs: {e}"));
    let have = std::fs::read_to_string(&page).unwrap_or_default();
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "{} is stale ({REGENERATE}); first difference at line {}:\n  committed: {:?}\n  generated: {:?}",
            page.display(),
            line + 1,
            have.lines().nth(line).unwrap_or(""),
            want.lines().nth(line).unwrap_or(""),
        );
    }
}

/// The keys a struct's derived `Deserialize` knows, as the YAML
/// deserializer reports them for an unknown key.
fn serde_fields<T: DeserializeOwned>() -> Vec<String> {
    let docs = parse_documents("bosun_reference_probe: 1\n").unwrap();
    let unknown = RefCell::new(Vec::new());
    let _ = from_node::<T>(&docs[0], &unknown);
    let unknown = unknown.borrow();
    assert_eq!(unknown.len(), 1, "{}", std::any::type_name::<T>());
    unknown[0].expected.iter().map(|s| s.to_string()).collect()
}

/// The values an enum's derived `Deserialize` accepts, from serde's error
/// for one it does not (``unknown variant `x`, expected `a` or `b` ``).
fn serde_variants<T: DeserializeOwned + std::fmt::Debug>() -> Vec<String> {
    let docs = parse_documents("bosun_reference_probe\n").unwrap();
    let err = from_node::<T>(&docs[0], &RefCell::new(Vec::new())).unwrap_err();
    let expected = err
        .message
        .split_once("expected")
        .unwrap_or_else(|| panic!("{}", err.message))
        .1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

macro_rules! serde_lists {
    ($f:ident: $($t:ident),* $(,)?) => {
        vec![$((stringify!($t), $f::<$t>())),*]
    };
}

/// The types the page documents: the roots, then its `### \`Name\``
/// sections.
fn documented(page: &str) -> Vec<String> {
    ROOTS
        .iter()
        .map(|(r, _)| r.to_string())
        .chain(page.lines().filter_map(|l| {
            l.strip_prefix("### `")
                .and_then(|r| r.strip_suffix('`'))
                .map(str::to_string)
        }))
        .collect()
}

#[test]
fn the_generator_reads_every_documented_type_as_serde_does() {
    let src = types_rs();
    let (items, _) = generator::parse(&src).unwrap();
    let page = generator::render(&src).unwrap();
    let structs = serde_lists!(serde_fields:
        ProwConfig, Plank, DefaultDecorationConfigEntry, Sinker, Scheduler, Failover,
        ExternalScheduler, ExternalCache, InRepoConfig, ReposConfig, Preset, BuildCluster, TrustRule,
        DispatcherConfig, DispatchGroup, InRepoSource, JobBase, PipelineRunParam,
        RerunAuthConfig, TeamSlug, Refs, Pull, DecorationConfig, SchedulingOptions,
        PeriodicFields, Retry, PresubmitFields, PostsubmitFields, TriggerConfigFile, GitHubReporter,
    );
    let enums = serde_lists!(serde_variants:
        ClusterKind, DispatchUnit, DemandSource, ConcurrencyPolicy, CatchUp, JobType,
    );
    let values = ["Percent"];
    let documented = documented(&page);
    assert!(documented.len() > ROOTS.len() + 10, "{documented:?}");
    for name in &documented {
        let item = items
            .iter()
            .find(|i| &i.name == name)
            .unwrap_or_else(|| panic!("{name} is documented but not read"));
        match &item.kind {
            Kind::Struct(fields) => {
                let (_, want) = structs
                    .iter()
                    .find(|(n, _)| n == name)
                    .unwrap_or_else(|| panic!("add {name} to the structs of this test"));
                let keys: Vec<String> = fields.iter().map(|f| f.key.clone()).collect();
                assert_eq!(&keys, want, "the keys of {name}");
            }
            Kind::Enum(variants) => {
                let (_, want) = enums
                    .iter()
                    .find(|(n, _)| n == name)
                    .unwrap_or_else(|| panic!("add {name} to the enums of this test"));
                let values: Vec<String> = variants.iter().map(|v| v.value.clone()).collect();
                assert_eq!(&values, want, "the values of {name}");
            }
            Kind::Value => assert!(
                values.contains(&name.as_str()),
                "add {name} to the values of this test"
            ),
        }
    }
    // Every type the test knows is on the page (a type no key reaches any
    // more would be checked here for nothing).
    for (name, _) in structs.iter().chain(&enums) {
        assert!(
            documented.iter().any(|d| d == name),
            "{name} is not on the page"
        );
    }
}

/// A struct, an enum and the traps of a line-based reader: braces in
/// strings, raw strings and character literals, lifetimes, impl blocks.
const SAMPLE: &str = r####"
use k8s_openapi::api::core::v1::{
    EnvVar, PodSpec,
};

/// Not configuration.
fn braces() -> (&'static str, char) {
    let _ = r#"a { in a raw string"#;
    ("} in a string \" {", '{')
}

/// The top.
///
/// Second paragraph.
#[derive(Deserialize)]
#[serde(default)]
pub struct Top {
    /// A name | with a bar.
    pub name: String,
    /// Mounts.
    #[serde(rename = "volumeMounts")]
    pub volume_mounts: Vec<EnvVar>,
    #[serde(skip)]
    pub cache: u32,
    /// The kind, see [`Kind`].
    pub kind: Option<Kind>,
    /// By name.
    pub by_name: BTreeMap<String, Vec<PodSpec>>,
}

impl<'de> Deserialize<'de> for Other {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        todo!("{}", '}')
    }
}

/// Kinds.
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The first.
    #[default]
    FirstOne,
    /// Spelled otherwise.
    #[serde(rename = "2nd")]
    Second,
    /// With fields.
    Third {
        /// Inner.
        x: i64,
    },
}
"####;

fn sample_roots(src: &str) -> String {
    // The sample's `Top` stands in for every root.
    let mut s = src.to_string();
    for (root, _) in ROOTS {
        s.push_str(&format!(
            "\n/// Root {root}.\npub struct {root} {{\n    /// The top.\n    pub top: Top,\n}}\n"
        ));
    }
    s
}

#[test]
fn the_reader_takes_docs_renames_and_types_and_skips_code() {
    let (items, core_v1) = generator::parse(SAMPLE).unwrap();
    assert_eq!(
        core_v1.into_iter().collect::<Vec<_>>(),
        vec!["EnvVar".to_string(), "PodSpec".to_string()]
    );
    let names: Vec<&str> = items.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["Top", "Kind"]);
    assert_eq!(items[0].doc, "The top.\n\nSecond paragraph.");
    let Kind::Struct(fields) = &items[0].kind else {
        panic!("{:?}", items[0])
    };
    let keys: Vec<(&str, &str)> = fields
        .iter()
        .map(|f| (f.key.as_str(), f.ty.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("name", "String"),
            ("volumeMounts", "Vec<EnvVar>"),
            ("kind", "Option<Kind>"),
            ("by_name", "BTreeMap<String, Vec<PodSpec>>"),
        ]
    );
    let Kind::Enum(variants) = &items[1].kind else {
        panic!("{:?}", items[1])
    };
    let values: Vec<&str> = variants.iter().map(|v| v.value.as_str()).collect();
    assert_eq!(values, ["first_one", "2nd", "third"]);

    let page = generator::render(&sample_roots(SAMPLE)).unwrap();
    assert!(
        page.contains("| `name` | string | A name \\| with a bar. |"),
        "{page}"
    );
    assert!(page.contains(
        "| `volumeMounts` | list of [EnvVar](https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.33/#envvar-v1-core) | Mounts. |"
    ));
    assert!(page.contains("| `kind` | [`Kind`](#kind) | The kind, see `Kind`. |"));
    assert!(page.contains("| `by_name` | map of string to list of [PodSpec]("));
    assert!(page.contains("| `first_one` | The first. |"));
    assert!(page.contains("### `Top`\n\nUsed by [`ProwConfig`](#configyaml).`top`, "));
    assert!(!page.contains("cache"));
}

#[test]
fn what_the_reader_cannot_document_is_an_error() {
    let undocumented = SAMPLE.replace("    /// By name.\n", "");
    let err = generator::parse(&undocumented).unwrap_err();
    assert!(err.contains("Top.by_name has no doc comment"), "{err}");

    let flatten = SAMPLE.replace(
        "    /// Mounts.\n",
        "    /// Mounts.\n    #[serde(flatten)]\n",
    );
    let err = generator::parse(&flatten).unwrap_err();
    assert!(err.contains("#[serde(flatten)] is not supported"), "{err}");

    let unknown = sample_roots(&SAMPLE.replace("Vec<PodSpec>", "Vec<Container>"));
    let err = generator::render(&unknown).unwrap_err();
    assert!(
        err.contains("Top.by_name: the type Container is unknown"),
        "{err}"
    );

    let no_root = SAMPLE.to_string();
    let err = generator::render(&no_root).unwrap_err();
    assert!(
        err.contains("the root type ProwConfig is not in types.rs"),
        "{err}"
    );
}
