//! A server on 127.0.0.1, run by the function the test hands in, stopped
//! when dropped.

use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Resolves when the [`Loopback`] is stopped or dropped: the shutdown signal
/// handed to the serving function.
pub struct Stopped(oneshot::Receiver<()>);

impl Future for Stopped {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// A server listening on loopback, with a folder of its own for its files.
pub struct Loopback {
    pub addr: SocketAddr,
    /// `http://ADDR/api`, where the protocol is posted.
    pub url: String,
    /// `http://ADDR`, for the other paths (`/health`).
    pub base: String,
    stop: Option<oneshot::Sender<()>>,
    /// Serving on the test's runtime: its task (it answers an error as text).
    task: Option<tokio::task::JoinHandle<Result<(), String>>>,
    /// Serving on a runtime of its own: that runtime's thread.
    thread: Option<std::thread::JoinHandle<()>>,
    dir: tempfile::TempDir,
}

impl Loopback {
    /// Binds 127.0.0.1 on a free port and serves there on the test's runtime:
    /// `serve(dir, listener, stopped)`, `dir` being the server's own folder.
    pub async fn start<F, Fut, E>(serve: F) -> Loopback
    where
        F: FnOnce(&Path, TcpListener, Stopped) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Debug,
    {
        Loopback::serve(TcpListener::bind("127.0.0.1:0").await.unwrap(), serve)
    }

    /// Serves on a listener the test bound itself (to change the process's
    /// limits between the bind and the server's start).
    pub fn serve<F, Fut, E>(listener: TcpListener, serve: F) -> Loopback
    where
        F: FnOnce(&Path, TcpListener, Stopped) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Debug,
    {
        let dir = tempfile::tempdir().unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel();
        let fut = serve(dir.path(), listener, Stopped(stopped));
        let task = tokio::spawn(async move { fut.await.map_err(|e| format!("{e:?}")) });
        Loopback::new(addr, stop, Some(task), None, dir)
    }

    /// Serves at `addr` (a port the test chose, so that it can start the
    /// server again there) on a runtime of `workers` threads of its own: for
    /// tests that block. Answers once the port is bound; dropping it stops
    /// the server and waits for its thread.
    pub fn on_thread<F, Fut, E>(addr: SocketAddr, workers: usize, serve: F) -> Loopback
    where
        F: FnOnce(&Path, TcpListener, Stopped) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Debug,
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let (stop, stopped) = oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = TcpListener::bind(addr).await.unwrap();
                ready_tx.send(()).unwrap();
                serve(&path, listener, Stopped(stopped)).await.unwrap();
            });
        });
        ready_rx.recv().unwrap();
        Loopback::new(addr, stop, None, Some(thread), dir)
    }

    fn new(
        addr: SocketAddr,
        stop: oneshot::Sender<()>,
        task: Option<tokio::task::JoinHandle<Result<(), String>>>,
        thread: Option<std::thread::JoinHandle<()>>,
        dir: tempfile::TempDir,
    ) -> Loopback {
        let (url, base) = (format!("http://{addr}/api"), format!("http://{addr}"));
        Loopback { addr, url, base, stop: Some(stop), task, thread, dir }
    }

    /// The server's own folder (removed when it is dropped).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server and requires that it stopped cleanly.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An address on 127.0.0.1 that was free a moment ago (for a server that
/// must start at a known address, or for nothing to listen at).
///
/// The port is taken below the kernel's ephemeral range. A port from
/// binding `:0` is one the kernel hands out again at once: to the next
/// outgoing connection of any test running beside this one (they make
/// hundreds), which then holds it when the server binds, and the server
/// fails with "Address already in use". Below the range only another test's
/// own pick can collide, and the port is checked free on the wildcard
/// address and on loopback first.
pub fn free_addr() -> SocketAddr {
    let low = ephemeral_low();
    let span = u32::from(low.saturating_sub(FIRST_PICKED_PORT));
    if span >= 1_000 {
        let mut seed = random_seed();
        for _ in 0..200 {
            // xorshift: enough to spread the picks of tests started together.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let port = FIRST_PICKED_PORT + (seed % u64::from(span)) as u16;
            let free = |ip: &str| std::net::TcpListener::bind((ip, port)).is_ok();
            if free("0.0.0.0") && free("127.0.0.1") {
                return SocketAddr::from(([127, 0, 0, 1], port));
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// Ports picked by [`free_addr`] start here: above the well-known and the
/// usual service ports a developer's machine may run.
const FIRST_PICKED_PORT: u16 = 20_000;

/// The first port of the kernel's ephemeral range (Linux's file; 32768,
/// its default and below Windows' and macOS' 49152, elsewhere).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32_768)
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish() | 1
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    free_addr().port()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_outside_the_range_the_kernel_hands_out_and_free() {
        let low = ephemeral_low();
        for _ in 0..20 {
            let addr = free_addr();
            assert!(addr.port() >= FIRST_PICKED_PORT && addr.port() < low, "{addr} below {low}");
            std::net::TcpListener::bind(("0.0.0.0", addr.port())).expect("free on the wildcard address");
        }
    }
}
