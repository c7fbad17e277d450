//! `pcmail serve` on TLS: nothing secret crosses a LAN in
//! clear. The certificate comes from files, or is a self-signed one made at
//! first start and kept beside serve.db. PCs trust it by its SHA-256
//! fingerprint (the join code carries it), so no CA is needed.

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The self-signed pair's file names, beside serve.db.
pub const SELF_SIGNED_CERT: &str = "serve-cert.pem";
pub const SELF_SIGNED_KEY: &str = "serve-key.pem";

/// How `serve` carries requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeTransport {
    /// Plain HTTP: on loopback (nothing crosses a network).
    Plain,
    /// Plain HTTP beyond loopback, because the admin said `--insecure-http`.
    InsecureHttp,
    /// TLS with the self-signed certificate kept in this folder (made at first start).
    SelfSigned { dir: PathBuf },
    /// TLS with the admin's certificate and key (PEM files).
    Files { cert: PathBuf, key: PathBuf },
}

/// What the admin asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct TlsChoice {
    /// `--tls`: TLS even on loopback (self-signed unless files are given).
    pub tls: bool,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub insecure_http: bool,
}

/// Decides the transport. Beyond loopback the admin chooses TLS or, on
/// purpose, `--insecure-http`; nothing beyond loopback is plain by default.
pub fn decide(listen: SocketAddr, choice: &TlsChoice, db_dir: &Path) -> Result<ServeTransport, String> {
    let files = match (&choice.cert, &choice.key) {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        (None, None) => None,
        _ => return Err("--tls-cert and --tls-key go together (the certificate chain and its private key, PEM)".into()),
    };
    if choice.insecure_http && (choice.tls || files.is_some()) {
        return Err("--insecure-http turns TLS off: it cannot go with --tls, --tls-cert or --tls-key".into());
    }
    if let Some((cert, key)) = files {
        return Ok(ServeTransport::Files { cert, key });
    }
    if choice.tls {
        return Ok(ServeTransport::SelfSigned { dir: db_dir.to_path_buf() });
    }
    if listen.ip().is_loopback() {
        return Ok(ServeTransport::Plain);
    }
    if choice.insecure_http {
        return Ok(ServeTransport::InsecureHttp);
    }
    // Beyond loopback TLS is the default: plain HTTP would carry
    // the admin secret and every PC's credential in clear.
    Ok(ServeTransport::SelfSigned { dir: db_dir.to_path_buf() })
}

/// A certificate and key ready to serve, and the fingerprint PCs pin.
pub struct TlsIdentity {
    pub config: Arc<rustls::ServerConfig>,
    pub fingerprint: String,
    /// Where the certificate lives (for the start-up line).
    pub cert_path: PathBuf,
    /// True when this start made the self-signed pair.
    pub made_now: bool,
}

/// Loads the certificate (making the self-signed pair on first start).
pub fn identity(transport: &ServeTransport) -> anyhow::Result<Option<TlsIdentity>> {
    let (cert, key, made_now) = match transport {
        ServeTransport::Plain | ServeTransport::InsecureHttp => return Ok(None),
        ServeTransport::Files { cert, key } => (cert.clone(), key.clone(), false),
        ServeTransport::SelfSigned { dir } => {
            let (cert, key) = (dir.join(SELF_SIGNED_CERT), dir.join(SELF_SIGNED_KEY));
            let made = make_self_signed_if_missing(dir, &cert, &key)?;
            (cert, key, made)
        }
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .with_context(|| format!("reading the TLS certificate {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("{} is not a PEM certificate chain", cert.display()))?;
    let first = chain.first().with_context(|| format!("{} holds no certificate", cert.display()))?;
    let fingerprint = pcmail_core::auth::cert_fingerprint(first.as_ref());
    let private = PrivateKeyDer::from_pem_file(&key)
        .with_context(|| format!("reading the TLS private key {} (PEM)", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .with_context(|| format!("the key {} does not fit the certificate {}", key.display(), cert.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(TlsIdentity { config: Arc::new(config), fingerprint, cert_path: cert, made_now }))
}

/// Makes the self-signed pair when neither file exists; refuses a half pair
/// (a lost key must not silently become a new identity PCs would refuse).
fn make_self_signed_if_missing(dir: &Path, cert: &Path, key: &Path) -> anyhow::Result<bool> {
    match (cert.exists(), key.exists()) {
        (true, true) => return Ok(false),
        (false, false) => {}
        _ => anyhow::bail!(
            "only one of {} and {} exists: restore the other, or remove both to make a new certificate \
             (every PC must then pin the new fingerprint)",
            cert.display(),
            key.display()
        ),
    }
    pcmail_fsmode::create_private_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut names = vec!["pcmail-serve".to_string(), "localhost".to_string()];
    if let Ok(h) = std::env::var("HOSTNAME").or_else(|_| std::env::var("COMPUTERNAME")) {
        if !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
            names.push(h);
        }
    }
    let made = rcgen::generate_simple_self_signed(names).context("making a self-signed certificate")?;
    // The key first and private (0600), then the certificate: a crash between leaves a state start refuses.
    pcmail_fsmode::write_private(key, made.signing_key.serialize_pem().as_bytes())
        .with_context(|| format!("writing {}", key.display()))?;
    std::fs::write(cert, made.cert.pem()).with_context(|| format!("writing {}", cert.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn beyond_loopback_tls_is_the_default_and_plain_http_needs_a_flag() {
        let dir = Path::new("/data");
        let none = TlsChoice::default();
        assert_eq!(decide(addr("127.0.0.1:7878"), &none, dir), Ok(ServeTransport::Plain));
        assert_eq!(decide(addr("[::1]:7878"), &none, dir), Ok(ServeTransport::Plain));
        assert_eq!(decide(addr("0.0.0.0:7878"), &none, dir), Ok(ServeTransport::SelfSigned { dir: dir.into() }));
        let insecure = TlsChoice { insecure_http: true, ..Default::default() };
        assert_eq!(decide(addr("0.0.0.0:7878"), &insecure, dir), Ok(ServeTransport::InsecureHttp));
        let tls = TlsChoice { tls: true, ..Default::default() };
        assert_eq!(decide(addr("127.0.0.1:0"), &tls, dir), Ok(ServeTransport::SelfSigned { dir: dir.into() }));
        let files = TlsChoice { cert: Some("c.pem".into()), key: Some("k.pem".into()), ..Default::default() };
        assert_eq!(
            decide(addr("192.168.1.5:7878"), &files, dir),
            Ok(ServeTransport::Files { cert: "c.pem".into(), key: "k.pem".into() })
        );
        let half = TlsChoice { cert: Some("c.pem".into()), ..Default::default() };
        assert!(decide(addr("0.0.0.0:7878"), &half, dir).is_err());
        let both = TlsChoice { tls: true, insecure_http: true, ..Default::default() };
        assert!(decide(addr("0.0.0.0:7878"), &both, dir).is_err());
    }

    #[test]
    fn the_self_signed_pair_is_made_once_with_a_private_key() {
        let dir = tempfile::tempdir().unwrap();
        let t = ServeTransport::SelfSigned { dir: dir.path().join("data") };
        let first = identity(&t).unwrap().unwrap();
        assert!(first.made_now);
        let again = identity(&t).unwrap().unwrap();
        assert!(!again.made_now);
        assert_eq!(first.fingerprint, again.fingerprint, "kept, not made anew");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("data").join(SELF_SIGNED_KEY)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_file(dir.path().join("data").join(SELF_SIGNED_KEY)).unwrap();
        let e = identity(&t).err().expect("a certificate without its key is refused");
        assert!(e.to_string().contains("only one of"), "{e}");
    }
}
