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

#[cfg(test)]
mod tests {
    use super::*;

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
