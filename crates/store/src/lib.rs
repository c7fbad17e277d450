//! pcmail-store (in progress)
