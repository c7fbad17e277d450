//! pcmail-server (in progress)
