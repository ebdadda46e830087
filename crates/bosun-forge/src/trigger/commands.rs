//! The comment commands, as Prow's regular expressions read them, and the
//! texts bosun answers with: code blocks dropped, the help comment for
//! `/test ?` and for commands that name no job, replies quoting the comment.
//!
//! Prow writes these as Go (RE2) expressions; `\s` there is ASCII
//! whitespace, so it is written `[\t\n\f\r ]` here (the `regex` crate's `\s`
//! is Unicode's), and `\b` is ASCII's too.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

/// Go's `\s`.
macro_rules! ws {
    () => {
        r"[\t\n\f\r ]"
    };
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid built-in expression")
}

static TEST_ALL: LazyLock<Regex> =
    LazyLock::new(|| re(concat!(r"(?m)^/test all,?($|", ws!(), ".*)")));
static RETEST: LazyLock<Regex> = LazyLock::new(|| re(concat!(r"(?m)^/retest", ws!(), "*$")));
static RETEST_REQUIRED: LazyLock<Regex> =
    LazyLock::new(|| re(concat!(r"(?m)^/retest-required", ws!(), "*$")));
static TEST_MANUAL_REQUIRED: LazyLock<Regex> =
    LazyLock::new(|| re(concat!(r"(?m)^/test-manual-required", ws!(), "*$")));
static OK_TO_TEST: LazyLock<Regex> =
    LazyLock::new(|| re(concat!(r"(?m)^/ok-to-test", ws!(), "*$")));
static OK_TO_TEST_CANCEL: LazyLock<Regex> =
    LazyLock::new(|| re(concat!(r"(?m)^/ok-to-test", ws!(), "+cancel", ws!(), "*$")));
static TEST_HELP: LazyLock<Regex> =
    LazyLock::new(|| re(concat!(r"(?m)^/test[ \t]*\?", ws!(), "*$")));
static EMPTY_TEST: LazyLock<Regex> = LazyLock::new(|| re(concat!(r"(?m)^/test", ws!(), "*$")));
static RETEST_WITH_TARGET: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^/retest[ \t]+[^\t\n\f\r ]"));
static TEST_WITH_ANY_TARGET: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^/test[ \t]+[^\t\n\f\r ]"));
static ANY_TEST: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^/(?:re)?test(?-u:\b)"));
/// Prow's `markdown.DropCodeBlock`: fenced blocks (``` or ~~~, a language
/// allowed after the opening fence) whose closing fence ends a line.
static CODE_BLOCK: LazyLock<Regex> =
    LazyLock::new(|| re("(?msU)^```.*(\n```\n|\n```$)|(?msU)^~~~.*(\n~~~\n|\n~~~$)"));

/// The note of a bare `/test`.
pub const TEST_WITHOUT_TARGET_NOTE: &str = "The `/test` command needs one or more targets.\n";
/// The note of `/retest` with a target.
pub const RETEST_WITH_TARGET_NOTE: &str = "The `/retest` command does not accept any targets.\n";
/// The note of `/test NAME` that names no job.
pub const TARGET_NOT_FOUND_NOTE: &str = "The specified target(s) for `/test` were not found.\n";
/// The note of `/test all` when no job runs with it.
pub const TEST_ALL_NOTHING_NOTE: &str = "No jobs can be run with `/test all`.\n";
const REQUIRED_NOTE: &str = "The following commands are available to trigger required jobs:";
const OPTIONAL_NOTE: &str = "The following commands are available to trigger optional jobs:";

/// What bosun says about itself at the end of its replies (where Prow links
/// Kubernetes' contributor guide and its own issue tracker).
pub const ABOUT: &str = "Instructions for interacting with me using PR comments: `/test <job>` or `/test all` starts jobs, `/retest` reruns the failed ones, `/test ?` lists the jobs, and `/ok-to-test` lets a trusted user approve testing a pull request from an untrusted author.";

/// The commands a comment's text holds (after [`drop_code_blocks`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Commands {
    /// `/test all`.
    pub test_all: bool,
    /// `/retest` alone on its line.
    pub retest: bool,
    /// `/retest-required`.
    pub retest_required: bool,
    /// `/test-manual-required`.
    pub test_manual_required: bool,
    /// `/ok-to-test` alone on its line.
    pub ok_to_test: bool,
    /// `/ok-to-test cancel`.
    pub ok_to_test_cancel: bool,
    /// A `/test` that may need the help comment: bare, `?`, with any
    /// target, or `/retest` with a target.
    pub may_need_help: bool,
}

impl Commands {
    /// The commands of `text`.
    pub fn of(text: &str) -> Commands {
        Commands {
            test_all: TEST_ALL.is_match(text),
            retest: RETEST.is_match(text),
            retest_required: RETEST_REQUIRED.is_match(text),
            test_manual_required: TEST_MANUAL_REQUIRED.is_match(text),
            ok_to_test: OK_TO_TEST.is_match(text),
            ok_to_test_cancel: OK_TO_TEST_CANCEL.is_match(text),
            may_need_help: EMPTY_TEST.is_match(text)
                || RETEST_WITH_TARGET.is_match(text)
                || TEST_WITH_ANY_TARGET.is_match(text)
                || TEST_HELP.is_match(text),
        }
    }

    /// Whether any command of the trigger is there (job triggers aside).
    pub fn any(&self) -> bool {
        self.test_all
            || self.retest
            || self.retest_required
            || self.test_manual_required
            || self.ok_to_test
            || self.ok_to_test_cancel
            || self.may_need_help
    }
}

/// The text without its fenced code blocks, as Prow's
/// `markdown.DropCodeBlock` drops them, so that a quoted `/test` is not a
/// command.
pub fn drop_code_blocks(text: &str) -> String {
    CODE_BLOCK.replace_all(text, "").into_owned()
}

/// Prow's `ShouldRespondWithHelp`: whether a comment gets the help comment
/// (`to_run` jobs were selected by it), and with which note: `Some("")` for
/// `/test ?`, a note for a bare `/test`, a `/retest` with a target, or a
/// `/test all` or `/test NAME` that selected nothing.
pub fn help_note(text: &str, to_run: usize) -> Option<&'static str> {
    if TEST_HELP.is_match(text) {
        Some("")
    } else if EMPTY_TEST.is_match(text) {
        Some(TEST_WITHOUT_TARGET_NOTE)
    } else if RETEST_WITH_TARGET.is_match(text) {
        Some(RETEST_WITH_TARGET_NOTE)
    } else if to_run == 0 && TEST_ALL.is_match(text) {
        Some(TEST_ALL_NOTHING_NOTE)
    } else if to_run == 0 && TEST_WITH_ANY_TARGET.is_match(text) {
        Some(TARGET_NOT_FOUND_NOTE)
    } else {
        None
    }
}

/// Prow's `ShouldRespondByPruningHelp`: a `/test` or `/retest` that started
/// something makes earlier help comments stale.
pub fn should_prune_help(text: &str) -> bool {
    ANY_TEST.is_match(text)
}

/// Prow's `IsHelpComment`: whether a bot comment is a help comment.
pub fn is_help_comment(body: &str) -> bool {
    [
        TEST_WITHOUT_TARGET_NOTE,
        RETEST_WITH_TARGET_NOTE,
        TARGET_NOT_FOUND_NOTE,
        TEST_ALL_NOTHING_NOTE,
        REQUIRED_NOTE,
        OPTIONAL_NOTE,
    ]
    .iter()
    .any(|note| body.contains(note))
}

/// Prow's `HelpMessage`: the jobs `/test all` starts (`test_all`, by name)
/// and the commands of the optional and required jobs, sorted, each in a
/// fenced block; `note` first.
pub fn help_message(
    repo: &str,
    branch: &str,
    note: &str,
    test_all: &BTreeSet<String>,
    optional: &BTreeSet<String>,
    required: &BTreeSet<String>,
) -> String {
    if test_all.is_empty() && optional.is_empty() && required.is_empty() {
        return format!("No presubmit jobs available for {repo}@{branch}");
    }
    let list = |items: &BTreeSet<String>| {
        items
            .iter()
            .map(|i| format!("\n```\n{i}\n```"))
            .collect::<String>()
    };
    let mut out = note.to_owned();
    if !required.is_empty() {
        out += &format!("{REQUIRED_NOTE}{}\n\n", list(required));
    }
    if !optional.is_empty() {
        out += &format!("{OPTIONAL_NOTE}{}\n\n", list(optional));
    }
    if test_all.len() == optional.len() + required.len() {
        out += "Use `/test all` to run all jobs.\n";
    } else if !test_all.is_empty() {
        out += &format!(
            "Use `/test all` to run the following jobs that were automatically triggered:{}\n\n",
            list(test_all)
        );
    }
    out
}

/// Prow's `FormatResponseRaw`: `@login: reply`, then, folded, the comment
/// replied to (each line quoted) with its link, and [`ABOUT`].
pub fn format_response(body: &str, url: &str, login: &str, reply: &str) -> String {
    let quoted = body
        .split('\n')
        .map(|l| format!(">{l}"))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "@{login}: {reply}\n\n<details>\n\nIn response to [this]({url}):\n\n{quoted}\n\n\n{ABOUT}\n</details>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// Prow: TestHelp, one case: (comment, matching tests, may need help,
    /// respond with note, prune).
    fn help_case(comment: &str, matching: usize, may: bool, note: Option<&str>, prune: bool) {
        let required = set(&["/test e2e", "/test e2e-serial", "/test unit"]);
        let optional = set(&["/test lint", "/test e2e-conformance-commodore64"]);
        let all: BTreeSet<String> = required.union(&optional).cloned().collect();
        let body = help_message("", "", "", &all, &optional, &required);
        assert!(!is_help_comment(comment));
        assert_eq!(Commands::of(comment).may_need_help, may, "{comment:?}");
        assert_eq!(help_note(comment, matching), note, "{comment:?}");
        match note {
            Some(note) => {
                let message = help_message("", "", note, &all, &optional, &required);
                assert_eq!(message, format!("{note}{body}"));
                assert!(is_help_comment(&message));
            }
            None => assert_eq!(should_prune_help(comment), prune, "{comment:?}"),
        }
    }

    #[test]
    fn help_empty_comment() {
        // Prow: TestHelp "empty comment is neither a failed nor a successful test trigger"
        help_case("", 0, false, None, false);
    }

    #[test]
    fn help_random_comment() {
        // Prow: TestHelp "random comment is neither a failed nor a successful test trigger"
        help_case("This is a comment about testing.", 0, false, None, false);
    }

    #[test]
    fn help_request_for_existing_test() {
        // Prow: TestHelp "request for existing test is a successful test trigger"
        help_case("/test e2e", 1, true, None, true);
    }

    #[test]
    fn help_request_for_non_existent_test() {
        // Prow: TestHelp "request for non-existent test is an unsuccessful test trigger"
        help_case("/test f2f", 0, true, Some(TARGET_NOT_FOUND_NOTE), false);
    }

    #[test]
    fn help_test_all_when_tests_exist() {
        // Prow: TestHelp "test all when tests exist is a successful test trigger"
        help_case("/test all", 1, true, None, true);
    }

    #[test]
    fn help_test_all_when_no_tests_exist() {
        // Prow: TestHelp "test all when no tests exist is an unsuccessful test trigger"
        help_case("/test all", 0, true, Some(TEST_ALL_NOTHING_NOTE), false);
    }

    #[test]
    fn help_retest_is_a_successful_trigger() {
        // Prow: TestHelp "retest is a successful test trigger"
        help_case("/retest", 1, false, None, true);
    }

    #[test]
    fn help_retest_even_when_no_tests_exist() {
        // Prow: TestHelp "retest is a successful test trigger, even when no tests exist"
        help_case("/retest", 0, false, None, true);
    }

    #[test]
    fn help_empty_test_is_invalid() {
        // Prow: TestHelp "empty /test is invalid"
        help_case("/test", 0, true, Some(TEST_WITHOUT_TARGET_NOTE), false);
    }

    #[test]
    fn help_retest_with_target_is_invalid() {
        // Prow: TestHelp "retest with target is invalid"
        help_case("/retest e2e", 0, true, Some(RETEST_WITH_TARGET_NOTE), false);
    }

    #[test]
    fn help_test_question_mark_is_a_request_for_help() {
        // Prow: TestHelp "/test ? is a request for help, not a trigger"
        help_case("/test ?", 0, true, Some(""), false);
    }

    #[test]
    fn help_message_when_no_job_is_available() {
        let none = BTreeSet::new();
        assert_eq!(
            help_message("org/repo", "main", "", &none, &none, &none),
            "No presubmit jobs available for org/repo@main"
        );
    }

    const STAY: &str = "should stay";
    const STAY_LINES: &str = "should stay\nthis one should stay as well\nand this one too\n";
    const ONE_LINE_BLOCK: &str = "```\nshould be filtered out\n```";
    const BLOCK: &str =
        "```\nshould be filtered out\nthis one should be filtered out as well\nand this one too\n```\n";
    const BLOCK_WITH_LANGUAGE: &str =
        "```shell\nshould be filtered out\nthis one should be filtered out as well\nand this one too\n```\n";

    #[test]
    fn drop_code_block_no_code_block_single_line() {
        // Prow: TestDropCodeBlock "no code block, single line"
        assert_eq!(drop_code_blocks(STAY), STAY);
    }

    #[test]
    fn drop_code_block_no_code_block_multi_lines() {
        // Prow: TestDropCodeBlock "no code block, multi-lines"
        assert_eq!(drop_code_blocks(STAY_LINES), STAY_LINES);
    }

    #[test]
    fn drop_code_block_one_single_line_block() {
        // Prow: TestDropCodeBlock "one single-line block"
        assert_eq!(drop_code_blocks(ONE_LINE_BLOCK), "");
    }

    #[test]
    fn drop_code_block_one_multi_line_block() {
        // Prow: TestDropCodeBlock "one multi-line block"
        assert_eq!(drop_code_blocks(BLOCK), "");
    }

    #[test]
    fn drop_code_block_one_multi_line_tilde_block() {
        // Prow: TestDropCodeBlock "one multi-line tilda block"
        assert_eq!(drop_code_blocks(&BLOCK.replace("```", "~~~")), "");
    }

    #[test]
    fn drop_code_block_wrapped_with_text() {
        // Prow: TestDropCodeBlock "one multi-line block, wrapped with text"
        let text = format!("{STAY_LINES}{BLOCK}{STAY_LINES}");
        assert_eq!(drop_code_blocks(&text), format!("{STAY_LINES}{STAY_LINES}"));
    }

    #[test]
    fn drop_code_block_few_multi_line_blocks() {
        // Prow: TestDropCodeBlock "few multi-line blocks"
        assert_eq!(drop_code_blocks(&BLOCK.repeat(4)), "");
    }

    #[test]
    fn drop_code_block_few_blocks_no_new_line_at_the_end() {
        // Prow: TestDropCodeBlock "few multi-line blocks, no new line at the end"
        let text = format!("{}{}", BLOCK.repeat(3), &BLOCK[..BLOCK.len() - 1]);
        assert_eq!(drop_code_blocks(&text), "");
    }

    fn wrapped(block: &str, other: &str) -> String {
        format!("{STAY}\n{block}{block}{STAY_LINES}{other}{STAY_LINES}{block}")
    }

    #[test]
    fn drop_code_block_few_blocks_some_wrapped_with_text() {
        // Prow: TestDropCodeBlock "few multi-line blocks, some wrapped with test"
        let expected = format!("{STAY}\n{STAY_LINES}{STAY_LINES}");
        assert_eq!(drop_code_blocks(&wrapped(BLOCK, BLOCK)), expected);
    }

    #[test]
    fn drop_code_block_few_tilde_blocks_some_wrapped_with_text() {
        // Prow: TestDropCodeBlock "few multi-line tilda blocks, some wrapped with test"
        let text = wrapped(BLOCK, BLOCK).replace("```", "~~~");
        assert_eq!(
            drop_code_blocks(&text),
            format!("{STAY}\n{STAY_LINES}{STAY_LINES}")
        );
    }

    #[test]
    fn drop_code_block_blocks_with_language() {
        // Prow: TestDropCodeBlock "should filter out code blocks with language"
        let text = format!(
            "{STAY}\n{BLOCK}{BLOCK_WITH_LANGUAGE}{STAY_LINES}{BLOCK}{STAY_LINES}{BLOCK_WITH_LANGUAGE}"
        );
        assert_eq!(
            drop_code_blocks(&text),
            format!("{STAY}\n{STAY_LINES}{STAY_LINES}")
        );
    }

    #[test]
    fn drop_code_block_invalid_extra_text_at_the_end() {
        // Prow: TestDropCodeBlock "invalid block: extra test at the end" (both cases)
        for text in [
            "```\nthis one is here to stay\n``` extra text",
            "```\nthis one is here to stay\n``` extra text\n",
        ] {
            assert_eq!(drop_code_blocks(text), text);
        }
    }

    #[test]
    fn drop_code_block_invalid_not_closed() {
        // Prow: TestDropCodeBlock "invalid block: not closed"
        let text = "```\nthis one is here to stay";
        assert_eq!(drop_code_blocks(text), text);
    }

    #[test]
    fn commands_read_as_prows_expressions() {
        // Go's `\s` is ASCII: a no-break space does not end `/retest`.
        assert!(Commands::of("/retest \r").retest);
        assert!(!Commands::of("/retest\u{a0}").retest);
        assert!(Commands::of("x\n/ok-to-test cancel\n").ok_to_test_cancel);
        assert!(!Commands::of("x\n/ok-to-test cancel\n").ok_to_test);
        assert!(Commands::of("/test all, please").test_all);
        assert!(!Commands::of("not /ok-to-test").any());
        assert!(should_prune_help("/retest"));
        assert!(!should_prune_help("/tests"));
    }

    #[test]
    fn a_reply_quotes_the_comment() {
        assert_eq!(
            format_response("/test\nplease", "https://x/1", "ada", "No."),
            format!("@ada: No.\n\n<details>\n\nIn response to [this](https://x/1):\n\n>/test\n>please\n\n\n{ABOUT}\n</details>")
        );
    }
}
