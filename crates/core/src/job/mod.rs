//! Jobs: a command queue on the same server, protocol and PCs as
//! the mail. The wire types both servers answer and the PC reads, the limits,
//! and every rule that the submitting CLI, the servers and the executing PC
//! all check (one function each): a command's spec, its typed arguments, who
//! may submit, the dedup key, job ids, the output cap. See docs/protocol.md
//! "Jobs".
//!
//! Each item has one path, `pcmail_core::job::…`: the files below split the
//! module by concern and are not modules of their own to the outside.

mod builtins;
mod check;
mod limits;
mod parse;
mod policy;
mod spec;
#[cfg(test)]
mod tests;
mod wire;

pub use builtins::*;
pub use check::*;
pub use limits::*;
pub use parse::*;
pub use policy::*;
pub use spec::*;
pub use wire::*;
