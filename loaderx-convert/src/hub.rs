//! Talking to the Hub through `hf-hub`'s blocking API.
//!
//! - `GET {endpoint}/api/datasets/{repo}/revision/{revision}` resolves a
//!   branch, tag or commit to a commit sha and lists the files there;
//! - `GET {endpoint}/datasets/{repo}/resolve/{sha}/{file}` downloads a file
//!   into hf-hub's cache (`HF_HOME/hub`, default `~/.cache/huggingface/hub`),
//!   keyed by commit, so a second conversion at the same commit reads the
//!   cache.
//!
//! The token (explicit, else `HF_TOKEN`, else the token file next to the
//! cache) is sent as `Authorization: Bearer`; it never appears in messages.

use std::path::PathBuf;

use hf_hub::api::sync::{Api, ApiBuilder, ApiError};
use hf_hub::{Cache, Repo, RepoType};

use crate::error::Error;

fn hub_detail(repo: &str, detail: impl Into<String>) -> Error {
    Error::Hub {
        repo: repo.to_owned(),
        detail: detail.into(),
    }
}

/// The branch the Hub keeps its parquet conversion of a dataset on.
#[cfg(feature = "hf")]
pub(crate) const PARQUET_BRANCH: &str = "refs/convert/parquet";

/// What a revision resolved to.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The commit sha.
    pub(crate) sha: String,
    /// Every file name in the tree at that commit.
    pub(crate) files: Vec<String>,
}

/// Connection settings, resolved from the builder and the environment.
pub(crate) struct Hub {
    api: Api,
    repo: String,
    kind: RepoType,
    cache: PathBuf,
}

/// True for a full 40-hex-digit commit sha.
pub(crate) fn is_commit_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Checks a repo id: `name` or `owner/name`, each part `[A-Za-z0-9._-]`,
/// not starting with `.` or `-`; `kind` (`dataset`, `model`) is for the
/// message.
pub(crate) fn check_repo_id(repo: &str, kind: &str) -> Result<(), Error> {
    let parts: Vec<&str> = repo.split('/').collect();
    let ok = (1..=2).contains(&parts.len())
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with(['.', '-'])
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        });
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{repo:?} is not a Hub {kind} id (expected owner/name)"
        )))
    }
}

/// Checks a revision: a branch, tag or commit made of `[A-Za-z0-9._/-]`,
/// without `..` or empty components.
pub(crate) fn check_revision(revision: &str) -> Result<(), Error> {
    let ok = !revision.is_empty()
        && revision
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
        && revision
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{revision:?} is not a branch, tag or commit name"
        )))
    }
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

/// The token to send: `explicit`, else `HF_TOKEN`, else the standard token
/// file (`HF_TOKEN_PATH`, else `$HF_HOME/token`, else
/// `~/.cache/huggingface/token`).
pub(crate) fn find_token(explicit: Option<&str>) -> Option<String> {
    nonempty(explicit.map(str::to_owned))
        .or_else(|| nonempty(std::env::var("HF_TOKEN").ok()))
        .or_else(|| {
            let path = std::env::var_os("HF_TOKEN_PATH")?;
            nonempty(std::fs::read_to_string(path).ok())
        })
        .or_else(|| default_cache()?.token())
}

/// The Hub's address: `explicit`, else `HF_ENDPOINT`, else the public Hub;
/// without a trailing slash.
pub(crate) fn endpoint_url(explicit: Option<&str>) -> String {
    explicit
        .map(str::to_owned)
        .or_else(|| nonempty(std::env::var("HF_ENDPOINT").ok()))
        .unwrap_or_else(|| "https://huggingface.co".to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// hf-hub's cache from `HF_HOME` or the home directory; `None` when neither
/// exists (hf-hub itself would panic).
fn default_cache() -> Option<Cache> {
    (std::env::var_os("HF_HOME").is_some() || std::env::home_dir().is_some()).then(Cache::from_env)
}

impl Hub {
    /// Connects to `endpoint` (else `HF_ENDPOINT`, else the public Hub).
    pub(crate) fn new(
        repo: &str,
        kind: RepoType,
        endpoint: Option<&str>,
        cache_dir: Option<&PathBuf>,
        token: Option<String>,
        progress: bool,
    ) -> Result<Hub, Error> {
        check_repo_id(
            repo,
            match kind {
                RepoType::Model => "model",
                _ => "dataset",
            },
        )?;
        let cache = match cache_dir {
            Some(dir) => Cache::new(dir.clone()),
            None => default_cache().ok_or_else(|| {
                Error::invalid(
                    "no cache directory for Hub downloads: set HF_HOME or pass a cache dir",
                )
            })?,
        };
        let endpoint = endpoint_url(endpoint);
        let cache_path = cache.path().clone();
        let api = ApiBuilder::from_cache(cache)
            .with_endpoint(endpoint.trim_end_matches('/').to_owned())
            .with_token(token)
            .with_progress(progress)
            .with_user_agent("loaderx", env!("CARGO_PKG_VERSION"))
            .build()
            .map_err(|e| hub_error(repo, "cannot set up the Hub client", &e))?;
        Ok(Hub {
            api,
            repo: repo.to_owned(),
            kind,
            cache: cache_path,
        })
    }

    fn repo(&self, revision: &str) -> Repo {
        Repo::with_revision(self.repo.clone(), self.kind, revision.to_owned())
    }

    /// Resolves `revision` to a commit and lists its files.
    pub(crate) fn resolve(&self, revision: &str) -> Result<Resolved, Error> {
        check_revision(revision)?;
        let info = self.api.repo(self.repo(revision)).info().map_err(|e| {
            hub_error(
                &self.repo,
                &format!("cannot resolve revision {revision:?}"),
                &e,
            )
        })?;
        if !is_commit_sha(&info.sha) {
            return Err(hub_detail(
                &self.repo,
                format!(
                    "the Hub answered revision {revision:?} with {:?}, not a commit sha",
                    info.sha
                ),
            ));
        }
        Ok(Resolved {
            sha: info.sha.to_ascii_lowercase(),
            files: info.siblings.into_iter().map(|s| s.rfilename).collect(),
        })
    }

    /// Fetches `file` at commit `sha` (from the cache when it is there),
    /// checking that the Hub served it from that very commit.
    pub(crate) fn fetch(&self, sha: &str, file: &str) -> Result<PathBuf, Error> {
        let repo = self.repo(sha);
        let expected = self
            .cache
            .join(repo.folder_name())
            .join("snapshots")
            .join(sha)
            .join(file);
        let path = self
            .api
            .repo(repo)
            .get(file)
            .map_err(|e| hub_error(&self.repo, &format!("cannot download {file}"), &e))?;
        if path != expected {
            return Err(hub_detail(
                &self.repo,
                format!(
                    "the Hub served {file} from another commit than the pinned {sha} ({})",
                    path.display()
                ),
            ));
        }
        Ok(path)
    }
}

/// A message for an hf-hub error that names the problem, never the token.
fn hub_error(repo: &str, what: &str, e: &ApiError) -> Error {
    let detail = match e {
        ApiError::RequestError(inner) => match inner.as_ref() {
            ureq::Error::Status(401, _) => "HTTP 401 Unauthorized: the repo is gated, private or \
                 does not exist; pass a token with access (--token, HF_TOKEN or `huggingface-cli login`)"
                .to_owned(),
            ureq::Error::Status(403, _) => "HTTP 403 Forbidden: the token has no access to this \
                 dataset (accept its conditions on the Hub first)"
                .to_owned(),
            ureq::Error::Status(404, _) => {
                "HTTP 404 Not Found: no such repo, revision or file".to_owned()
            }
            ureq::Error::Status(code, r) => format!("HTTP {code} {}", r.status_text()),
            ureq::Error::Transport(t) => format!("cannot reach the Hub: {t}"),
        },
        other => other.to_string(),
    };
    hub_detail(repo, format!("{what}: {detail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_revisions_are_checked() {
        for ok in ["ylecun/mnist", "mnist", "a-b/c.d_e"] {
            assert!(check_repo_id(ok, "dataset").is_ok(), "{ok}");
        }
        for bad in [
            "", "../x", "a/../b", "a/b/c", ".a/b", "a b/c", "a/b?x=1", "/a",
        ] {
            assert!(check_repo_id(bad, "dataset").is_err(), "{bad}");
        }
        for ok in ["main", "v1.0", "refs/convert/parquet", "refs/pr/1"] {
            assert!(check_revision(ok).is_ok(), "{ok}");
        }
        for bad in ["", "..", "a/../b", "a?b", "a b", "a//b", "#x"] {
            assert!(check_revision(bad).is_err(), "{bad}");
        }
        assert!(is_commit_sha(&"a".repeat(40)));
        assert!(!is_commit_sha("main"));
    }

    #[test]
    fn explicit_token_wins() {
        assert_eq!(find_token(Some(" hf_x ")).as_deref(), Some("hf_x"));
    }
}
