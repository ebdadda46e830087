//! The GitHub payloads the tests send are GitHub's: each is validated
//! against GitHub's webhook description before it is sent
//! (`requests::Request::github`); here, that the validation does refuse what
//! GitHub would not send.

use crate::requests::{
    bytes, fixture, github_example, github_example_bytes, github_schema_errors,
    push_repository_fields_added,
};

#[test]
fn the_vendored_examples_are_valid_by_githubs_description() {
    for (event, file) in [
        ("ping", "ping-organization.json"),
        ("ping", "ping-repository.json"),
        ("repository", "repository-created.json"),
        ("repository", "repository-deleted.json"),
        ("repository", "repository-renamed.json"),
        ("repository", "repository-transferred.json"),
        ("star", "star-created.json"),
    ] {
        let errors = github_schema_errors(event, &fixture(&format!("github/{file}")));
        assert!(errors.is_empty(), "{file}: {errors:#?}");
    }
}

#[test]
fn the_push_examples_lack_only_the_repository_fields_the_tests_add() {
    let added = push_repository_fields_added().map(|(field, _)| field);
    for file in [
        "push-branch-created.json",
        "push-tag-created.json",
        "push-tag-deleted.json",
    ] {
        let errors = github_schema_errors("push", &fixture(&format!("github/{file}")));
        assert!(!errors.is_empty(), "{file} is valid now: add nothing to it");
        for error in &errors {
            assert!(
                added
                    .iter()
                    .any(|f| *error == format!("/repository: \"{f}\" is a required property")),
                "{file}: {error}"
            );
        }
        let errors = github_schema_errors("push", &github_example_bytes(file));
        assert!(errors.is_empty(), "{file} completed: {errors:#?}");
    }
}

#[test]
fn a_payload_without_a_required_field_is_not_githubs() {
    let mut push = github_example("push-branch-created.json");
    push.as_object_mut().unwrap().remove("after");
    let errors = github_schema_errors("push", &bytes(&push));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("\"after\" is a required property")),
        "{errors:#?}"
    );

    let mut renamed = github_example("repository-renamed.json");
    renamed.as_object_mut().unwrap().remove("changes");
    let errors = github_schema_errors("repository", &bytes(&renamed));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("\"changes\" is a required property")),
        "{errors:#?}"
    );

    // A field of another type is refused too.
    let mut push = github_example("push-branch-created.json");
    push["forced"] = "no".into();
    let errors = github_schema_errors("push", &bytes(&push));
    assert!(
        errors.iter().any(|e| e.starts_with("/forced:")),
        "{errors:#?}"
    );
}
