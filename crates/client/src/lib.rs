//! pcmail-client (in progress)
