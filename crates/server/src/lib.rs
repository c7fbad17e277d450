//! pcmail-server: the server engine on SQLite (used in-process as the embedded
//! default and behind HTTP by `pcmail serve`), implementing docs/protocol.md.

/// Mail not yet final, as the `mail_expiring` index's predicate says it
/// (schema step 13). A query repeats it word for word so SQLite sees the
/// index applies; an `IN` list of three constants would build a temporary
/// b-tree on every insert and update of mail, to test it against the index.
macro_rules! mail_open_states {
    () => {
        "(state = 'new' OR state = 'delivered' OR state = 'seen')"
    };
}

/// Final mail, as the `mail_final` index's predicate says it (see
/// `mail_open_states`).
macro_rules! mail_final_states {
    () => {
        "(state = 'done' OR state = 'failed' OR state = 'expired')"
    };
}

mod alert_posts;
mod auth;
mod ctx;
pub mod engine;
pub mod http;
pub mod listen;
mod mail;
pub mod migrate_from;
mod ops;
pub mod peer;
pub mod prune;
mod schema;
mod schema_pg;
pub mod store;
mod sweep;
pub mod tls;
pub mod webhook;

pub use engine::{ChangeListener, Engine, EngineConfig, EngineError};
pub use http::{serve, serve_blocking, serve_with_listener, ServeOptions};
pub use schema::schema_version;
pub use sweep::alert_key;

/// Connects to the database and brings its schema to this build's (what
/// `pcmail serve --db postgres://…` does at start), then lets go.
pub fn prepare_postgres(target: &store::pg_url::PgTarget) -> Result<(), store::pg::PgOpenError> {
    store::pg::PgStore::open(target.clone()).map(drop)
}
