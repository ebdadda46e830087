//! Percent-encoding of URL parts, for the links the dashboard writes and
//! the read check's redirect to the login page (`auth::read_guard`).

/// Percent-encodes `s` for a query value or a path segment (everything but
/// RFC 3986's unreserved characters).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes each `/`-separated segment of `path`.
pub fn path_escape(path: &str) -> String {
    path.split('/')
        .map(query_escape)
        .collect::<Vec<_>>()
        .join("/")
}
