//! How every `corral` command shows an error: the message and its causes on one line.
//!
//! The libraries' errors mostly say their cause in their own message (`"{path}: {source}"`) and
//! also expose it as their `source()`, as thiserror makes them. anyhow's `{:#}` prints each
//! link of the chain, so such a cause came out twice ("/x: No such file or directory (os error
//! 2): No such file or directory (os error 2)"). Here a cause is added only when the text so far
//! does not already say it.

use std::error::Error;

/// An error that is the caller's to fix on the command line — a flag's value, a combination of
/// flags, a file or a name the command cannot take — found after clap's own checks: the command
/// exits [`crate::exit::USAGE`] as for clap's errors ([`exit_code`]). Its text is what it wraps,
/// said once.
#[derive(Debug)]
pub struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Usage {}

/// A usage error saying `message`.
pub fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Usage(message.to_string()))
}

/// `.usage()?` marks a failure as the caller's to fix (see [`Usage`]).
pub trait OrUsage<T> {
    fn usage(self) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> OrUsage<T> for Result<T, E> {
    fn usage(self) -> anyhow::Result<T> {
        self.map_err(|e| usage(chain(&e.into())))
    }
}

/// The exit status of a command that failed with `e`: [`crate::exit::USAGE`] when the caller is
/// to fix it ([`Usage`] anywhere in its chain), else `failed`.
/// A command's exit status for its result: 0, or the error said on one line after the command's
/// name (`corral NAME: …`) and [`exit_code`]'s status (usage errors 2, others 1).
pub fn report(command: &str, result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("corral {command}: {}", chain(&e));
            exit_code(&e, 1)
        }
    }
}

pub fn exit_code(e: &anyhow::Error, failed: i32) -> i32 {
    if e.chain().any(|link| link.is::<Usage>()) {
        crate::exit::USAGE
    } else {
        failed
    }
}

/// `e` with its context and causes, each said once, joined by `: `.
pub fn chain(e: &anyhow::Error) -> String {
    one_line(e.chain())
}

/// The same for an error that is not an `anyhow::Error` (a reqwest error's cause says why the
/// request failed: "Connection refused").
pub fn chain_of(e: &(dyn Error + 'static)) -> String {
    one_line(std::iter::successors(Some(e), |&e| e.source()))
}

fn one_line<'a>(links: impl IntoIterator<Item = &'a (dyn Error + 'static)>) -> String {
    let mut out = String::new();
    for link in links {
        let text = link.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    /// As thiserror's `#[error("{path}: {source}")]` with `#[source]`.
    #[derive(Debug)]
    struct Read {
        path: &'static str,
        source: std::io::Error,
    }
    impl std::fmt::Display for Read {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.path, self.source)
        }
    }
    impl Error for Read {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.source)
        }
    }

    /// A wrapper whose message is its cause's (`#[error("{0}")] X(#[source] E)`).
    #[derive(Debug)]
    struct Same(Read);
    impl std::fmt::Display for Same {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.fmt(f)
        }
    }
    impl Error for Same {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let e = anyhow::Error::new(Read {
            path: "/nonexist",
            source: not_found(),
        });
        assert_eq!(
            format!("{e:#}"),
            "/nonexist: entity not found: entity not found"
        );
        assert_eq!(chain(&e), "/nonexist: entity not found");
        let e = e.context("importing /nonexist.tar");
        assert_eq!(
            chain(&e),
            "importing /nonexist.tar: /nonexist: entity not found"
        );
    }

    #[test]
    fn a_wrapper_that_says_what_its_cause_says_is_said_once() {
        let e = anyhow::Error::new(Same(Read {
            path: "some.txt",
            source: std::io::Error::other("tar stream ends inside a header"),
        }));
        assert_eq!(chain(&e), "some.txt: tar stream ends inside a header");
    }

    #[test]
    fn a_usage_error_exits_2_under_any_context_and_says_its_cause_once() {
        let e: anyhow::Result<()> = Err(not_found()).usage();
        let e = e.context("importing /x.tar").unwrap_err();
        assert_eq!(exit_code(&e, 1), crate::exit::USAGE);
        assert_eq!(chain(&e), "importing /x.tar: entity not found");
        let e = anyhow::Error::new(not_found()).context("importing /x.tar");
        assert_eq!(exit_code(&e, 1), 1);
    }

    #[test]
    fn causes_the_message_does_not_say_are_all_kept() {
        let e: anyhow::Result<()> = Err(not_found()).context("opening the store");
        let e = e.context("corral.db").unwrap_err();
        assert_eq!(chain(&e), "corral.db: opening the store: entity not found");
        // A request error whose own message does not say why (as reqwest's "error sending
        // request for url (…)"): its cause does.
        #[derive(Debug)]
        struct Send(std::io::Error);
        impl std::fmt::Display for Send {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error sending request")
            }
        }
        impl Error for Send {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let outer = Send(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused",
        ));
        assert_eq!(
            chain_of(&outer),
            "error sending request: Connection refused"
        );
    }
}
