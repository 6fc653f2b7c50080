//! Narrow, named exceptions to the default profile that a language, suite or check may ask for.
//!
//! Every other knob of a profile only denies more ([`crate::Restrictions`]); a grant allows one
//! precisely described case the default profile refuses in an offline sandbox, because a class of
//! real programs cannot start without it. A grant is never part of a profile's *name* (what a
//! run request, `--seccomp-profile` or a submission sends): only the configuration an operator or
//! a course's staff write (the language registry, a suite, a check) can hold one.
//!
//! There is one grant, and nothing else is grantable:
//!
//! * `list_interfaces`: `socket(AF_NETLINK, *, NETLINK_ROUTE)` with network off too.
//!   `getifaddrs()` (glibc) needs it, and libzmq, which every Jupyter kernel uses (so
//!   Otter-Grader's autograders and nbconvert runs), aborts when binding `tcp://127.0.0.1` if
//!   `getifaddrs()` fails. What the socket reaches in an offline sandbox: the sandbox's own
//!   network namespace, which holds only `lo`; reading its links, addresses and routes needs no
//!   privilege, and changing them (`RTM_NEWADDR`, `RTM_NEWLINK`, `RTM_NEWROUTE`, …) needs
//!   `CAP_NET_ADMIN` over that namespace, which the sandbox's uid never has (the kernel answers
//!   `EPERM`). Other netlink protocols (`NETLINK_AUDIT`, `NETLINK_KOBJECT_UEVENT`, …), `AF_PACKET`
//!   and every other family stay refused, and a stricter layer still wins: under `no_sockets`
//!   the call is killed and reported, and an allow-list without `socket` reports it too.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One grant (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grant {
    /// `list_interfaces`: `socket(AF_NETLINK, *, NETLINK_ROUTE)` with network off.
    ListInterfaces,
}

/// The grants of a profile, in a stable order.
pub type Grants = BTreeSet<Grant>;

impl Grant {
    /// Every grant there is.
    pub const ALL: [Grant; 1] = [Grant::ListInterfaces];

    /// Its name in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            Grant::ListInterfaces => "list_interfaces",
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A grant name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown seccomp grant {0:?}: the only grant is list_interfaces (socket(AF_NETLINK, *, NETLINK_ROUTE) in an offline sandbox)")]
pub struct UnknownGrant(pub String);

impl FromStr for Grant {
    type Err = UnknownGrant;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Grant::ALL
            .into_iter()
            .find(|g| g.name() == s.trim())
            .ok_or_else(|| UnknownGrant(s.to_string()))
    }
}

impl serde::Serialize for Grant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Grant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_errors() {
        for g in Grant::ALL {
            assert_eq!(g.name().parse::<Grant>(), Ok(g));
            assert_eq!(serde_json::to_string(&g).unwrap(), format!("\"{g}\""));
        }
        let e = "network".parse::<Grant>().unwrap_err();
        assert!(
            e.to_string().contains("the only grant is list_interfaces"),
            "{e}"
        );
        assert!(serde_json::from_str::<Grant>("\"raw_sockets\"").is_err());
    }
}
