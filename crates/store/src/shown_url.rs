//! A database URL as it may be shown: in an error, a log line or a terminal, never with its
//! password. A start that fails prints the URL it tried, and that text ends up in journald or an
//! orchestrator's event log, where a `postgres://user:secret@host/db` must not.

/// `url` with its password (the user info's, and a `password=` query parameter, which
/// PostgreSQL's URLs accept too) replaced by `***`. A URL that does not parse keeps no user info.
pub fn shown_url(url: &str) -> String {
    let Ok(mut u) = url::Url::parse(url) else {
        return match (url.find("://"), url.rfind('@')) {
            (Some(s), Some(a)) if a > s => format!("{}***{}", &url[..s + 3], &url[a..]),
            _ => url.to_string(),
        };
    };
    if u.password().is_some() {
        let _ = u.set_password(Some("***"));
    }
    if u.query_pairs().any(|(k, _)| k == "password") {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == "password" {
                    "***".into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn passwords_are_never_shown() {
        for (url, shown) in [
            (
                "postgres://corral:s3cret@db.example:5432/corral",
                "postgres://corral:***@db.example:5432/corral",
            ),
            (
                "postgresql://u@h/db?password=s3cret&sslmode=require",
                "postgresql://u@h/db?password=***&sslmode=require",
            ),
            // Not a URL the parser takes (a space in the host), still without its secret.
            (
                "postgres://u:s3cret@bad host/db",
                "postgres://***@bad host/db",
            ),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
        for url in [
            "postgres://corral@db.example/corral",
            "postgres:///corral?host=/run/postgresql",
            "sqlite:///srv/corral/corral.db",
        ] {
            assert_eq!(shown_url(url), url);
        }
    }
}
