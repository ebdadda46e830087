//! Prow's HMAC secret file (`--hmac-secret-file`, `/etc/webhook/hmac` by
//! default), read as Prow's hook reads it, and the signatures made with its
//! tokens.
//!
//! The file is YAML: a mapping from a level to its tokens, each
//! `{value, created_at}`. A level is `"*"` (every repository), an
//! organization (`org`) or a repository (`org/repo`):
//!
//! ```yaml
//! '*':         [{value: abc,  created_at: 2020-10-02T15:00:00Z}]
//! 'org1':      [{value: abc1, created_at: 2020-10-02T15:00:00Z}]
//! 'org2/repo': [{value: abc2, created_at: 2020-10-02T15:00:00Z}]
//! ```
//!
//! A file that does not read as that mapping is one global token, the whole
//! file with its surrounding white space trimmed (Prow's older, "legacy"
//! format); an empty file is the mapping with no levels, so it accepts
//! nothing.
//!
//! A delivery's tokens ([`Secrets::tokens_for`]) are those of the **first
//! present** of its repository's level, its organization's level and `"*"`,
//! and only those: when a repository has a level of its own, its
//! organization's tokens are not tried. Any token of that level may sign the
//! delivery, so a new token is added beside the old one while the forge's
//! hooks are changed over (rotation), and the old one removed after.
//! `created_at` says when a token was made (Prow's `hmac` tool prunes older
//! tokens by it); checking a delivery does not read it.

use std::collections::BTreeMap;
use std::fmt;

use hmac::{Hmac, Mac};
use jiff::Timestamp;
use serde::Deserialize;
use sha2::Sha256;

/// The level that holds the tokens of every repository with no level of its
/// own nor of its organization.
pub const GLOBAL_LEVEL: &str = "*";

/// One token of the secret file.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    value: Vec<u8>,
    created_at: Option<Timestamp>,
}

impl Token {
    /// A token with this value and creation time.
    pub fn new(value: impl Into<Vec<u8>>, created_at: Option<Timestamp>) -> Token {
        Token {
            value: value.into(),
            created_at,
        }
    }

    /// The secret itself, the HMAC key (or, for GitLab, the token the forge
    /// sends as it is).
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// When the token was made, if the file says (never for the legacy token).
    pub fn created_at(&self) -> Option<Timestamp> {
        self.created_at
    }
}

/// The value is a secret: it is never printed, only its length.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("value", &format_args!("<{} bytes>", self.value.len()))
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// The secret file as read: its levels, or the one legacy token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secrets {
    form: Form,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    /// Level (`*`, `org`, `org/repo`) to its tokens.
    Levels(BTreeMap<String, Vec<Token>>),
    /// The whole trimmed file, one token for every repository.
    Legacy(Token),
}

/// One entry of a level's list as the file spells it.
#[derive(Deserialize)]
struct RawToken {
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
}

impl Secrets {
    /// Reads the secret file's bytes as Prow does: the hierarchical mapping
    /// when they read as one, else one legacy token (the whole file, trimmed).
    /// Never fails: whatever does not read as the mapping is a token.
    ///
    /// What reads as the mapping: a YAML mapping from strings to lists (or
    /// null) of `{value, created_at}`, where `created_at`, when given, is an
    /// RFC 3339 time; the first document of the file is read, and an empty or
    /// null document is the mapping with no levels.
    pub fn parse(file: &[u8]) -> Secrets {
        let trimmed = trim(file);
        match std::str::from_utf8(trimmed).ok().and_then(levels) {
            Some(levels) => Secrets {
                form: Form::Levels(levels),
            },
            None => Secrets::legacy(trimmed),
        }
    }

    /// One token for every repository, as a legacy file gives.
    pub fn legacy(token: impl Into<Vec<u8>>) -> Secrets {
        Secrets {
            form: Form::Legacy(Token::new(token, None)),
        }
    }

    /// The hierarchical form, from its levels.
    pub fn from_levels(levels: impl IntoIterator<Item = (String, Vec<Token>)>) -> Secrets {
        Secrets {
            form: Form::Levels(levels.into_iter().collect()),
        }
    }

    /// Whether the file was one legacy token.
    pub fn is_legacy(&self) -> bool {
        matches!(self.form, Form::Legacy(_))
    }

    /// The levels of the hierarchical form, in order of their names (none for
    /// a legacy file).
    pub fn levels(&self) -> impl Iterator<Item = (&str, &[Token])> {
        let levels = match &self.form {
            Form::Levels(levels) => Some(levels),
            Form::Legacy(_) => None,
        };
        levels
            .into_iter()
            .flatten()
            .map(|(level, tokens)| (level.as_str(), tokens.as_slice()))
    }

    /// The tokens that may sign a delivery for `org_repo` (a repository's
    /// full name `org/repo`, or an organization's name for an event with no
    /// repository, or empty for neither): those of the first present of the
    /// levels `org_repo`, its organization (the part before the first `/`)
    /// and `"*"`; the legacy token for a legacy file; `None` when no level
    /// is present, and then nothing may sign it.
    ///
    /// A present level is used alone even when none of its tokens matches:
    /// a repository's own level shuts its organization's tokens out.
    pub fn tokens_for(&self, org_repo: &str) -> Option<&[Token]> {
        let levels = match &self.form {
            Form::Legacy(token) => return Some(std::slice::from_ref(token)),
            Form::Levels(levels) => levels,
        };
        let org = org_repo.split('/').next().unwrap_or_default();
        [org_repo, org, GLOBAL_LEVEL]
            .into_iter()
            .find_map(|level| levels.get(level))
            .map(Vec::as_slice)
    }
}

/// The file's levels, or `None` when it does not read as them.
fn levels(text: &str) -> Option<BTreeMap<String, Vec<Token>>> {
    let docs = bosun_config::yaml::parse_documents(text).ok()?;
    let Some(doc) = docs.first().filter(|doc| !doc.is_null()) else {
        return Some(BTreeMap::new());
    };
    let unknown = Default::default();
    let raw: BTreeMap<String, Option<Vec<RawToken>>> =
        bosun_config::yaml::from_node(doc, &unknown).ok()?;
    raw.into_iter()
        .map(|(level, tokens)| {
            let tokens = tokens
                .unwrap_or_default()
                .into_iter()
                .map(|raw| {
                    let created_at = match raw.created_at {
                        Some(at) => Some(at.parse::<Timestamp>().ok()?),
                        None => None,
                    };
                    Some(Token::new(raw.value.unwrap_or_default(), created_at))
                })
                .collect::<Option<Vec<_>>>()?;
            Some((level, tokens))
        })
        .collect()
}

/// The file without the white space around it (Prow trims it on reading):
/// Unicode white space when the file is UTF-8, ASCII's otherwise.
fn trim(file: &[u8]) -> &[u8] {
    match std::str::from_utf8(file) {
        Ok(text) => text.trim().as_bytes(),
        Err(_) => file.trim_ascii(),
    }
}

/// HMAC-SHA256 of `body` keyed by `key`: what GitHub sends, hex-encoded, in
/// `X-Hub-Signature-256` (after `sha256=`) and Gitea in `X-Gitea-Signature`.
pub fn hmac_sha256(key: &[u8], body: &[u8]) -> [u8; 32] {
    mac(key, body).finalize().into_bytes().into()
}

/// `X-Hub-Signature-256`'s value for `body` signed with `key`:
/// `sha256=` and the lowercase hex of [`hmac_sha256`].
pub fn github_signature(key: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac_sha256(key, body)))
}

/// Whether `signature` (raw bytes) is the HMAC-SHA256 of `body` keyed by
/// `key`, compared in constant time (`hmac`'s own comparison).
pub fn verify_hmac_sha256(key: &[u8], body: &[u8], signature: &[u8]) -> bool {
    mac(key, body).verify_slice(signature).is_ok()
}

fn mac(key: &[u8], body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length (a long one is hashed first).
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(body);
    mac
}

/// Prow's secret file example (forge.md, Prow's `hmac_test.go`), for the
/// tests of this module and of the intake.
#[cfg(test)]
pub(crate) const PROW_EXAMPLE: &str = "\
'*':        [{value: abc,  created_at: 2020-10-02T15:00:00Z}, {value: key,  created_at: 2018-10-02T15:00:00Z}]
'org1':     [{value: abc1, created_at: 2020-10-02T15:00:00Z}]
'org2/repo': [{value: abc2, created_at: 2020-10-02T15:00:00Z}]
";

#[cfg(test)]
mod tests {
    use super::*;

    fn values(tokens: Option<&[Token]>) -> Option<Vec<&str>> {
        tokens.map(|tokens| {
            tokens
                .iter()
                .map(|t| std::str::from_utf8(t.value()).unwrap())
                .collect()
        })
    }

    #[test]
    fn prows_example_reads_as_levels_and_picks_the_most_specific_present() {
        let secrets = Secrets::parse(PROW_EXAMPLE.as_bytes());
        assert!(!secrets.is_legacy());
        let levels: Vec<_> = secrets.levels().map(|(l, t)| (l, t.len())).collect();
        assert_eq!(levels, [("*", 2), ("org1", 1), ("org2/repo", 1)]);
        // The repository's own level.
        assert_eq!(values(secrets.tokens_for("org2/repo")), Some(vec!["abc2"]));
        // Another repository of org2: no level for it nor for org2, so `*`.
        assert_eq!(
            values(secrets.tokens_for("org2/other")),
            Some(vec!["abc", "key"])
        );
        // The organization's level, for a repository and for the org alone.
        assert_eq!(values(secrets.tokens_for("org1/any")), Some(vec!["abc1"]));
        assert_eq!(values(secrets.tokens_for("org1")), Some(vec!["abc1"]));
        // Neither repository nor organization: only `*`.
        assert_eq!(values(secrets.tokens_for("")), Some(vec!["abc", "key"]));
        let first = &secrets.tokens_for("x/y").unwrap()[0];
        assert_eq!(
            first.created_at(),
            Some("2020-10-02T15:00:00Z".parse().unwrap())
        );
    }

    #[test]
    fn no_present_level_means_no_tokens() {
        let secrets = Secrets::parse(b"org1: [{value: abc1}]\n");
        assert_eq!(values(secrets.tokens_for("org2/repo")), None);
        assert_eq!(values(secrets.tokens_for("")), None);
        // A level present with no tokens is still the level used.
        let secrets = Secrets::parse(b"org1/repo: []\n'*': [{value: abc}]\n");
        assert_eq!(values(secrets.tokens_for("org1/repo")), Some(vec![]));
        let secrets = Secrets::parse(b"org1/repo:\n'*': [{value: abc}]\n");
        assert_eq!(values(secrets.tokens_for("org1/repo")), Some(vec![]));
    }

    #[test]
    fn what_does_not_read_as_the_mapping_is_one_trimmed_token() {
        for (file, token) in [
            (&b"  s3cret\n"[..], &b"s3cret"[..]),
            (b"\tabc:def\n", b"abc:def"),
            // A level whose value is not a list.
            (b"org: abc\n", b"org: abc"),
            // A created_at that is not a time.
            (
                b"org: [{value: a, created_at: yesterday}]",
                b"org: [{value: a, created_at: yesterday}]",
            ),
            // Not YAML at all.
            (b"[abc", b"[abc"),
            (b"- abc", b"- abc"),
            (b"\xff\xfe token \n", b"\xff\xfe token"),
        ] {
            let secrets = Secrets::parse(file);
            assert!(secrets.is_legacy(), "{:?}", String::from_utf8_lossy(file));
            let tokens = secrets.tokens_for("any/repo").unwrap();
            assert_eq!(tokens.len(), 1);
            assert_eq!(tokens[0].value(), token);
            assert_eq!(secrets.tokens_for("").unwrap()[0].value(), token);
        }
    }

    #[test]
    fn an_empty_file_accepts_nothing() {
        for file in [&b""[..], b"  \n", b"~", b"null\n"] {
            let secrets = Secrets::parse(file);
            assert!(!secrets.is_legacy());
            assert_eq!(secrets.levels().count(), 0);
            assert!(secrets.tokens_for("org/repo").is_none());
        }
    }

    #[test]
    fn prows_and_githubs_test_vectors() {
        assert_eq!(
            github_signature(b"abc", b"{}"),
            "sha256=19092633e5aa9a849dfcc9d2df4e76db2df1fcba7f38915f2c7833bd8a510f2f"
        );
        assert_eq!(
            github_signature(b"abc1", br#"{"organization": {"login": "org1"}}"#),
            "sha256=87e9dcd175b5188a43e6ba0511da057b51f38f5a88088b198f26db13f1409280"
        );
        assert_eq!(
            github_signature(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
        let sig = hmac_sha256(b"abc", b"{}");
        assert!(verify_hmac_sha256(b"abc", b"{}", &sig));
        assert!(!verify_hmac_sha256(b"abd", b"{}", &sig));
        assert!(!verify_hmac_sha256(b"abc", b"{} ", &sig));
        assert!(!verify_hmac_sha256(b"abc", b"{}", &sig[..31]));
    }

    #[test]
    fn a_tokens_value_is_never_printed() {
        let secrets = Secrets::parse(PROW_EXAMPLE.as_bytes());
        let printed = format!("{secrets:?}");
        assert!(!printed.contains("abc"), "{printed}");
        assert!(printed.contains("<4 bytes>"), "{printed}");
    }
}
