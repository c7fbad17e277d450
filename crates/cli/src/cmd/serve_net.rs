//! `pcmail serve`'s connection flags (docs/serve.md): time and count bounds
//! on connections, and where the real peer comes from behind a balancer.

use pcmail_server::listen::{self, Limits};
use pcmail_server::peer::{IpNet, PeerMode, PeerSource};
use std::time::Duration;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy…` (nginx's `$proxy_add_x_forwarded_for`, haproxy's `option forwardfor`).
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client`.
    Forwarded,
}

#[derive(clap::Args, Debug)]
pub struct ServeNet {
    /// Connections held at once; lowered to fit the open-file limit (raised to its hard limit at start) less a reserve.
    #[arg(long, default_value_t = listen::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Connections from one address (a /64 for IPv6). A PC holds 1-3: the default leaves room for ~80 PCs behind one NAT.
    #[arg(long, default_value_t = listen::DEFAULT_MAX_CONNECTIONS_PER_PEER)]
    max_connections_per_peer: usize,
    /// Time from a connection's start, or a request's first byte, to its whole request head (10s, 500ms, 2m).
    #[arg(long, default_value = "10s", value_parser = listen::parse_duration)]
    header_timeout: Duration,
    /// Time from the request head to its whole body; also how long a response may wait for a client that does not read it.
    #[arg(long, default_value = "30s", value_parser = listen::parse_duration)]
    body_timeout: Duration,
    /// A kept-alive connection with no request in flight is closed after this (an open long poll is in flight, not idle).
    #[arg(long, default_value = "60s", value_parser = listen::parse_duration)]
    idle_timeout: Duration,
    /// Time for a client to finish its TLS handshake.
    #[arg(long, default_value = "10s", value_parser = listen::parse_duration)]
    tls_handshake_timeout: Duration,
    /// Behind a balancer: its address (or ADDRESS/PREFIX; repeat for several). Only these may name the real peer,
    /// with --proxy-protocol or --forwarded-header; nothing a client sends is believed otherwise.
    #[arg(long = "trusted-proxy", value_name = "ADDRESS[/PREFIX]", value_parser = pcmail_server::peer::parse_trusted)]
    trusted_proxy: Vec<IpNet>,
    /// Connections from a --trusted-proxy open with a PROXY protocol header, v1 or v2 (haproxy's send-proxy or
    /// send-proxy-v2); one without it is closed.
    #[arg(long, conflicts_with = "forwarded_header")]
    proxy_protocol: bool,
    /// Requests from a --trusted-proxy name the client in this header (the nearest untrusted hop counts).
    #[arg(long, value_enum, value_name = "HEADER")]
    forwarded_header: Option<ForwardedHeader>,
}

impl ServeNet {
    /// The bounds and the peer source; a contradiction is a usage error.
    pub fn parts(self) -> Result<(Limits, PeerSource), String> {
        if self.max_connections == 0 || self.max_connections_per_peer == 0 {
            return Err("--max-connections and --max-connections-per-peer must be at least 1".into());
        }
        let limits = Limits {
            max_connections: self.max_connections,
            max_connections_per_peer: self.max_connections_per_peer,
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            idle_timeout: self.idle_timeout,
            handshake_timeout: self.tls_handshake_timeout,
        };
        let mode = match (self.proxy_protocol, self.forwarded_header) {
            (true, _) => PeerMode::ProxyProtocol,
            (false, Some(ForwardedHeader::XForwardedFor)) => PeerMode::XForwardedFor,
            (false, Some(ForwardedHeader::Forwarded)) => PeerMode::Forwarded,
            (false, None) => PeerMode::Tcp,
        };
        Ok((limits, PeerSource::new(mode, self.trusted_proxy)?))
    }
}
