//! Decoration checks: Prow's `DecorationConfig.Validate` on a job's merged
//! decoration config (the matching decoration defaults under the job's own,
//! see [`DecorationView`]), and that decorated containers say what to run.
//!
//! bosun's relaxation: a job that can only ever run on local clusters (see
//! `clusters::lands_only_on_local`) needs no `utility_images` and no
//! `gcs_configuration`, which only Kubernetes pods use; what is written is
//! still checked. The config check therefore needs the cluster inventory and
//! is reached through `clusters::check`; [`check`] does the containers.

use k8s_openapi::api::core::v1::Container;

use crate::defaults::{DecorationView, UTILITY_IMAGES};
use crate::diag::Diagnostic;
use crate::model::Job;
use crate::types::{DecorationConfig, DecorationError, FreeForm};

use super::ctx::err_at;

impl DecorationConfig {
    /// Prow's `DecorationConfig.Validate`, with Prow's texts: the four
    /// utility images, a valid `gcs_configuration`, and not both an OAuth
    /// token and SSH keys. What a Kubernetes pod needs.
    pub fn validate(&self) -> Result<(), DecorationError> {
        validate_config(self, true)
    }

    /// [`validate`](Self::validate) for a job that runs only on local
    /// clusters (bosun's rule): `utility_images` and `gcs_configuration` are
    /// not required, and a `gcs_configuration` that is written must still be
    /// valid.
    pub fn validate_local(&self) -> Result<(), DecorationError> {
        validate_config(self, false)
    }

    /// Prow's refusal of a decorated container that does not say what to
    /// run.
    pub const NO_COMMAND: &'static str =
        "decorated job containers must specify command and/or args";

    /// Prow's rule for a decorated job's containers: what runs is `command`
    /// then `args`, and its first word must be there and not be empty (else
    /// [`Self::NO_COMMAND`]).
    pub fn says_what_to_run(container: &Container) -> bool {
        let cmd = container.command.as_deref().unwrap_or_default();
        let args = container.args.as_deref().unwrap_or_default();
        cmd.first().or(args.first()).is_some_and(|w| !w.is_empty())
    }
}

/// Prow's `DecorationConfig.Validate` (the first problem); `kubernetes`: the
/// images and the upload configuration are required.
fn validate_config(dc: &DecorationConfig, kubernetes: bool) -> Result<(), DecorationError> {
    // Read as Prow reads it (Prow's keys; empty images are unset).
    let dc = dc.apply_default(&DecorationConfig::default());
    if kubernetes {
        let Some(images) = &dc.utility_images else {
            return Err(DecorationError::NoUtilityImages);
        };
        let missing: Vec<&'static str> = UTILITY_IMAGES
            .into_iter()
            .filter(|k| images.get(*k).is_none_or(String::is_empty))
            .collect();
        if !missing.is_empty() {
            return Err(DecorationError::MissingUtilityImages(missing));
        }
    }
    match &dc.gcs_configuration {
        None if kubernetes => return Err(DecorationError::NoGcsConfiguration),
        None => {}
        Some(gcs) => validate_gcs(gcs).map_err(DecorationError::InvalidGcs)?,
    }
    if dc.oauth_token_secret.is_some() && !dc.ssh_key_secrets.is_empty() {
        return Err(DecorationError::OAuthAndSshKey);
    }
    Ok(())
}

/// Prow's `GCSConfiguration.Validate`: the bucket parses as a URL, every
/// media type parses, the path strategy is known, and `legacy` and `single`
/// have a default org and repo.
fn validate_gcs(gcs: &FreeForm) -> Result<(), String> {
    let field = |k: &str| gcs.get(k).and_then(FreeForm::as_str).unwrap_or_default();
    let bucket = field("bucket");
    let bucket = if bucket.contains("://") {
        bucket.to_string()
    } else {
        format!("gs://{bucket}")
    };
    if !go_url_parses(&bucket) {
        return Err(format!(
            "path {} has invalid format, expected either <bucket-name>[/<path>] or <storage-provider>://<bucket-name>[/<path>]",
            go_quote(&bucket)
        ));
    }
    if let Some(types) = gcs.get("mediaTypes").and_then(FreeForm::as_object) {
        // Go walks the map in random order; bosun reports the first by extension.
        let mut types: Vec<(&String, &FreeForm)> = types.iter().collect();
        types.sort_by(|a, b| a.0.cmp(b.0));
        for (_, t) in types {
            let t = t.as_str().unwrap_or_default();
            if let Err(e) = parse_media_type(t) {
                return Err(format!("invalid extension media type {}: {e}", go_quote(t)));
            }
        }
    }
    let strategy = field("path_strategy");
    if !matches!(strategy, "legacy" | "explicit" | "single") {
        return Err(
            r#"gcs_path_strategy must be one of "legacy", "explicit", or "single""#.to_string(),
        );
    }
    if strategy != "explicit"
        && (field("default_org").is_empty() || field("default_repo").is_empty())
    {
        return Err(format!(
            "default org and repo must be provided for GCS strategy {}",
            go_quote(strategy)
        ));
    }
    Ok(())
}

/// Go's `%q` of a string (for the printable ASCII texts these messages hold,
/// Rust's debug quoting is the same; other characters are escaped as Go does
/// for the common cases).
fn go_quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether Go's `url.Parse` accepts `s` (the checks that can fail for a
/// bucket URL): no control characters; a scheme, when there is one, starts
/// the string (`:` first is "missing protocol scheme"); without one, no `:`
/// before the first `/`; an authority's user info, host and port made of the
/// characters Go allows; well-formed `%` escapes outside the query.
fn go_url_parses(s: &str) -> bool {
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    // The fragment is unescaped too; the query is kept raw.
    let (rest, fragment) = s.split_once('#').unwrap_or((s, ""));
    if !escapes_ok(fragment) {
        return false;
    }
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    // Go's getScheme.
    let mut scheme_end = None;
    for (i, c) in rest.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return false,
            ':' => {
                scheme_end = Some(i);
                break;
            }
            _ => break,
        }
    }
    let rest = match scheme_end {
        Some(i) => &rest[i + 1..],
        None => {
            let first_segment = rest.split('/').next().unwrap_or_default();
            if first_segment.contains(':') {
                return false;
            }
            rest
        }
    };
    let Some(authority_and_path) = rest.strip_prefix("//") else {
        return escapes_ok(rest);
    };
    let (authority, path) = match authority_and_path.find('/') {
        Some(i) => authority_and_path.split_at(i),
        None => (authority_and_path, ""),
    };
    let host = match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user_ok = user.chars().all(|c| {
                c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii()
            });
            if !user_ok || !escapes_ok(user) {
                return false;
            }
            host
        }
        None => authority,
    };
    host_ok(host) && escapes_ok(path)
}

/// Go's `parseHost` and host unescaping: an `[IPv6]` literal or a name, then
/// an optional `:port` of digits.
fn host_ok(host: &str) -> bool {
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        let Some(end) = v6.find(']') else {
            return false;
        };
        (&v6[..end], &v6[end + 1..])
    } else {
        match host.rfind(':') {
            Some(i) => (&host[..i], &host[i..]),
            None => (host, ""),
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()));
    let name_ok = name.chars().all(|c| {
        c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c) || !c.is_ascii()
    });
    port_ok && name_ok && escapes_ok(name)
}

/// Every `%` starts a two-hex-digit escape.
fn escapes_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() {
                return false;
            }
            if !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// Go's `mime.ParseMediaType`, as far as its errors go (texts from Go).
fn parse_media_type(v: &str) -> Result<(), &'static str> {
    let (base, _) = v.split_once(';').unwrap_or((v, ""));
    let media = base.trim().to_lowercase();
    let (typ, rest) = consume_token(&media);
    if typ.is_empty() {
        return Err("mime: no media type");
    }
    if !rest.is_empty() {
        let Some(rest) = rest.strip_prefix('/') else {
            return Err("mime: expected slash after first token");
        };
        let (sub, rest) = consume_token(rest);
        if sub.is_empty() {
            return Err("mime: expected token after slash");
        }
        if !rest.is_empty() {
            return Err("mime: unexpected content after media subtype");
        }
    }
    let mut seen: Vec<String> = Vec::new();
    let mut rest = &v[base.len()..];
    while !rest.is_empty() {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        match consume_media_param(rest) {
            Some((key, after)) => {
                if seen.contains(&key) {
                    return Err("mime: duplicate parameter name");
                }
                seen.push(key);
                rest = after;
            }
            // Trailing semicolons are ignored.
            None if rest.trim() == ";" => break,
            None => return Err("mime: invalid media parameter"),
        }
    }
    Ok(())
}

/// Go's `isTokenChar` (RFC 1521 token characters).
fn is_token_char(c: char) -> bool {
    c.is_ascii() && c > ' ' && c != '\u{7f}' && !"()<>@,;:\\\"/[]?=".contains(c)
}

/// Go's `consumeToken`: the leading token and the rest.
fn consume_token(v: &str) -> (&str, &str) {
    let end = v.find(|c| !is_token_char(c)).unwrap_or(v.len());
    v.split_at(end)
}

/// Go's `consumeMediaParam`: `; key=value`, the key lower-cased, and the rest.
fn consume_media_param(v: &str) -> Option<(String, &str)> {
    let rest = v.trim_start().strip_prefix(';')?.trim_start();
    let (key, rest) = consume_token(rest);
    if key.is_empty() {
        return None;
    }
    let rest = rest.trim_start().strip_prefix('=')?.trim_start();
    let (value_len, after) = consume_value(rest)?;
    if value_len == 0 && after.len() == rest.len() {
        return None;
    }
    Some((key.to_lowercase(), after))
}

/// Go's `consumeValue`: a token or a quoted string (with `\` escapes); the
/// value's length and the rest; `None` for an unterminated quote.
fn consume_value(v: &str) -> Option<(usize, &str)> {
    let Some(quoted) = v.strip_prefix('"') else {
        let (token, rest) = consume_token(v);
        return Some((token.len(), rest));
    };
    let mut escaped = false;
    for (i, c) in quoted.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some((i, &quoted[i + 1..])),
            '\r' | '\n' => return None,
            _ => {}
        }
    }
    None
}

/// A decorated job's merged decoration config: Prow's validation, relaxed
/// (see [`DecorationConfig::validate_local`]) when the job can only run on
/// local clusters.
pub(super) fn check_config<K>(
    job: &Job<K>,
    dc: &DecorationView<'_>,
    local_only: bool,
    d: &mut Vec<Diagnostic>,
) {
    let result = if local_only {
        dc.merged.validate_local()
    } else {
        dc.merged.validate()
    };
    if let Err(e) = result {
        d.push(err_at(
            job,
            "decoration_config",
            format!("invalid decoration config: {e}"),
        ));
    }
}

/// A decorated job with containers: each container has a command (the
/// config itself is checked by [`check_config`]).
pub(super) fn check<K>(job: &Job<K>, _dc: &DecorationView<'_>, d: &mut Vec<Diagnostic>) {
    let containers = &job.base.spec.as_ref().expect("has containers").containers;
    for (i, c) in containers.iter().enumerate() {
        if !DecorationConfig::says_what_to_run(c) {
            d.push(err_at(
                job,
                &format!("spec.containers[{i}]"),
                DecorationConfig::NO_COMMAND,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_images_print_as_go_prints_a_string_slice() {
        let e = DecorationError::MissingUtilityImages(vec!["clonerefs", "sidecar"]);
        assert_eq!(
            e.to_string(),
            r#"the following utility images are not specified: ["clonerefs" "sidecar"]"#
        );
    }

    #[test]
    fn media_types_fail_as_go_mime_fails() {
        for (t, want) in [
            ("text/plain", Ok(())),
            ("text/plain; charset=utf-8", Ok(())),
            ("text/plain;", Ok(())),
            ("TEXT/Plain ; a=\"x y\"", Ok(())),
            ("application", Ok(())),
            ("", Err("mime: no media type")),
            ("text plain", Err("mime: expected slash after first token")),
            ("text/", Err("mime: expected token after slash")),
            (
                "text/plain x",
                Err("mime: unexpected content after media subtype"),
            ),
            ("text/plain; a", Err("mime: invalid media parameter")),
            ("text/plain; a=\"x", Err("mime: invalid media parameter")),
            (
                "text/plain; a=1; A=2",
                Err("mime: duplicate parameter name"),
            ),
        ] {
            assert_eq!(parse_media_type(t), want, "{t:?}");
        }
    }

    #[test]
    fn bucket_urls_fail_as_go_url_parse_fails() {
        for ok in [
            "gs://bucket",
            "gs://bucket/some/path",
            "s3://bucket",
            "gs://bucket:443/p",
            "gs://[::1]:80/p",
            "gs://bucket/a%20b?x=%zz",
        ] {
            assert!(go_url_parses(ok), "{ok}");
        }
        for bad in [
            "gs://bucket\n",
            "://bucket",
            "gs://buc ket",
            "gs://bucket:port",
            "gs://[::1/p",
            "gs://bucket/%zz",
            "gs://bucket/%2",
            "a b://c",
        ] {
            assert!(!go_url_parses(bad), "{bad}");
        }
    }
}
