//! Who the peer of a connection really is. Without a balancer it is the TCP
//! peer. Behind one it is what the balancer says, but only when the TCP peer
//! is one of the proxies the admin listed: the PROXY protocol (v1 text or v2
//! binary, as haproxy's `send-proxy` / `send-proxy-v2` write it) before the
//! first byte of the connection, or a forwarded header (`X-Forwarded-For` or
//! RFC 7239 `Forwarded`) on each request. Nothing a client sends is believed
//! by default.

pub use ipnet::IpNet;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

/// Where the real peer of a connection from a trusted proxy comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerMode {
    /// The TCP peer, always (the default: no balancer).
    #[default]
    Tcp,
    /// A PROXY protocol header (v1 or v2) opens every connection from a
    /// trusted proxy; a connection from one without it is closed.
    ProxyProtocol,
    /// `X-Forwarded-For` of requests that came through a trusted proxy.
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=…` of requests that came through a trusted proxy.
    Forwarded,
}

/// The admin's choice: the mode and the proxies believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerSource {
    pub mode: PeerMode,
    pub trusted: Vec<IpNet>,
}

impl PeerSource {
    /// Refuses a mode without a proxy to trust (it would do nothing, which
    /// the admin cannot have meant), and a list without a mode.
    pub fn new(mode: PeerMode, trusted: Vec<IpNet>) -> Result<PeerSource, String> {
        match (mode, trusted.is_empty()) {
            (PeerMode::Tcp, false) => {
                Err("--trusted-proxy needs --proxy-protocol or --forwarded-header (how the proxy names the real peer)"
                    .into())
            }
            (PeerMode::Tcp, true) => Ok(PeerSource::default()),
            (_, true) => Err("--proxy-protocol and --forwarded-header need --trusted-proxy ADDRESS[/PREFIX]: \
                              the balancer's address, whose word on the real peer is believed"
                .into()),
            (mode, false) => Ok(PeerSource { mode, trusted }),
        }
    }

    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.mode != PeerMode::Tcp && self.trusted.iter().any(|n| n.contains(&ip))
    }

    /// The peer of one request: its connection's peer, or, when that is a
    /// trusted proxy and the mode is a header, what the header says.
    /// `values` are the header's values in the order they came.
    pub fn request_peer<'a>(&self, conn_peer: IpAddr, values: impl Iterator<Item = &'a str>) -> IpAddr {
        let conn_peer = canonical(conn_peer);
        if !self.is_trusted(conn_peer) {
            return conn_peer;
        }
        let hops: Vec<Option<IpAddr>> = match self.mode {
            PeerMode::XForwardedFor => values.flat_map(|v| v.split(',')).map(parse_node).collect(),
            PeerMode::Forwarded => values.flat_map(|v| v.split(',')).map(forwarded_for).collect(),
            PeerMode::Tcp | PeerMode::ProxyProtocol => return conn_peer,
        };
        // Each proxy appends the address it saw: walk back from the nearest
        // hop past the trusted ones; the first other address is the client.
        // A hop that cannot be read (`unknown`, an obfuscated name) ends the
        // walk at the last trusted address, never at something a client wrote.
        let mut peer = conn_peer;
        for hop in hops.into_iter().rev() {
            match hop {
                Some(ip) if self.is_trusted(ip) => peer = ip,
                Some(ip) => return ip,
                None => return peer,
            }
        }
        peer
    }
}

/// The header a mode reads (lower case, as `http::HeaderMap` names it).
pub fn header_name(mode: PeerMode) -> Option<&'static str> {
    match mode {
        PeerMode::XForwardedFor => Some("x-forwarded-for"),
        PeerMode::Forwarded => Some("forwarded"),
        PeerMode::Tcp | PeerMode::ProxyProtocol => None,
    }
}

/// `10.0.0.5` or `10.0.0.0/8` or `2001:db8::/32`, as `--trusted-proxy` takes it.
pub fn parse_trusted(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    if let Ok(net) = IpNet::from_str(s) {
        return Ok(net.trunc());
    }
    IpAddr::from_str(s).map(IpNet::from).map_err(|_| format!("{s:?} is not an IP address or ADDRESS/PREFIX"))
}

/// An IPv4 address in IPv6 clothing (`::ffff:1.2.3.4`, as a dual-stack
/// socket reports it) is the IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// What per-peer limits count by: the address, but a whole /64 for IPv6
/// (one subscriber is handed a /64; counting single addresses in it would
/// give one attacker 2^64 allowances).
pub fn peer_key(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// One node of `X-Forwarded-For`: an address, perhaps with a port
/// (`1.2.3.4:5`, `[2001:db8::1]:5`).
fn parse_node(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_matches('"');
    if let Ok(ip) = IpAddr::from_str(s) {
        return Some(canonical(ip));
    }
    if let Ok(sa) = SocketAddr::from_str(s) {
        return Some(canonical(sa.ip()));
    }
    let inner = s.strip_prefix('[')?.split(']').next()?;
    IpAddr::from_str(inner).ok().map(canonical)
}

/// The `for=` of one `Forwarded` element (`for=192.0.2.60;proto=http`,
/// `for="[2001:db8::17]:4711"`); None when it has none or it is not an address.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        if k.trim().eq_ignore_ascii_case("for") {
            parse_node(v)
        } else {
            None
        }
    })
}

/// What a PROXY protocol header said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyHeader {
    /// The client's address as the proxy saw it.
    Peer(SocketAddr),
    /// `PROXY UNKNOWN` (v1) or `LOCAL` (v2): the proxy's own connection,
    /// a health check: the TCP peer stands.
    Local,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    #[error("the connection does not start with a PROXY protocol header")]
    NotProxy,
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(&'static str),
}

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// A v1 line is at most 107 bytes with its CRLF (the specification's bound).
const V1_MAX: usize = 107;
/// TLVs beyond the addresses are skipped; a header longer than this is refused.
const V2_MAX_LEN: usize = 4096;

/// Parses a PROXY header at the start of `buf`. `Ok(None)`: not enough bytes
/// yet. `Ok(Some((header, n)))`: the header was the first `n` bytes.
pub fn parse_proxy_header(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    let prefix_of = |sig: &[u8]| buf.len() < sig.len() && sig.starts_with(buf);
    if buf.starts_with(V2_SIGNATURE) {
        return parse_v2(buf);
    }
    if buf.starts_with(b"PROXY ") {
        return parse_v1(buf);
    }
    if prefix_of(V2_SIGNATURE) || prefix_of(b"PROXY ") {
        return Ok(None);
    }
    Err(ProxyError::NotProxy)
}

fn parse_v1(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    let Some(end) = buf.windows(2).take(V1_MAX - 1).position(|w| w == b"\r\n") else {
        return if buf.len() >= V1_MAX {
            Err(ProxyError::Malformed("v1 line longer than 107 bytes"))
        } else {
            Ok(None)
        };
    };
    let line = std::str::from_utf8(&buf[..end]).map_err(|_| ProxyError::Malformed("v1 line is not text"))?;
    let mut parts = line.split(' ');
    let _proxy = parts.next();
    let header = match parts.next() {
        Some("UNKNOWN") => ProxyHeader::Local,
        Some(fam @ ("TCP4" | "TCP6")) => {
            let fields: Vec<&str> = parts.collect();
            let [src, _dst, sport, _dport] = fields[..] else {
                return Err(ProxyError::Malformed("v1 TCP line needs source, destination and two ports"));
            };
            let ip = IpAddr::from_str(src).map_err(|_| ProxyError::Malformed("v1 source address"))?;
            if ip.is_ipv4() != (fam == "TCP4") {
                return Err(ProxyError::Malformed("v1 address does not match its family"));
            }
            let port = sport.parse::<u16>().map_err(|_| ProxyError::Malformed("v1 source port"))?;
            ProxyHeader::Peer(SocketAddr::new(ip, port))
        }
        _ => return Err(ProxyError::Malformed("v1 protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    Ok(Some((header, end + 2)))
}

fn parse_v2(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    if buf.len() < 16 {
        return Ok(None);
    }
    let (ver_cmd, fam) = (buf[12], buf[13]);
    if ver_cmd >> 4 != 2 {
        return Err(ProxyError::Malformed("v2 version is not 2"));
    }
    let len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    if len > V2_MAX_LEN {
        return Err(ProxyError::Malformed("v2 header too long"));
    }
    if buf.len() < 16 + len {
        return Ok(None);
    }
    let body = &buf[16..16 + len];
    let header = match ver_cmd & 0x0f {
        0 => ProxyHeader::Local,
        1 => match fam {
            // TCP over IPv4, and over IPv6; UDP and unix sockets are not ours.
            0x11 if body.len() >= 12 => {
                let ip: [u8; 4] = body[0..4].try_into().expect("4 bytes");
                ProxyHeader::Peer(SocketAddr::new(IpAddr::from(ip), u16::from_be_bytes([body[8], body[9]])))
            }
            0x21 if body.len() >= 36 => {
                let ip: [u8; 16] = body[0..16].try_into().expect("16 bytes");
                ProxyHeader::Peer(SocketAddr::new(IpAddr::from(ip), u16::from_be_bytes([body[32], body[33]])))
            }
            0x11 | 0x21 => return Err(ProxyError::Malformed("v2 address block too short")),
            // AF_UNSPEC: the proxy does not know; the TCP peer stands.
            0x00 => ProxyHeader::Local,
            _ => return Err(ProxyError::Malformed("v2 family is not TCP over IPv4 or IPv6")),
        },
        _ => return Err(ProxyError::Malformed("v2 command is not LOCAL or PROXY")),
    };
    Ok(Some((header, 16 + len)))
}

/// Reads a PROXY header from the start of a stream, a little at a time,
/// never past what the header needs more than one read's worth: the bytes
/// read beyond it are handed back to go before the rest of the stream.
pub async fn read_proxy_header<S>(stream: &mut S) -> Result<(ProxyHeader, Vec<u8>), ProxyError>
where
    S: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|_| ProxyError::Malformed("connection failed"))?;
        if n == 0 {
            return Err(ProxyError::Malformed("connection closed inside the header"));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((header, used)) = parse_proxy_header(&buf)? {
            return Ok((header, buf.split_off(used)));
        }
        if buf.len() > 16 + V2_MAX_LEN {
            return Err(ProxyError::Malformed("header too long"));
        }
    }
}

/// A stream with bytes already read from it put back in front.
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(inner: S, prefix: Vec<u8>) -> Prefixed<S> {
        Prefixed { prefix, at: 0, inner }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            if self.at == self.prefix.len() {
                self.prefix = Vec::new();
                self.at = 0;
            }
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn source(mode: PeerMode, trusted: &[&str]) -> PeerSource {
        PeerSource::new(mode, trusted.iter().map(|t| parse_trusted(t).unwrap()).collect()).unwrap()
    }

    #[test]
    fn v1_headers_as_haproxy_writes_them() {
        let h = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 7878\r\nPOST /api HTTP/1.1\r\n";
        let (hdr, n) = parse_proxy_header(h).unwrap().unwrap();
        assert_eq!(hdr, ProxyHeader::Peer("203.0.113.7:51234".parse().unwrap()));
        assert_eq!(&h[n..n + 4], b"POST");
        let h6 = b"PROXY TCP6 2001:db8::7 2001:db8::1 4711 7878\r\n";
        assert_eq!(
            parse_proxy_header(h6).unwrap().unwrap().0,
            ProxyHeader::Peer("[2001:db8::7]:4711".parse().unwrap())
        );
        assert_eq!(parse_proxy_header(b"PROXY UNKNOWN\r\n").unwrap().unwrap(), (ProxyHeader::Local, 15));
        // Not enough yet, and never more than the specification's 107 bytes.
        assert_eq!(parse_proxy_header(b"PROX").unwrap(), None);
        assert_eq!(parse_proxy_header(b"PROXY TCP4 1.2.3.4").unwrap(), None);
        assert!(parse_proxy_header(&[b'P'; 200]).is_err());
        let long = format!("PROXY TCP4 {}\r\n", "1".repeat(120));
        assert!(parse_proxy_header(long.as_bytes()).is_err());
        for bad in [
            "PROXY TCP4 2001:db8::1 1.2.3.4 1 2\r\n",
            "PROXY TCP4 1.2.3.4 1.2.3.4 99999 2\r\n",
            "PROXY TCP4 1.2.3.4\r\n",
            "PROXY UDP4 1.2.3.4 1.2.3.4 1 2\r\n",
        ] {
            assert!(parse_proxy_header(bad.as_bytes()).is_err(), "{bad}");
        }
        assert_eq!(parse_proxy_header(b"POST /api HTTP/1.1\r\n"), Err(ProxyError::NotProxy));
    }

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut v = V2_SIGNATURE.to_vec();
        v.push(0x20 | cmd);
        v.push(fam);
        v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn v2_headers_with_and_without_tlvs() {
        let mut body = vec![198, 51, 100, 9, 10, 0, 0, 1];
        body.extend_from_slice(&4711u16.to_be_bytes());
        body.extend_from_slice(&7878u16.to_be_bytes());
        body.extend_from_slice(&[0x04, 0, 2, 0xab, 0xcd]); // a TLV (NOOP), skipped
        let mut h = v2(1, 0x11, &body);
        let len = h.len();
        h.extend_from_slice(b"GET /health");
        let (hdr, n) = parse_proxy_header(&h).unwrap().unwrap();
        assert_eq!((hdr, n), (ProxyHeader::Peer("198.51.100.9:4711".parse().unwrap()), len));
        let mut six = [0u8; 36];
        six[..16].copy_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().unwrap().octets());
        six[32..34].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(
            parse_proxy_header(&v2(1, 0x21, &six)).unwrap().unwrap().0,
            ProxyHeader::Peer("[2001:db8::9]:80".parse().unwrap())
        );
        assert_eq!(parse_proxy_header(&v2(0, 0x00, &[])).unwrap().unwrap().0, ProxyHeader::Local);
        assert_eq!(parse_proxy_header(&h[..20]).unwrap(), None, "a header cut short waits for more");
        assert!(parse_proxy_header(&v2(1, 0x11, &[1, 2, 3])).is_err());
        assert!(parse_proxy_header(&v2(1, 0x31, &[0; 216])).is_err(), "unix sockets are not a peer");
        let mut bad_version = v2(1, 0x11, &body);
        bad_version[12] = 0x11;
        assert!(parse_proxy_header(&bad_version).is_err());
    }

    #[test]
    fn forwarded_headers_count_only_through_a_trusted_proxy() {
        let xff = source(PeerMode::XForwardedFor, &["10.0.0.0/8"]);
        let lb = ip("10.0.0.2");
        assert_eq!(xff.request_peer(lb, ["203.0.113.7"].into_iter()), ip("203.0.113.7"));
        // A client that writes its own header: the proxy appended the real one.
        assert_eq!(xff.request_peer(lb, ["1.1.1.1, 203.0.113.7"].into_iter()), ip("203.0.113.7"));
        assert_eq!(xff.request_peer(lb, ["1.1.1.1", "203.0.113.7, 10.0.0.9"].into_iter()), ip("203.0.113.7"));
        assert_eq!(xff.request_peer(lb, ["[2001:db8::5]:443"].into_iter()), ip("2001:db8::5"));
        // Untrusted peer: the header is not read at all.
        assert_eq!(xff.request_peer(ip("192.0.2.1"), ["203.0.113.7"].into_iter()), ip("192.0.2.1"));
        // Garbage or nothing: the trusted hop, never what a client wrote.
        assert_eq!(xff.request_peer(lb, ["unknown"].into_iter()), lb);
        assert_eq!(xff.request_peer(lb, std::iter::empty()), lb);
        assert_eq!(xff.request_peer(lb, ["203.0.113.7, garbage, 10.0.0.3"].into_iter()), ip("10.0.0.3"));
        let fwd = source(PeerMode::Forwarded, &["10.0.0.2"]);
        assert_eq!(
            fwd.request_peer(
                lb,
                [r#"for=192.0.2.60;proto=http;by=10.0.0.2, For="[2001:db8:cafe::17]:4711""#].into_iter()
            ),
            ip("2001:db8:cafe::17")
        );
        assert_eq!(fwd.request_peer(lb, ["for=_hidden"].into_iter()), lb);
        // A PROXY-protocol source never reads headers.
        let pp = source(PeerMode::ProxyProtocol, &["10.0.0.2"]);
        assert_eq!(pp.request_peer(lb, ["203.0.113.7"].into_iter()), lb);
        // The default trusts nobody.
        assert!(!PeerSource::default().is_trusted(lb));
        assert_eq!(PeerSource::default().request_peer(lb, ["203.0.113.7"].into_iter()), lb);
    }

    #[test]
    fn a_mode_needs_a_proxy_and_a_proxy_needs_a_mode() {
        assert!(PeerSource::new(PeerMode::ProxyProtocol, vec![]).is_err());
        assert!(PeerSource::new(PeerMode::Tcp, vec![parse_trusted("10.0.0.1").unwrap()]).is_err());
        assert!(parse_trusted("10.0.0.0/33").is_err());
        assert!(parse_trusted("--proxy-protocol").is_err());
        assert_eq!(parse_trusted("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        let s = source(PeerMode::XForwardedFor, &["127.0.0.1"]);
        assert!(s.is_trusted(ip("::ffff:127.0.0.1")), "a v4-mapped address is the v4 address");
    }

    #[test]
    fn per_peer_limits_count_an_ipv6_subscriber_as_one() {
        assert_eq!(peer_key(ip("2001:db8:1:2:aaaa::1")), peer_key(ip("2001:db8:1:2:bbbb::9")));
        assert_ne!(peer_key(ip("2001:db8:1:3::1")), peer_key(ip("2001:db8:1:2::1")));
        assert_eq!(peer_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
    }

    #[tokio::test]
    async fn a_stream_keeps_what_was_read_past_the_header() {
        use tokio::io::AsyncReadExt;
        let bytes = b"PROXY TCP4 203.0.113.7 10.0.0.1 1 2\r\nGET /health HTTP/1.1\r\n\r\n".to_vec();
        let mut s = &bytes[..];
        let (hdr, rest) = read_proxy_header(&mut s).await.unwrap();
        assert_eq!(hdr, ProxyHeader::Peer("203.0.113.7:1".parse().unwrap()));
        let mut p = Prefixed::new(s, rest);
        let mut out = String::new();
        p.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "GET /health HTTP/1.1\r\n\r\n");
    }

    proptest! {
        // Whatever a proxy (or anyone) sends, the parser answers: never a panic, never past the buffer.
        #[test]
        fn any_bytes_parse_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..300), v2_sig in any::<bool>(), v1_sig in any::<bool>()) {
            let mut buf = Vec::new();
            if v2_sig { buf.extend_from_slice(V2_SIGNATURE); } else if v1_sig { buf.extend_from_slice(b"PROXY "); }
            buf.extend_from_slice(&bytes);
            if let Ok(Some((_, n))) = parse_proxy_header(&buf) {
                prop_assert!(n <= buf.len());
            }
        }

        #[test]
        fn v1_round_trips(a in any::<[u8; 4]>(), port in any::<u16>()) {
            let src = IpAddr::from(a);
            let line = format!("PROXY TCP4 {src} 10.0.0.1 {port} 7878\r\n");
            prop_assert_eq!(parse_proxy_header(line.as_bytes()).unwrap().unwrap(), (ProxyHeader::Peer(SocketAddr::new(src, port)), line.len()));
        }

        #[test]
        fn any_header_value_gives_the_trusted_hop_or_an_address_in_it(v in "[0-9a-f.:, \\[\\]\"=;forFOR_-]{0,80}") {
            let s = source(PeerMode::XForwardedFor, &["10.0.0.2"]);
            let peer = s.request_peer(ip("10.0.0.2"), [v.as_str()].into_iter());
            let named: Vec<IpAddr> = v.split(',').filter_map(parse_node).collect();
            prop_assert!(peer == ip("10.0.0.2") || named.contains(&peer), "{peer} from {v:?}");
            let f = source(PeerMode::Forwarded, &["10.0.0.2"]);
            let peer = f.request_peer(ip("10.0.0.2"), [v.as_str()].into_iter());
            let named: Vec<IpAddr> = v.split(',').filter_map(forwarded_for).collect();
            prop_assert!(peer == ip("10.0.0.2") || named.contains(&peer), "{peer} from {v:?}");
        }
    }
}
