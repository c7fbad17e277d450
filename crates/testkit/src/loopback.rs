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
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    free_addr().port()
}
