//! What a failed clone means, from git's exit code and what it printed: the reference's
//! table, with the cases it lumps into a 500 told apart (a missing branch, a missing local
//! repository, a refused login).

/// The kind of failure, each a wire code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Exit 124 from `timeout`.
    TimedOut,
    RepositoryNotFound,
    BranchNotFound,
    AuthFailed,
    /// The remote could not be reached.
    Network,
    /// Anything else.
    CloneFailed,
}

pub fn classify(exit_code: i32, stderr: &str) -> Failure {
    if exit_code == 124 {
        return Failure::TimedOut;
    }
    let text = stderr.to_ascii_lowercase();
    let has = |needle: &str| text.contains(needle);
    if has("remote branch") && has("not found") || has("did not match") || has("pathspec") {
        Failure::BranchNotFound
    } else if has("repository not found")
        || has("does not appear to be a git repository")
        || has("does not exist")
        || (has("repository") && has("not found"))
    {
        Failure::RepositoryNotFound
    } else if has("could not read username")
        || has("could not read password")
        || has("authentication failed")
        || has("permission denied")
        || has("access denied")
        || has("terminal prompts disabled")
    {
        Failure::AuthFailed
    } else if has("could not resolve host")
        || has("couldn't connect")
        || has("failed to connect")
        || has("connection refused")
        || has("connection timed out")
        || has("network is unreachable")
    {
        Failure::Network
    } else {
        Failure::CloneFailed
    }
}

/// The repository's name as the default target directory: the last path segment of the
/// URL (or of the `host:path` SSH form) without `.git`; `repository` when there is none.
pub fn repo_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path
        .trim_end_matches('/')
        .rsplit(['/', ':', '\\'])
        .next()
        .unwrap_or("");
    let name = last.strip_suffix(".git").unwrap_or(last);
    if name.is_empty() || name == "." || name == ".." {
        "repository".into()
    } else {
        name.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_told_apart() {
        assert_eq!(classify(124, ""), Failure::TimedOut);
        assert_eq!(
            classify(
                128,
                "fatal: Remote branch nope not found in upstream origin"
            ),
            Failure::BranchNotFound
        );
        assert_eq!(
            classify(
                128,
                "fatal: '/tmp/x' does not appear to be a git repository"
            ),
            Failure::RepositoryNotFound
        );
        assert_eq!(
            classify(
                128,
                "remote: Repository not found.\nfatal: repository 'https://github.com/a/b/' not found"
            ),
            Failure::RepositoryNotFound
        );
        assert_eq!(
            classify(
                128,
                "fatal: could not read Username for 'https://github.com': terminal prompts disabled"
            ),
            Failure::AuthFailed
        );
        assert_eq!(
            classify(
                128,
                "fatal: unable to access 'https://h/r/': Failed to connect to h port 443"
            ),
            Failure::Network
        );
        assert_eq!(classify(128, "fatal: early EOF"), Failure::CloneFailed);
    }

    #[test]
    fn repository_names() {
        for (url, name) in [
            (
                "https://github.com/cloudflare/sandbox-sdk.git",
                "sandbox-sdk",
            ),
            ("https://github.com/o/r/", "r"),
            ("git@github.com:o/tool.git", "tool"),
            ("file:///tmp/repos/lib.git", "lib"),
            ("/srv/repo", "repo"),
            ("https://host/", "host"),
            ("", "repository"),
        ] {
            assert_eq!(repo_name(url), name, "{url}");
        }
    }
}
