//! Telling a store URL from a local path (with or without feature `remote`).

/// The URL schemes a store may be opened from with feature `remote`.
pub(crate) const SCHEMES: [&str; 10] = [
    "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl", "http", "https",
];

/// True when `s` is a store URL (`s3://…`, `gs://…`, `az://…`, `http(s)://…`)
/// rather than a local path.
pub fn is_url(s: &str) -> bool {
    s.split_once("://")
        .is_some_and(|(scheme, rest)| !rest.is_empty() && SCHEMES.contains(&scheme))
}

/// `url` as it may appear in a message: without user information
/// (`user:pass@`), query string (`?…`, where SAS tokens and presigned
/// signatures live) or fragment. Text without `://` is returned unchanged
/// (a local path may contain `?`).
///
/// Every URL that reaches an error or a `Display` of this crate passes
/// through it; tools that print a store's address (`loaderx info`) should
/// too.
///
/// ```
/// use loaderx_core::redact_url;
/// assert_eq!(
///     redact_url("https://user:secret@host:9000/bkt/store?sig=abc#x"),
///     "https://host:9000/bkt/store"
/// );
/// assert_eq!(redact_url("/data/store?"), "/data/store?");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let rest = &rest[..end];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
}

/// `text` with every URL in it (a run of non-space characters around a
/// `://`) passed through [`redact_url`]: for messages of other crates
/// (`object_store`, `reqwest`) that may quote a request's URL.
#[cfg(feature = "remote")]
pub(crate) fn redact_text(text: &str) -> String {
    let stop = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | '<' | '>' | '`');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at].rfind(stop).map_or(0, |i| i + 1);
        let end = rest[at..].find(stop).map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_strips_userinfo_query_and_fragment() {
        for (u, want) in [
            ("s3://bkt/a/b", "s3://bkt/a/b"),
            ("http://u:p@127.0.0.1:9/s", "http://127.0.0.1:9/s"),
            ("https://u@h/s?sv=1&sig=SECRET", "https://h/s"),
            ("https://h?x=1", "https://h"),
            ("az://acct@container/p#frag", "az://container/p"),
            ("http://a:b@c@host/p/q@r", "http://host/p/q@r"),
            ("/local/path?x", "/local/path?x"),
        ] {
            assert_eq!(redact_url(u), want, "{u}");
        }
    }

    #[cfg(feature = "remote")]
    #[test]
    fn redaction_finds_urls_inside_messages() {
        let m =
            "error sending request for url (http://ak:SECRET@h:1/b/o?X-Amz-Signature=SIG): reset";
        let r = redact_text(m);
        assert_eq!(r, "error sending request for url (http://h:1/b/o): reset");
        assert_eq!(redact_text("no url here"), "no url here");
        let two = redact_text("\"https://u:p@a/x?q\" then s3://b/y?z=1.");
        assert_eq!(two, "\"https://a/x\" then s3://b/y");
    }

    #[test]
    fn urls_and_paths() {
        for u in [
            "s3://b/p",
            "gs://b/x",
            "az://c/s",
            "http://127.0.0.1:9/s",
            "https://h/s",
        ] {
            assert!(is_url(u), "{u}");
        }
        for p in [
            "/data/store",
            "store",
            "s3:/b",
            "ftp://h/s",
            "s3://",
            "./s3://x",
        ] {
            assert!(!is_url(p), "{p}");
        }
    }
}
