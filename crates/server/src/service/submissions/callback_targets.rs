//! Where callbacks may go: only public addresses, unless the operator allowed a range. The host is
//! resolved here and a target that resolves to loopback, private, link-local, multicast,
//! unspecified (and similar) addresses is refused; the addresses handed to the HTTP client are the
//! checked ones, so what is checked is what is connected to (no second lookup a DNS rebinding
//! could answer differently).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// An address range, `ADDR/BITS` (or a single address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|e| format!("{s:?}: not an address range ({e})"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match b {
            Some(b) => b
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0..={max}"))?,
            None => max,
        };
        Ok(Cidr { addr, bits })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = if self.bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.bits)
                };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.bits)
                };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Why an address is not a public one, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(a) => non_public_v4(a),
        IpAddr::V6(a) => non_public_v6(a),
    }
}

fn non_public_v4(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    Some(if a.is_unspecified() || o[0] == 0 {
        "unspecified (0.0.0.0/8)"
    } else if a.is_loopback() {
        "loopback"
    } else if a.is_private() {
        "private"
    } else if a.is_link_local() {
        "link-local"
    } else if a.is_multicast() {
        "multicast"
    } else if a.is_broadcast() {
        "broadcast"
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        "shared address space (100.64.0.0/10)"
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        "IETF protocol assignments (192.0.0.0/24)"
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        "benchmarking (198.18.0.0/15)"
    } else if o[0] >= 240 {
        "reserved (240.0.0.0/4)"
    } else if a.is_documentation() {
        "documentation"
    } else {
        return None;
    })
}

fn non_public_v6(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    Some(if a.is_unspecified() {
        "unspecified"
    } else if a.is_loopback() {
        "loopback"
    } else if a.is_multicast() {
        "multicast"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "unique local (fc00::/7)"
    } else if (s[0] & 0xffc0) == 0xfe80 {
        "link-local"
    } else if (s[0] & 0xffc0) == 0xfec0 {
        "site-local (fec0::/10)"
    } else if s[0] == 0x2001 && s[1] == 0xdb8 {
        "documentation"
    } else if s[0] == 0x64 && s[1] == 0xff9b {
        "NAT64 (64:ff9b::/96)"
    } else if s[..6] == [0, 0, 0, 0, 0, 0] {
        "IPv4-compatible (::/96)"
    } else if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        // SIIT's IPv4-translated form: a translator would carry it to the IPv4 address inside.
        "IPv4-translated (::ffff:0:0/96)"
    } else if s[0] == 0x2002 {
        // 6to4 carries an IPv4 address (10.x, 127.x …) in its second and third segments.
        "6to4 (2002::/16)"
    } else if s[0] == 0x2001 && s[1] < 0x200 {
        "IETF protocol assignments (2001::/23: Teredo, benchmarking, ORCHID)"
    } else if s[..4] == [0x100, 0, 0, 0] {
        "discard-only (100::/64)"
    } else {
        return None;
    })
}

/// Which addresses callbacks may reach: public ones, plus the operator's allowed ranges.
#[derive(Debug, Clone, Default)]
pub struct TargetPolicy {
    pub allow: Vec<Cidr>,
}

impl TargetPolicy {
    pub fn parse(ranges: &[String]) -> Result<TargetPolicy, String> {
        Ok(TargetPolicy {
            allow: ranges.iter().map(|r| r.parse()).collect::<Result<_, _>>()?,
        })
    }

    /// `Err(why)` when a callback URL's host is a literal address a callback may not reach
    /// (`refused: …`, as a delivery records it), or when it has none. A literal address never
    /// reaches the resolver, so it is checked here, when the submission is accepted and at each
    /// delivery; a host name is checked when it is resolved, at each delivery (what it resolves to
    /// may change).
    pub fn check_literal(&self, url: &url::Url) -> Result<(), String> {
        let ip = match url.host() {
            Some(url::Host::Ipv4(a)) => IpAddr::V4(a),
            Some(url::Host::Ipv6(a)) => IpAddr::V6(a),
            Some(url::Host::Domain(_)) => return Ok(()),
            None => return Err("the URL has no host".into()),
        };
        self.check(ip).map_err(|e| format!("refused: {e}"))
    }

    /// `Err(why)` when a callback may not connect to `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        match non_public(ip) {
            None => Ok(()),
            Some(_) if self.allow.iter().any(|c| c.contains(ip)) => Ok(()),
            Some(why) => Err(format!(
                "{ip} is a {why} address (allow its range in submissions.callback_allow to call it)"
            )),
        }
    }
}

/// The HTTP client's resolver: resolves, then keeps only the addresses the policy allows.
struct GuardedResolver(Arc<TargetPolicy>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = Vec::new();
            let ok: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.check(a.ip()) {
                    Ok(()) => true,
                    Err(why) => {
                        refused.push(why);
                        false
                    }
                })
                .collect();
            if ok.is_empty() {
                let why = if refused.is_empty() {
                    format!("{host} does not resolve")
                } else {
                    format!("refused: {host} resolves to {}", refused.join("; "))
                };
                return Err(why.into());
            }
            Ok(Box::new(ok.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The client callbacks are sent with: no redirects, no proxy, our resolver, a timeout.
pub fn client(policy: Arc<TargetPolicy>, timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver(policy)))
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("corral/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the HTTP client builds")
}

pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_unless_allowed() {
        let p = TargetPolicy::default();
        for bad in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "100.64.0.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::a00:1",
            "::ffff:0:a00:1",
            "::ffff:0:7f00:1",
            "2002:7f00:1::1",
            "2002:a00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "2001:10::1",
            "100::1",
        ] {
            let ip: IpAddr = bad.parse().unwrap();
            assert!(p.check(ip).is_err(), "{bad} allowed");
        }
        for good in [
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
        ] {
            let ip: IpAddr = good.parse().unwrap();
            assert!(p.check(ip).is_ok(), "{good} refused");
        }
        let p = TargetPolicy::parse(&["127.0.0.1/32".into(), "10.0.0.0/8".into(), "::1".into()])
            .unwrap();
        assert!(p.check("127.0.0.1".parse().unwrap()).is_ok());
        assert!(p.check("::ffff:127.0.0.1".parse().unwrap()).is_ok());
        assert!(p.check("127.0.0.2".parse().unwrap()).is_err());
        assert!(p.check("10.200.0.1".parse().unwrap()).is_ok());
        assert!(p.check("::1".parse().unwrap()).is_ok());
        assert!(p.check("192.168.0.1".parse().unwrap()).is_err());
        assert!(TargetPolicy::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(TargetPolicy::parse(&["nonsense".into()]).is_err());
    }

    #[test]
    fn literal_hosts_are_checked_and_names_left_to_the_resolver() {
        let p = TargetPolicy::parse(&["10.20.0.0/16".into()]).unwrap();
        let check = |u: &str| p.check_literal(&url::Url::parse(u).unwrap());
        assert_eq!(
            check("http://10.1.2.3/x").unwrap_err(),
            "refused: 10.1.2.3 is a private address (allow its range in submissions.callback_allow to call it)"
        );
        assert!(check("http://[::ffff:127.0.0.1]:8080/x").is_err());
        // The URL parser's reading of an IPv4 address written otherwise is the one checked.
        assert!(check("http://0x7f.1/x").unwrap_err().contains("127.0.0.1"));
        assert!(check("http://10.20.3.4/x").is_ok(), "an allowed range");
        assert!(check("https://93.184.216.34/x").is_ok());
        assert!(check("http://localhost/x").is_ok(), "resolved at delivery");
    }

    #[tokio::test]
    async fn the_resolver_refuses_what_resolves_to_loopback() {
        let policy = Arc::new(TargetPolicy::default());
        let http = client(policy, Duration::from_secs(5));
        let e = http
            .post("http://localhost:9/")
            .send()
            .await
            .expect_err("localhost is loopback");
        assert!(
            error_chain(&e).contains("refused: localhost resolves to"),
            "{}",
            error_chain(&e)
        );
    }
}
