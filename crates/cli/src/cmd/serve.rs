//! `pcmail serve`: the HTTP server's wiring (its database, TLS, connection
//! limits and admin secret), and `--migrate-from`'s copy into PostgreSQL.

use pcmail_client::ClientError;
use std::path::PathBuf;

/// `pcmail serve`'s arguments, as parsed.
pub struct ServeOpts {
    pub listen: std::net::SocketAddr,
    pub db: Option<String>,
    pub migrate_from: Option<PathBuf>,
    pub webhook: Option<String>,
    pub retention_days: u32,
    pub tls: bool,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub insecure_http: bool,
    /// Threads answering requests (None: the host's cores).
    pub threads: Option<usize>,
    pub net: super::serve_net::ServeNet,
}

pub fn run(o: ServeOpts, json: bool) -> anyhow::Result<()> {
    let p = super::paths()?;
    let postgres = match o.db.as_deref() {
        Some(url) if pcmail_server::store::pg_url::is_postgres_url(url) => Some(postgres_target(url)?),
        _ => None,
    };
    if let Some(source) = o.migrate_from {
        let Some(target) = &postgres else {
            anyhow::bail!(ClientError::Invalid(
                "--migrate-from copies into PostgreSQL: give --db postgres://USER@HOST/DB".into()
            ));
        };
        return copy_sqlite_into_postgres(&source, target, json);
    }
    let db = match (&postgres, o.db) {
        (None, Some(path)) => PathBuf::from(path),
        _ => p.home.join("serve.db"),
    };
    // TLS files (a made certificate) live beside the SQLite file, or in PCMAIL_HOME.
    let db_dir = if postgres.is_some() {
        p.home.clone()
    } else {
        db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new(".")).to_path_buf()
    };
    let choice =
        pcmail_server::tls::TlsChoice { tls: o.tls, cert: o.tls_cert, key: o.tls_key, insecure_http: o.insecure_http };
    // Before the secret is read: a refused --listen says so first.
    let transport =
        pcmail_server::tls::decide(o.listen, &choice, &db_dir).map_err(|e| anyhow::anyhow!(ClientError::Invalid(e)))?;
    let (limits, peers) = o.net.parts().map_err(|e| anyhow::anyhow!(ClientError::Invalid(e)))?;
    let token = pcmail_client::token::load("serve").map_err(|e| {
        anyhow::anyhow!(ClientError::Invalid(format!(
            "pcmail serve needs the admin secret: {e} (`echo SECRET | pcmail token set --serve`, or PCMAIL_ADMIN_TOKEN)"
        )))
    })?;
    let mut opts = pcmail_server::http::ServeOptions::new(db, token);
    opts.postgres = postgres;
    opts.listen = o.listen;
    opts.transport = transport;
    opts.webhook_url = o.webhook;
    opts.retention_ms = Some(i64::from(o.retention_days.max(1)) * 24 * 60 * 60 * 1000);
    (opts.limits, opts.peers) = (limits, peers);
    opts.threads = o.threads;
    pcmail_server::http::serve_blocking(opts)
}

/// A `--db postgres://…` with its password from the OS keyring (`pcmail
/// token set --db`) or a libpq passfile; refused when the URL holds one.
pub fn postgres_target(url: &str) -> anyhow::Result<pcmail_server::store::pg_url::PgTarget> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut t = pcmail_server::store::pg_url::PgTarget::parse(url, home.as_deref())
        .map_err(|e| anyhow::anyhow!(ClientError::Invalid(e.to_string())))?;
    if let Some(pw) = pcmail_client::token::db_password() {
        t.set_password(&pw);
    } else {
        t.password_from_passfile(home.as_deref());
    }
    Ok(t)
}

/// `serve --db postgres://… --migrate-from serve.db`.
fn copy_sqlite_into_postgres(
    source: &std::path::Path,
    target: &pcmail_server::store::pg_url::PgTarget,
    json: bool,
) -> anyhow::Result<()> {
    let report = pcmail_server::migrate_from::migrate_from_sqlite(source, target)
        .map_err(|e| anyhow::anyhow!(ClientError::Invalid(e.to_string())))?;
    if json {
        let tables: serde_json::Map<String, serde_json::Value> =
            report.tables.iter().map(|t| (t.table.clone(), serde_json::json!(t.rows))).collect();
        println!(
            "{}",
            serde_json::json!({"ok": true, "from": source.display().to_string(), "to": target.redacted(),
                               "tables": tables, "rows": report.total_rows(), "schema": report.schema_version})
        );
    } else {
        println!(
            "pcmail: copied {} rows from {} into {} (schema {}), every table checked:",
            report.total_rows(),
            source.display(),
            target.redacted(),
            report.schema_version
        );
        for t in report.tables.iter().filter(|t| t.rows > 0) {
            println!("  {:<14} {:>8}", t.table, t.rows);
        }
        println!("pcmail: now start every instance with `pcmail serve --db {}`", target.redacted());
    }
    Ok(())
}
