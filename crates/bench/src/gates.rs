//! Ratio limits checked in the same run, shared by `pcmail-bench` and
//! `pcmail-bench-pc` (the latter includes this file by path: the two are
//! binaries with no library between them).

use anyhow::{bail, Result};

/// Ratio limits checked in the same run (`PCMAIL_BENCH_GATE=1`, as the test
/// suite runs the benches): never absolute times, which this machine's load moves.
pub struct Gates {
    on: bool,
    failed: Vec<String>,
}

impl Gates {
    pub fn from_env() -> Gates {
        Gates { on: std::env::var_os("PCMAIL_BENCH_GATE").is_some(), failed: Vec::new() }
    }

    pub fn at_most(&mut self, what: &str, ratio: f64, limit: f64) {
        let ok = ratio <= limit;
        if self.on {
            println!("gate: {what} {ratio:.2}x (limit {limit}x): {}", if ok { "ok" } else { "FAILED" });
        }
        if !ok {
            self.failed.push(format!("{what} {ratio:.2}x > {limit}x"));
        }
    }

    pub fn finish(self) -> Result<()> {
        if self.on && !self.failed.is_empty() {
            bail!("{} ratio gate(s) failed: {}", self.failed.len(), self.failed.join("; "));
        }
        Ok(())
    }
}
