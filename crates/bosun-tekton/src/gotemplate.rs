//! The Go `text/template` that Lighthouse runs over `{"Refs": refs}` for a
//! job's `pipeline_run_params[].value_template` (`makePipelineRun` in
//! jenkins-x/lighthouse `pkg/engines/tekton/utils.go`), on bosun's engine
//! ([`bosun_job::gotemplate`]), with the only function Lighthouse has:
//! `index` (no pipelines, no Go or Sprig functions).
//!
//! The data is Lighthouse's: the map `{"Refs": *v1alpha1.Refs}` with the
//! Go field names of Lighthouse's `Refs` (`Org`, `Repo`, `RepoLink`,
//! `BaseRef`, `BaseSHA`, `BaseLink`, `Pulls`, `PathAlias`, `CloneURI`,
//! `SkipSubmodules`, `CloneDepth`; and its `String` method, `PULL_REFS`'s
//! form) and `Pull` (`Number`, `Author`, `SHA`, `Title`, `Ref`, `Link`,
//! `CommitLink`, `AuthorLink`). Go's behaviour is kept where it shows: a
//! missing map key prints `<no value>`, a nil `Refs` prints `<nil>` and a
//! field of it is the error `nil pointer evaluating *v1alpha1.Refs.Org`, an
//! unknown field is `can't evaluate field F in type T`, and values print as
//! Go's `fmt` prints them (a `Pull` as `{813 alice 1a2b ...}`).

use bosun_config::types::{Pull, Refs};
use bosun_job::gotemplate::{self as engine, cant_evaluate, Language, Model, Typed};
use bosun_job::refs::refs_string;
use serde_json::{json, Value};

pub use bosun_job::gotemplate::TemplateError;

/// Lighthouse's template language: `index` only, no pipelines.
const LIGHTHOUSE: Language = Language {
    funcs: &["index"],
    pipelines: false,
};

const ROOT: &str = "map[string]interface {}";
const REFS: &str = "*v1alpha1.Refs";
const PULLS: &str = "[]v1alpha1.Pull";
const PULL: &str = "v1alpha1.Pull";

/// `Refs`'s fields, in Go's order, with their types.
const REFS_FIELDS: &[(&str, &str)] = &[
    ("Org", "string"),
    ("Repo", "string"),
    ("RepoLink", "string"),
    ("BaseRef", "string"),
    ("BaseSHA", "string"),
    ("BaseLink", "string"),
    ("Pulls", PULLS),
    ("PathAlias", "string"),
    ("CloneURI", "string"),
    ("SkipSubmodules", "bool"),
    ("CloneDepth", "int"),
];

/// `Pull`'s fields, in Go's order, with their types.
const PULL_FIELDS: &[(&str, &str)] = &[
    ("Number", "int"),
    ("Author", "string"),
    ("SHA", "string"),
    ("Title", "string"),
    ("Ref", "string"),
    ("Link", "string"),
    ("CommitLink", "string"),
    ("AuthorLink", "string"),
];

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template(engine::Template);

/// Parses `text` as the template `name` and executes it over
/// `{"Refs": refs}`.
pub fn render(name: &str, text: &str, refs: Option<&Refs>) -> Result<String, TemplateError> {
    Template::parse(name, text)?.execute(refs)
}

impl Template {
    /// Parses `text`; `name` names the template in errors (Lighthouse names
    /// it after the parameter).
    pub fn parse(name: &str, text: &str) -> Result<Template, TemplateError> {
        engine::Template::parse(name, text, &LIGHTHOUSE).map(Template)
    }

    /// Executes the template over `{"Refs": refs}` (`None`: a nil `*Refs`).
    pub fn execute(&self, refs: Option<&Refs>) -> Result<String, TemplateError> {
        let data = json!({ "Refs": refs.map(refs_json) });
        self.0.execute(&data, &Lighthouse { refs })
    }
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or_default()
}

/// `refs` as JSON with Go's field names (an unset string is empty).
fn refs_json(r: &Refs) -> Value {
    json!({
        "Org": r.org, "Repo": r.repo, "RepoLink": opt(&r.repo_link),
        "BaseRef": opt(&r.base_ref), "BaseSHA": opt(&r.base_sha),
        "BaseLink": opt(&r.base_link), "Pulls": r.pulls.iter().map(pull_json).collect::<Vec<_>>(),
        "PathAlias": opt(&r.path_alias), "CloneURI": opt(&r.clone_uri),
        "SkipSubmodules": r.skip_submodules, "CloneDepth": r.clone_depth,
    })
}

fn pull_json(p: &Pull) -> Value {
    json!({
        "Number": p.number, "Author": p.author, "SHA": p.sha, "Title": opt(&p.title),
        "Ref": opt(&p.ref_), "Link": opt(&p.link), "CommitLink": opt(&p.commit_link),
        "AuthorLink": opt(&p.author_link),
    })
}

/// Lighthouse's data to the engine.
struct Lighthouse<'a> {
    refs: Option<&'a Refs>,
}

/// The field `name` of a struct value with `fields`.
fn struct_field(
    v: &Value,
    ty: &'static str,
    fields: &[(&str, &'static str)],
    name: &str,
) -> Result<Option<Typed>, String> {
    match fields.iter().find(|(f, _)| *f == name) {
        Some((f, t)) => Ok(Some((v[*f].clone(), *t))),
        None => Err(cant_evaluate(name, ty)),
    }
}

impl Model for Lighthouse<'_> {
    fn root_type(&self) -> &'static str {
        ROOT
    }

    fn field(&self, v: &Value, ty: &'static str, name: &str) -> Result<Option<Typed>, String> {
        match ty {
            ROOT => Ok(self.key(v, ty, name)),
            REFS => match self.refs {
                _ if v.is_null() && name == "String" => Err("error calling String: runtime error: invalid memory address or nil pointer dereference".into()),
                _ if v.is_null() && REFS_FIELDS.iter().any(|(f, _)| *f == name) => {
                    Err(format!("nil pointer evaluating {REFS}.{name}"))
                }
                Some(r) if name == "String" => Ok(Some((Value::String(refs_string(r)), "string"))),
                _ if v.is_null() => Err(cant_evaluate(name, ty)),
                _ => struct_field(v, ty, REFS_FIELDS, name),
            },
            PULL => struct_field(v, ty, PULL_FIELDS, name),
            _ => Err(cant_evaluate(name, ty)),
        }
    }

    fn is_struct(&self, ty: &'static str) -> bool {
        matches!(ty, REFS | PULL)
    }

    fn elem(&self, ty: &'static str) -> &'static str {
        match ty {
            ROOT => REFS,
            PULLS => PULL,
            _ => "interface {}",
        }
    }

    fn print(&self, v: &Value, ty: &'static str) -> Option<String> {
        match ty {
            REFS => self.refs.filter(|_| !v.is_null()).map(refs_string),
            // Go's `fmt` `%v` of a struct: its fields in order.
            PULL => {
                let items: Vec<String> = PULL_FIELDS
                    .iter()
                    .map(|(f, _)| match &v[*f] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                Some(format!("{{{}}}", items.join(" ")))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> Refs {
        Refs {
            org: "jenkins-x".into(),
            repo: "lighthouse".into(),
            base_ref: Some("master".into()),
            base_sha: Some("e8d56b5".into()),
            clone_uri: Some("https://github.com/jenkins-x/lighthouse.git".into()),
            pulls: vec![
                Pull {
                    number: 813,
                    author: "abayer".into(),
                    sha: "dd64c73".into(),
                    ref_: Some("refs/pull/813/head".into()),
                    ..Pull::default()
                },
                Pull {
                    number: 814,
                    author: "abayer".into(),
                    sha: "abcdefg".into(),
                    ref_: Some("refs/pull/814/head".into()),
                    ..Pull::default()
                },
            ],
            ..Refs::default()
        }
    }

    fn run(t: &str) -> Result<String, TemplateError> {
        render("p", t, Some(&refs()))
    }

    #[test]
    fn literal_text_and_fields() {
        assert_eq!(run("bar-value").unwrap(), "bar-value");
        assert_eq!(run("").unwrap(), "");
        assert_eq!(
            run("{{ .Refs.CloneURI }}").unwrap(),
            "https://github.com/jenkins-x/lighthouse.git"
        );
        assert_eq!(
            run("{{.Refs.Org}}/{{.Refs.Repo}}@{{ .Refs.BaseRef }}").unwrap(),
            "jenkins-x/lighthouse@master"
        );
        assert_eq!(
            run("{{ .Refs.BaseLink }}|{{ .Refs.PathAlias }}|").unwrap(),
            "||"
        );
        assert_eq!(
            run("{{ .Refs.SkipSubmodules }} {{ .Refs.CloneDepth }}").unwrap(),
            "false 0"
        );
    }

    #[test]
    fn index_and_fields_of_its_result() {
        assert_eq!(run("{{ (index .Refs.Pulls 0).SHA }}").unwrap(), "dd64c73");
        assert_eq!(run("{{ (index .Refs.Pulls 1).Number }}").unwrap(), "814");
        assert_eq!(
            run("{{ index .Refs.Pulls 0 }}").unwrap(),
            "{813 abayer dd64c73  refs/pull/813/head   }"
        );
        assert_eq!(
            run("{{ index . \"Refs\" }}").unwrap(),
            "master:e8d56b5,813:dd64c73:refs/pull/813/head,814:abcdefg:refs/pull/814/head"
        );
        let e = run("{{ (index .Refs.Pulls 2).SHA }}").unwrap_err();
        assert_eq!(
            e.0,
            "template: p:1: executing \"p\" at <index .Refs.Pulls 2>: error calling index: index out of range: 2"
        );
    }

    #[test]
    fn lighthouse_range_over_pulls() {
        // Lighthouse's own test data (start-batch-pullrequest).
        let t = "{{ range $i, $v := .Refs.Pulls }}{{if $i}} {{end}}{{ $v.Ref }}{{ end }}";
        assert_eq!(run(t).unwrap(), "refs/pull/813/head refs/pull/814/head");
        let t = "{{ range $i, $v := .Refs.Pulls }}{{if $i}} {{end}}{{ $v.SHA }}{{ end }}";
        assert_eq!(run(t).unwrap(), "dd64c73 abcdefg");
        assert_eq!(
            run("{{range .Refs.Pulls}}{{.Number}},{{end}}").unwrap(),
            "813,814,"
        );
        let mut r = refs();
        r.pulls.clear();
        assert_eq!(
            render("p", "{{range .Refs.Pulls}}x{{else}}none{{end}}", Some(&r)).unwrap(),
            "none"
        );
    }

    #[test]
    fn if_else_with_and_variables() {
        assert_eq!(
            run("{{if .Refs.Pulls}}pr{{else}}push{{end}}").unwrap(),
            "pr"
        );
        assert_eq!(
            run("{{if .Refs.PathAlias}}a{{else if .Refs.BaseRef}}b{{else}}c{{end}}").unwrap(),
            "b"
        );
        assert_eq!(
            run("{{if .Nope}}a{{else if .Refs.PathAlias}}b{{else}}c{{end}}").unwrap(),
            "c"
        );
        assert_eq!(
            run("{{with .Refs.BaseRef}}on {{.}}{{end}}").unwrap(),
            "on master"
        );
        assert_eq!(
            run("{{$r := .Refs}}{{$r.Org}}-{{ $.Refs.Repo }}").unwrap(),
            "jenkins-x-lighthouse"
        );
        assert_eq!(
            run("{{range $p := .Refs.Pulls}}{{$p.Author}}{{end}}").unwrap(),
            "abayerabayer"
        );
    }

    #[test]
    fn go_missing_and_nil_behaviour() {
        assert_eq!(run("{{ .Missing }}").unwrap(), "<no value>");
        assert_eq!(run("{{ .Missing.Deeper }}").unwrap(), "<no value>");
        assert_eq!(render("p", "{{ .Refs }}", None).unwrap(), "<nil>");
        assert_eq!(
            render("p", "{{ .Refs.Org }}", None).unwrap_err().0,
            "template: p:1: executing \"p\" at <.Refs.Org>: nil pointer evaluating *v1alpha1.Refs.Org"
        );
        assert_eq!(
            run("{{ .Refs.Nope }}").unwrap_err().0,
            "template: p:1: executing \"p\" at <.Refs.Nope>: can't evaluate field Nope in type *v1alpha1.Refs"
        );
        assert_eq!(
            run("{{ (index .Refs.Pulls 0).sha }}").unwrap_err().0,
            "template: p:1: executing \"p\" at <(index .Refs.Pulls 0).sha>: can't evaluate field sha in type v1alpha1.Pull"
        );
        assert_eq!(run("{{ .Refs.String }}").unwrap(), refs_string(&refs()));
        assert!(run("{{ index nil 0 }}")
            .unwrap_err()
            .0
            .ends_with("error calling index: index of untyped nil"));
        assert!(run("{{ nil }}")
            .unwrap_err()
            .0
            .ends_with("nil is not a command"));
    }

    #[test]
    fn refs_string_is_lighthouses() {
        let mut r = refs();
        assert_eq!(
            refs_string(&r),
            "master:e8d56b5,813:dd64c73:refs/pull/813/head,814:abcdefg:refs/pull/814/head"
        );
        r.base_sha = None;
        r.pulls.clear();
        assert_eq!(refs_string(&r), "master");
    }
}
