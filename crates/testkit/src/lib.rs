//! What the tests of several crates share, so that each test states only
//! what it is about: a server on loopback that stops when dropped
//! ([`Loopback`]), protocol requests posted to it ([`req`], [`call`],
//! [`register`]), and the address a server process announces
//! ([`listening_url`]), which cached SQLite statements were compiled
//! again ([`statements_compiled_again`]), and work started on several
//! threads at once ([`at_once`]).
//!
//! It knows no pcmail crate: the caller hands in the function that serves, so
//! every crate's tests may use it without an arrow pointing up.

mod loopback;
mod race;
mod request;
mod sqlite;

pub use loopback::{free_addr, free_port, Loopback, Stopped};
pub use race::at_once;
pub use request::{call, listening_url, post, register, req};
pub use sqlite::{statements_compiled_again, statements_kept, temporary_btrees};
