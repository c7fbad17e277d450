//! How a PostgreSQL error is shown: its own module, so that the schema's
//! migrations can name an error without depending on the store that runs them.

/// The SQLSTATE and message of a PostgreSQL error, never the parameters.
pub(crate) fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}
