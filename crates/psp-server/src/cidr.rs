//! CIDR blocks, for trusted-proxy lists.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address block such as `10.0.0.0/8` or `::1/128`. A bare address is a single-address
/// block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4-mapped IPv6 peer (::ffff:a.b.c.d) is the IPv4 address.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an address block (expected for example 10.0.0.0/8 or ::1/128)")]
pub struct InvalidCidr(String);

impl FromStr for Cidr {
    type Err = InvalidCidr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidCidr(s.to_owned());
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().map_err(|_| bad())?,
            None => max,
        };
        if prefix > max {
            return Err(bad());
        }
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl<'de> serde::Deserialize<'de> for Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The client address of a request: the peer, or, when the peer is a trusted proxy, the
/// rightmost `X-Forwarded-For` address that is not itself a trusted proxy (addresses to its
/// left were written by the client and can be anything).
pub fn client_address<'a>(
    peer: IpAddr,
    forwarded_for: impl DoubleEndedIterator<Item = &'a str>,
    trusted: &[Cidr],
) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    for value in forwarded_for.rev() {
        for part in value.rsplit(',') {
            match forwarded_ip(part.trim()) {
                Ok(ip) if is_trusted(ip) => continue,
                Ok(ip) => return ip,
                // An unreadable entry: stop trusting the chain there.
                Err(_) => return peer,
            }
        }
    }
    peer
}

/// An `X-Forwarded-For` element's address: `a.b.c.d`, an IPv6 address, or either with a port
/// (`a.b.c.d:port`, `[v6]:port`, `[v6]`) as some load balancers write it (Azure Application
/// Gateway appends the client's port). Read without its port, such a client was counted under
/// the proxy's own address, with every other client of that proxy
/// (docs/attacks/proxy-and-data.md O1).
fn forwarded_ip(element: &str) -> Result<IpAddr, ()> {
    if let Ok(ip) = element.parse::<IpAddr>() {
        return Ok(ip);
    }
    if let Ok(socket) = element.parse::<std::net::SocketAddr>() {
        return Ok(socket.ip());
    }
    element
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|v6| v6.parse::<std::net::Ipv6Addr>().ok())
        .map(IpAddr::V6)
        .ok_or(())
}

/// The key a client is counted under (rate limits, failed logins, connections per source):
/// an IPv4 address as it is (an IPv4-mapped IPv6 address is its IPv4 address), an IPv6
/// address reduced to its first `ipv6_prefix` bits. One IPv6 subscriber usually holds a whole
/// /64 (RFC 6177), /56 or /48, and can use any address in it: counting single IPv6 addresses
/// would give every such client 2^64 separate quotas.
pub fn source_key(ip: IpAddr, ipv6_prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(ipv6_prefix.min(128)))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_sources_are_counted_per_prefix() {
        let a = source_key(ip("2001:db8:1:2:aaaa::1"), 64);
        assert_eq!(a, ip("2001:db8:1:2::"));
        assert_eq!(a, source_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), 64));
        assert_ne!(a, source_key(ip("2001:db8:1:3::1"), 64));
        assert_eq!(
            source_key(ip("2001:db8:1:2::1"), 48),
            source_key(ip("2001:db8:1:ff::1"), 48)
        );
        assert_eq!(source_key(ip("2001:db8::1"), 128), ip("2001:db8::1"));
        assert_eq!(source_key(ip("192.0.2.7"), 64), ip("192.0.2.7"));
        assert_eq!(source_key(ip("::ffff:192.0.2.7"), 64), ip("192.0.2.7"));
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn blocks_contain_their_addresses_only() {
        let c: Cidr = "10.1.0.0/16".parse().expect("cidr");
        assert!(c.contains(ip("10.1.200.3")));
        assert!(!c.contains(ip("10.2.0.1")));
        assert!(
            c.contains(ip("::ffff:10.1.0.1")),
            "IPv4-mapped peers are IPv4"
        );
        let one: Cidr = "::1".parse().expect("cidr");
        assert!(one.contains(ip("::1")));
        assert!(!one.contains(ip("::2")));
        let all: Cidr = "0.0.0.0/0".parse().expect("cidr");
        assert!(all.contains(ip("192.0.2.1")));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("ten/8".parse::<Cidr>().is_err());
    }

    #[test]
    fn forwarded_for_is_used_only_behind_a_trusted_proxy() {
        let trusted = ["127.0.0.1/32".parse().expect("cidr")];
        // Untrusted peer: its header is ignored.
        assert_eq!(
            client_address(ip("192.0.2.9"), ["198.51.100.1"].into_iter(), &trusted),
            ip("192.0.2.9")
        );
        // Trusted peer: the rightmost untrusted address counts, not the spoofable leftmost.
        assert_eq!(
            client_address(
                ip("127.0.0.1"),
                ["6.6.6.6, 198.51.100.1, 127.0.0.1"].into_iter(),
                &trusted
            ),
            ip("198.51.100.1")
        );
        // Several header lines are one list.
        assert_eq!(
            client_address(
                ip("127.0.0.1"),
                ["6.6.6.6", "198.51.100.2"].into_iter(),
                &trusted
            ),
            ip("198.51.100.2")
        );
        // Garbage: the peer.
        assert_eq!(
            client_address(ip("127.0.0.1"), ["nonsense"].into_iter(), &trusted),
            ip("127.0.0.1")
        );
    }

    /// docs/attacks/proxy-and-data.md O1: an element with a port was unreadable, so every
    /// client of a proxy that writes ports shared the proxy's own quota.
    #[test]
    fn a_forwarded_address_with_a_port_is_its_address() {
        let trusted = ["127.0.0.1/32".parse().expect("cidr")];
        for (element, client) in [
            ("1.2.3.4:5678", "1.2.3.4"),
            ("[2001:db8::1]:80", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
        ] {
            assert_eq!(
                client_address(ip("127.0.0.1"), [element].into_iter(), &trusted),
                ip(client),
                "{element}"
            );
        }
    }
}
