//! `bosun clusters`: the build clusters over the API (`GET
//! /api/v1/clusters`): alias, kind, slots, health, and whether the cluster
//! is trusted, with its allow rules.

use bosun_base::command::Outcome;
use std::io::Write;

use clap::Args;
use serde_json::Value;

use crate::client::{columns, Api, Format, OutputArgs, ServerArgs};

/// `bosun clusters` arguments.
#[derive(Args, Debug, Clone)]
pub struct ClustersArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Lists the build clusters: one row each, and under a cluster that is not
/// healthy the reason.
pub fn clusters(args: &ClustersArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    let answer = api.check(api.get("/api/v1/clusters")?, None)?;
    if args.output.output == Format::Json {
        return answer.print(out);
    }
    let v = answer.json()?;
    let mut rows = vec![vec![
        "ALIAS".to_string(),
        "KIND".into(),
        "SLOTS".into(),
        "STATUS".into(),
        "TRUSTED".into(),
    ]];
    let mut reasons = Vec::new();
    for c in v["clusters"].as_array().into_iter().flatten() {
        let alias = c["alias"].as_str().unwrap_or_default().to_string();
        let slots = match c["slots"].as_u64() {
            Some(0) => "unlimited".to_string(),
            Some(n) => n.to_string(),
            None => "-".to_string(),
        };
        rows.push(vec![
            alias.clone(),
            c["kind"].as_str().unwrap_or("-").into(),
            slots,
            c["status"].as_str().unwrap_or("-").into(),
            trusted(&c["trusted"]),
        ]);
        if let Some(r) = c["reason"].as_str() {
            reasons.push(format!("{alias}: {r}"));
        }
    }
    columns(out, &rows)?;
    for r in reasons {
        writeln!(out, "  {r}")?;
    }
    Ok(())
}

/// A cluster's `trusted` in words: `no`, or its allow rules (`jobs=A,B
/// repos=ORG/REPO types=periodic`, a rule's given fields), `; ` between
/// rules.
fn trusted(rules: &Value) -> String {
    let Some(rules) = rules.as_array() else {
        return "no".to_string();
    };
    if rules.is_empty() {
        return "yes: no rule, no job admitted".to_string();
    }
    let words: Vec<String> = rules
        .iter()
        .map(|rule| {
            let fields: Vec<String> = ["jobs", "repos", "types"]
                .iter()
                .filter_map(|k| {
                    let items: Vec<&str> = rule[*k]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    (!items.is_empty()).then(|| format!("{k}={}", items.join(",")))
                })
                .collect();
            if fields.is_empty() {
                "any job".to_string()
            } else {
                fields.join(" ")
            }
        })
        .collect();
    format!("yes: {}", words.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_rules_in_words() {
        assert_eq!(trusted(&Value::Null), "no");
        assert_eq!(
            trusted(&serde_json::json!([])),
            "yes: no rule, no job admitted"
        );
        assert_eq!(
            trusted(&serde_json::json!([
                {"jobs": ["label-sync"], "repos": [], "types": ["periodic"]},
                {"jobs": [], "repos": ["org/app", "org/b"], "types": ["postsubmit"]},
                {"jobs": [], "repos": [], "types": []},
            ])),
            "yes: jobs=label-sync types=periodic; repos=org/app,org/b types=postsubmit; any job"
        );
    }
}
