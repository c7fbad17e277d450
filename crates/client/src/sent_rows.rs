//! What the server's answer to a send puts in the PC store's `sent`, kept as
//! a value so that a caller that answers first can write it after
//! (`Client::defer_sent_rows`).

use pcmail_core::{Millis, OutgoingMail};
use pcmail_store::Store;

/// The rows of one accepted send, and the outbox row they settle.
pub(crate) struct SentRows {
    pub(crate) mail: OutgoingMail,
    pub(crate) ids: Vec<String>,
    pub(crate) from: String,
    pub(crate) at: Millis,
    pub(crate) settles: String,
}

impl SentRows {
    pub(crate) fn record(&self, store: &mut Store) -> pcmail_store::Result<()> {
        store.sent_record(&self.mail, &self.ids, &self.from, self.at, &self.settles)
    }
}
