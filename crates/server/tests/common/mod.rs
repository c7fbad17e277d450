//! What the server's HTTP tests share: `pcmail serve`'s HTTP layer on
//! loopback, its database in the server's own folder, stopped when dropped.
#![allow(dead_code)] // each test file uses its part

use pcmail_server::{serve_with_listener, ServeOptions};
use pcmail_testkit::Loopback;
use std::path::Path;

/// `pcmail serve` on loopback with the admin secret `token`.
pub async fn serve(token: &str) -> Loopback {
    serve_with(token, |_, _| {}).await
}

/// The same, with its options changed first by `change` (handed the
/// server's folder too, for a certificate kept there).
pub async fn serve_with(token: &str, change: impl FnOnce(&mut ServeOptions, &Path)) -> Loopback {
    Loopback::start(|dir, listener, stopped| {
        let mut opts = ServeOptions::new(dir.join("server.db"), token);
        change(&mut opts, dir);
        serve_with_listener(listener, opts, stopped)
    })
    .await
}
