//! Proxying UDP in HTTP (RFC 9298): the URI template, the extended CONNECT
//! request and its response, and the proxy's allow-list of targets.

use crate::wire::qpack::Field;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;

/// The default URI template (RFC 9298 §2, its example).
pub const DEFAULT_TEMPLATE: &str = "/.well-known/masque/udp/{target_host}/{target_port}/";

/// The header naming the CONNECT stream an extra stream of a stream group
/// belongs to (MSGT; ours).
pub const STREAM_GROUP_HEADER: &str = "pepkit-stream-group";

/// A URI template's path with `{target_host}` and `{target_port}` (RFC
/// 9298 §3; other variables are not supported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UriTemplate {
    /// Literal text and variables, in order.
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Host,
    Port,
}

impl Default for UriTemplate {
    fn default() -> UriTemplate {
        UriTemplate::new(DEFAULT_TEMPLATE).expect("the default template is valid")
    }
}

impl UriTemplate {
    /// Parses a template (a path and optional query, as masque-go takes
    /// it without scheme and authority).
    pub fn new(template: &str) -> Result<UriTemplate, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_string()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or("an unclosed `{` in the template")?;
            parts.push(match &rest[open + 1..open + close] {
                "target_host" => Part::Host,
                "target_port" => Part::Port,
                other => return Err(format!("unknown template variable `{other}`")),
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        let count = |want: &Part| parts.iter().filter(|p| *p == want).count();
        if count(&Part::Host) != 1 || count(&Part::Port) != 1 {
            return Err("the template needs {target_host} and {target_port} once each".into());
        }
        if !matches!(parts.first(), Some(Part::Literal(l)) if l.starts_with('/')) {
            return Err("the template's path must start with `/`".into());
        }
        let adjacent = parts
            .windows(2)
            .any(|w| !matches!(w[0], Part::Literal(_)) && !matches!(w[1], Part::Literal(_)));
        if adjacent {
            return Err("template variables must be separated by text".into());
        }
        Ok(UriTemplate { parts })
    }

    /// The path for `target` (an IPv6 address percent-encodes its colons).
    pub fn expand(&self, target: SocketAddr) -> String {
        let mut path = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => path.push_str(text),
                Part::Host => path.push_str(&target.ip().to_string().replace(':', "%3A")),
                Part::Port => path.push_str(&target.port().to_string()),
            }
        }
        path
    }

    /// The target a request path names, if it matches the template and
    /// names an IP literal and a port.
    pub fn target(&self, path: &str) -> Option<SocketAddr> {
        let (mut host, mut port) = (None, None);
        let mut rest = path;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(text) => rest = rest.strip_prefix(text.as_str())?,
                Part::Host | Part::Port => {
                    let end = match self.parts.get(i + 1) {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    rest = &rest[end..];
                    if *part == Part::Host {
                        host = Some(value);
                    } else {
                        port = Some(value);
                    }
                }
            }
        }
        if !rest.is_empty() {
            return None;
        }
        let host = host?.replace("%3A", ":").replace("%3a", ":");
        let ip: IpAddr = host.parse().ok()?;
        let port: u16 = port?.parse().ok().filter(|&p| p != 0)?;
        Some(SocketAddr::new(ip, port))
    }
}

/// Which targets a tunnel server forwards to. Empty refuses everything: a
/// proxy that forwards anywhere is an open proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    rules: Vec<(IpAddr, RangeInclusive<u16>)>,
}

impl AllowList {
    /// Allows `ip` on `ports`.
    pub fn allow(mut self, ip: IpAddr, ports: RangeInclusive<u16>) -> AllowList {
        self.rules.push((ip, ports));
        self
    }

    /// Parses `IP`, `IP:PORT` or `IP:LOW-HIGH` (IPv6 in brackets).
    pub fn parse_rule(rule: &str) -> Result<(IpAddr, RangeInclusive<u16>), String> {
        if let Ok(ip) = rule.parse::<IpAddr>() {
            return Ok((ip, 1..=u16::MAX));
        }
        let (host, ports) = rule
            .rsplit_once(':')
            .ok_or_else(|| format!("{rule:?}: give IP, IP:PORT or IP:LOW-HIGH"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = host
            .parse()
            .map_err(|_| format!("{rule:?}: {host:?} is not an IP address"))?;
        let port = |text: &str| {
            text.parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("{rule:?}: {text:?} is not a port"))
        };
        let range = match ports.split_once('-') {
            Some((low, high)) => port(low)?..=port(high)?,
            None => port(ports)?..=port(ports)?,
        };
        if range.is_empty() {
            return Err(format!("{rule:?}: an empty port range"));
        }
        Ok((ip, range))
    }

    /// Whether the list allows `target`.
    pub fn permits(&self, target: SocketAddr) -> bool {
        self.rules
            .iter()
            .any(|(ip, ports)| *ip == target.ip() && ports.contains(&target.port()))
    }

    /// Whether it allows nothing.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// A client's extended CONNECT for `target`, as field lines.
pub fn request_fields(
    template: &UriTemplate,
    authority: &str,
    target: SocketAddr,
    extra: &[(&'static str, String)],
) -> Vec<(String, String)> {
    let mut fields = vec![
        (":method".to_string(), "CONNECT".to_string()),
        (":protocol".into(), "connect-udp".into()),
        (":scheme".into(), "https".into()),
        (":authority".into(), authority.to_string()),
        (":path".into(), template.expand(target)),
        ("capsule-protocol".into(), "?1".into()),
    ];
    fields.extend(extra.iter().map(|(n, v)| (n.to_string(), v.clone())));
    fields
}

/// A parsed extended CONNECT request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The target it names.
    pub target: SocketAddr,
    /// `Proxy-QUIC-Forwarding: ?1` (QUIC-aware forwarding asked for).
    pub quic_forwarding: bool,
    /// The CONNECT stream this one joins as part of a stream group.
    pub group_of: Option<u64>,
}

/// Why a request is refused, as the HTTP status to answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 400: not a well-formed CONNECT-UDP request.
    BadRequest,
    /// 403: the target is not on the allow-list.
    Forbidden,
    /// 404: the path does not match the template.
    NotFound,
    /// 501: a method or protocol we do not implement.
    NotImplemented,
}

impl Refusal {
    /// The status code.
    pub fn status(self) -> u16 {
        match self {
            Refusal::BadRequest => 400,
            Refusal::Forbidden => 403,
            Refusal::NotFound => 404,
            Refusal::NotImplemented => 501,
        }
    }
}

fn field<'a>(fields: &'a [Field], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name.as_bytes())
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// Validates a request against the template and the allow-list.
pub fn parse_request(
    fields: &[Field],
    template: &UriTemplate,
    allow: &AllowList,
) -> Result<ConnectRequest, Refusal> {
    if field(fields, ":method") != Some("CONNECT") {
        return Err(Refusal::NotImplemented);
    }
    if field(fields, ":protocol") != Some("connect-udp") {
        return Err(Refusal::NotImplemented);
    }
    if field(fields, ":scheme").is_none() || field(fields, ":authority").is_none() {
        return Err(Refusal::BadRequest);
    }
    let path = field(fields, ":path").ok_or(Refusal::BadRequest)?;
    let target = template.target(path).ok_or(Refusal::NotFound)?;
    if !allow.permits(target) {
        return Err(Refusal::Forbidden);
    }
    let group_of = match field(fields, STREAM_GROUP_HEADER) {
        Some(id) => Some(id.parse().map_err(|_| Refusal::BadRequest)?),
        None => None,
    };
    Ok(ConnectRequest {
        target,
        quic_forwarding: field(fields, "proxy-quic-forwarding") == Some("?1"),
        group_of,
    })
}

/// The response's status, if the fields carry one.
pub fn response_status(fields: &[Field]) -> Option<u16> {
    field(fields, ":status")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_fields(pairs: &[(String, String)]) -> Vec<Field> {
        pairs
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn templates_expand_and_match() {
        let template = UriTemplate::default();
        let v4: SocketAddr = "10.0.1.10:4433".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        assert_eq!(
            template.expand(v4),
            "/.well-known/masque/udp/10.0.1.10/4433/"
        );
        assert_eq!(template.target(&template.expand(v4)), Some(v4));
        assert_eq!(template.target(&template.expand(v6)), Some(v6));
        assert_eq!(template.target("/.well-known/masque/udp/x/1/"), None);
        assert_eq!(template.target("/.well-known/masque/udp/1.2.3.4/0/"), None);
        let query = UriTemplate::new("/masque?h={target_host}&p={target_port}").unwrap();
        assert_eq!(query.target(&query.expand(v4)), Some(v4));
        assert!(UriTemplate::new("/{target_host}{target_port}").is_err());
        assert!(UriTemplate::new("/{target_host}/").is_err());
        assert!(UriTemplate::new("/{evil}/{target_host}/{target_port}").is_err());
    }

    #[test]
    fn the_allow_list_decides_and_refusals_have_statuses() {
        let target: SocketAddr = "10.0.1.10:4433".parse().unwrap();
        let template = UriTemplate::default();
        let request = as_fields(&request_fields(&template, "proxy:443", target, &[]));
        assert_eq!(
            parse_request(&request, &template, &AllowList::default()),
            Err(Refusal::Forbidden)
        );
        let rule = AllowList::parse_rule("10.0.1.10:4000-5000").unwrap();
        let allow = AllowList::default().allow(rule.0, rule.1);
        assert_eq!(
            parse_request(&request, &template, &allow).unwrap().target,
            target
        );
        let other = as_fields(&request_fields(
            &template,
            "proxy:443",
            "10.0.1.10:53".parse().unwrap(),
            &[],
        ));
        assert_eq!(
            parse_request(&other, &template, &allow),
            Err(Refusal::Forbidden)
        );
        assert_eq!(Refusal::Forbidden.status(), 403);
        assert!(AllowList::parse_rule("10.0.1.10:5000-4000").is_err());
        assert!(AllowList::parse_rule("nonsense").is_err());
        assert_eq!(
            AllowList::parse_rule("[::1]:443"),
            Ok(("::1".parse().unwrap(), 443..=443))
        );
    }
}
