//! pcmail core: the mail model, ids, the state machine, roster resolution and
//! the protocol types. Pure logic: no I/O, no clock (time is passed in as ms).

pub mod answers;
pub mod auth;
pub mod due;
pub mod duration;
pub mod error;
pub mod hex;
pub mod ids;
pub mod job;
pub mod lease;
pub mod model;
pub mod op_table;
pub mod present;
pub mod protocol;
pub mod recipients;
pub mod repo_id;
pub mod roster;
pub mod rules;
pub mod sessions;
pub mod shared_table;
pub mod shell;
pub mod state;

pub use error::{ErrorCode, ProtoError};
pub use model::*;
pub use state::State;
