//! The headers a proxy changes on the way through (RFC 9110 §7.6): hop-by-hop ones stay on
//! their hop, and the upstream is told who asked (RFC 7239 `forwarded`, `x-forwarded-*`), in
//! the client's own words only where the client is a trusted proxy.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// The client's address, put in each request's extensions when it is accepted.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub SocketAddr);

/// The hop-by-hop headers of HTTP/1.1, and the ones that `connection` names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}

/// Whether `peer` is in one of the `trusted` ranges (an IPv4 peer of an IPv6 listener, too).
pub fn is_trusted(trusted: &[IpNet], peer: IpAddr) -> bool {
    let peer = peer.to_canonical();
    trusted.iter().any(|range| range.contains(&peer))
}

/// Drops the forwarding headers a client wrote itself (`forwarded` and every `x-forwarded-*`)
/// but the `kept` ones, which the configuration names as the caller's scope.
pub fn drop_forwarding(headers: &mut HeaderMap, kept: &[HeaderName]) {
    let written: Vec<HeaderName> = headers
        .keys()
        .filter(|name| *name == header::FORWARDED || name.as_str().starts_with("x-forwarded-"))
        .filter(|name| !kept.contains(name))
        .cloned()
        .collect();
    for name in written {
        headers.remove(name);
    }
}

/// Adds this hop to `forwarded` and `x-forwarded-for`, and the original host and protocol
/// where no earlier proxy gave them.
pub fn add_forwarded(headers: &mut HeaderMap, client: Option<SocketAddr>) {
    let host = headers.get(header::HOST).cloned();
    if let Some(client) = client {
        let ip = client.ip();
        let node = if ip.is_ipv6() {
            format!("\"[{ip}]\"")
        } else {
            ip.to_string()
        };
        let mut element = format!("for={node};proto=http");
        if let Some(host) = host.as_ref().and_then(|h| h.to_str().ok()) {
            element.push_str(";host=");
            element.push_str(&quoted(host));
        }
        append_list(headers, header::FORWARDED, &element);
        append_list(
            headers,
            HeaderName::from_static("x-forwarded-for"),
            &ip.to_string(),
        );
    }
    if let Some(host) = host {
        headers
            .entry(HeaderName::from_static("x-forwarded-host"))
            .or_insert(host);
    }
    headers
        .entry(HeaderName::from_static("x-forwarded-proto"))
        .or_insert(HeaderValue::from_static("http"));
}

/// A `forwarded` value, quoted where it holds characters a token cannot (a port's `:`).
fn quoted(value: &str) -> String {
    let token = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if token {
        value.to_owned()
    } else {
        format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// Appends `element` to a comma-separated list header, every earlier line kept, as one value.
fn append_list(headers: &mut HeaderMap, name: HeaderName, element: &str) {
    let mut joined = String::new();
    for earlier in headers
        .get_all(&name)
        .iter()
        .filter_map(|v| v.to_str().ok())
    {
        if !earlier.trim().is_empty() {
            joined.push_str(earlier.trim());
            joined.push_str(", ");
        }
    }
    joined.push_str(element);
    if let Ok(value) = HeaderValue::from_str(&joined) {
        headers.insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_forwarding_headers_are_dropped_but_the_ones_named_as_its_scope() {
        let mut headers = HeaderMap::new();
        headers.insert(header::FORWARDED, HeaderValue::from_static("for=x"));
        headers.insert("x-forwarded-host", HeaderValue::from_static("evil.example"));
        headers.append("x-forwarded-for", HeaderValue::from_static("203.0.113.7"));
        headers.append("x-forwarded-for", HeaderValue::from_static("203.0.113.8"));
        headers.insert("x-forwarded-user", HeaderValue::from_static("ada"));
        headers.insert("x-session-id", HeaderValue::from_static("s1"));
        drop_forwarding(&mut headers, &[HeaderName::from_static("x-forwarded-user")]);
        let mut left: Vec<_> = headers.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["x-forwarded-user", "x-session-id"]);
    }

    #[test]
    fn a_peer_is_trusted_inside_a_range_and_as_an_ipv4_mapped_address() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
        assert!(is_trusted(&trusted, "10.2.3.4".parse().unwrap()));
        assert!(is_trusted(&trusted, "::ffff:10.2.3.4".parse().unwrap()));
        assert!(is_trusted(&trusted, "::1".parse().unwrap()));
        assert!(!is_trusted(&trusted, "127.0.0.1".parse().unwrap()));
        assert!(!is_trusted(&[], "10.2.3.4".parse().unwrap()));
    }

    #[test]
    fn hop_by_hop_headers_and_the_ones_connection_names_are_dropped() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-hop"),
        );
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("x-hop", HeaderValue::from_static("1"));
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        headers.insert("x-session-id", HeaderValue::from_static("s1"));
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert!(headers.contains_key("x-session-id"));
    }

    #[test]
    fn every_line_of_an_earlier_chain_is_kept() {
        let mut headers = HeaderMap::new();
        headers.append("x-forwarded-for", HeaderValue::from_static("203.0.113.7"));
        headers.append("x-forwarded-for", HeaderValue::from_static("198.51.100.2"));
        headers.append(
            header::FORWARDED,
            HeaderValue::from_static("for=203.0.113.7"),
        );
        headers.append(
            header::FORWARDED,
            HeaderValue::from_static("for=198.51.100.2"),
        );
        add_forwarded(&mut headers, Some("10.0.0.2:51000".parse().unwrap()));
        assert_eq!(
            headers["x-forwarded-for"],
            "203.0.113.7, 198.51.100.2, 10.0.0.2"
        );
        assert_eq!(
            headers[header::FORWARDED],
            "for=203.0.113.7, for=198.51.100.2, for=10.0.0.2;proto=http"
        );
        assert_eq!(headers.get_all("x-forwarded-for").iter().count(), 1);
    }

    #[test]
    fn this_hop_is_appended_to_what_earlier_proxies_said() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            HeaderValue::from_static("tools.internal:3000"),
        );
        headers.insert("x-forwarded-for", HeaderValue::from_static("203.0.113.7"));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        add_forwarded(&mut headers, Some("10.0.0.2:51000".parse().unwrap()));
        assert_eq!(headers["x-forwarded-for"], "203.0.113.7, 10.0.0.2");
        assert_eq!(
            headers[header::FORWARDED],
            "for=10.0.0.2;proto=http;host=\"tools.internal:3000\""
        );
        assert_eq!(headers["x-forwarded-proto"], "https");
        assert_eq!(headers["x-forwarded-host"], "tools.internal:3000");
    }
}
