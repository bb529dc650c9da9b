//! Where the report stage may send what an App asks for (issue #24): an App's author
//! names notification URLs, and tether's own network position is not theirs to use. A
//! request for an App goes only to public addresses, unless the operator lists a
//! network in `server.outbound.allowedNetworks`. The check is made where the connection
//! is made: the name is resolved once, the addresses checked, and the connection made
//! to a checked address (the client's resolver, [`GuardedResolver`]), so a name cannot
//! answer a public address to the check and a private one to the connection (DNS
//! rebinding). Redirects are never followed (`delivery::client`).
//!
//! The configuration file's own apps are the operator's: their channels may go
//! anywhere, as Argo CD's notification services (configured by the admin) and Flux's
//! Providers (written by the cluster's operators) may.
//!
//! It sits below `source`: a chart's dependency repositories (issue #26) are named by
//! the chart's author, whoever runs the app, and `tether serve` fetches them through
//! the same guard.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Who asked for a delivery: how far it may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Requester {
    /// The configuration file (the operator): anywhere.
    Operator,
    /// An App object (a tenant): public addresses and the allowed networks only.
    Tenant,
}

/// The networks an App's deliveries may reach although they are not public.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    allowed: Vec<IpNet>,
}

/// Why a destination is refused; never retryable (the App or the allow-list must
/// change). Names the host, never the URL (a webhook URL can hold a secret in its path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    #[error(
        "{host} is {address}, a {class} address an App may not reach \
         (server.outbound.allowedNetworks lists the exceptions)"
    )]
    Refused {
        host: String,
        address: IpAddr,
        class: &'static str,
    },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
}

/// A network of `server.outbound.allowedNetworks`: a CIDR (`10.0.0.0/8`, `fd00::/8`)
/// or one address.
pub fn parse_network(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is not a network (like 10.0.0.0/8) or an address"))
}

/// What kind of non-public address `ip` is, if it is one. IPv4-mapped and
/// IPv4-compatible IPv6 addresses are judged as the IPv4 address they carry.
pub fn special_class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => v4_class(v4),
            None => v6_class(v6),
        },
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        // RFC 1918, and RFC 6598's carrier-grade NAT space (used for pods and services).
        Some("private")
    } else if ip.is_unspecified() || ip.is_broadcast() || a == 0 || a >= 240 {
        Some("reserved")
    } else {
        None
    }
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("reserved")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`, deprecated but still routed by some stacks) or NAT64 (`64:ff9b::/96`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let compatible = s[..6].iter().all(|x| *x == 0) && !ip.is_loopback() && !ip.is_unspecified();
    let nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|x| *x == 0);
    (compatible || nat64).then_some(tail)
}

impl OutboundPolicy {
    pub fn new(allowed: Vec<IpNet>) -> OutboundPolicy {
        OutboundPolicy { allowed }
    }

    /// Whether a tenant's request may go to `ip` (`host` names it in the error).
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), OutboundError> {
        let Some(class) = special_class(ip) else {
            return Ok(());
        };
        let mapped = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        let allowed = |ip: IpAddr| self.allowed.iter().any(|net| net.contains(&ip));
        if allowed(ip) || mapped.is_some_and(allowed) {
            return Ok(());
        }
        Err(OutboundError::Refused {
            host: host.to_string(),
            address: ip,
            class,
        })
    }

    /// Checks a URL whose host is an address: a client's resolver is not asked for
    /// those, so they are checked before the request. A host name passes here and is
    /// checked by [`GuardedResolver`] when it is resolved.
    pub fn check_url(&self, url: &str) -> Result<(), OutboundError> {
        let Ok(parsed) = url::Url::parse(url) else {
            return Ok(());
        };
        let ip = match parsed.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            _ => return Ok(()),
        };
        self.check(&ip.to_string(), ip)
    }

    /// The addresses of `resolved` a tenant's request may connect to: all of them must
    /// pass, or the first refused one is the error (a name answering one public and one
    /// private address is refused, not trimmed: which one a client tries is its choice).
    pub fn filter(
        &self,
        host: &str,
        resolved: Vec<SocketAddr>,
    ) -> Result<Vec<SocketAddr>, OutboundError> {
        if resolved.is_empty() {
            return Err(OutboundError::NoAddress {
                host: host.to_string(),
            });
        }
        for addr in &resolved {
            self.check(host, addr.ip())?;
        }
        Ok(resolved)
    }
}

/// A resolver for tenants' requests: the system's answer, checked by the policy; the
/// connection is made to exactly the addresses returned here.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<OutboundPolicy>,
}

impl GuardedResolver {
    pub fn new(policy: Arc<OutboundPolicy>) -> GuardedResolver {
        GuardedResolver { policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let checked = policy.filter(&host, resolved)?;
            let addrs: Addrs = Box::new(checked.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(policy: &OutboundPolicy, ip: &str) -> bool {
        let ip: IpAddr = ip.parse().expect("an address");
        policy.check("h", ip).is_err()
    }

    #[test]
    fn loopback_link_local_and_private_addresses_are_refused_in_every_spelling() {
        let policy = OutboundPolicy::default();
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fe80::1",
            "fd12:3456::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
        ] {
            assert!(refused(&policy, ip), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "::ffff:8.8.8.8",
            "100.128.0.1",
        ] {
            assert!(!refused(&policy, ip), "{ip}");
        }
    }

    #[test]
    fn the_allow_list_lets_its_networks_through_mapped_forms_included() {
        let policy = OutboundPolicy::new(vec![
            parse_network("127.0.0.1").expect("an address"),
            parse_network("10.0.0.0/8").expect("a network"),
        ]);
        assert!(!refused(&policy, "127.0.0.1"));
        assert!(!refused(&policy, "::ffff:127.0.0.1"));
        assert!(!refused(&policy, "10.200.0.1"));
        assert!(refused(&policy, "127.0.0.2"));
        assert!(refused(&policy, "192.168.0.1"));
        assert_eq!(
            parse_network("10.0.0.0/33").expect_err("bad prefix"),
            "\"10.0.0.0/33\" is not a network (like 10.0.0.0/8) or an address"
        );
    }

    #[test]
    fn urls_naming_an_address_are_checked_before_any_request() {
        let policy = OutboundPolicy::default();
        let err = policy
            .check_url("http://127.0.0.1:9998/internal/admin/reset")
            .expect_err("loopback");
        assert_eq!(
            err.to_string(),
            "127.0.0.1 is 127.0.0.1, a loopback address an App may not reach \
             (server.outbound.allowedNetworks lists the exceptions)"
        );
        assert!(policy.check_url("http://[::ffff:10.0.0.1]/x").is_err());
        assert!(policy.check_url("https://hooks.example.com/x").is_ok());
        let mixed = vec![
            "93.184.216.34:443".parse().expect("addr"),
            "10.0.0.1:443".parse().expect("addr"),
        ];
        assert!(policy.filter("both.example", mixed).is_err());
        assert!(policy.filter("none.example", Vec::new()).is_err());
    }
}
