//! A PC with several addresses of one server: a request that cannot reach
//! the first goes to the next, the PC stays there, and comes back to the
//! first once it answers again. Real `pcmail serve` servers on loopback.

use pcmail_client::transport::{CallError, Http, Transport};
use pcmail_core::protocol::Op;
use std::net::SocketAddr;
use std::time::Duration;

const TOKEN: &str = "failover-token-0123";

/// A `pcmail serve` on its own runtime thread; stopped when dropped.
struct Server {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(addr: SocketAddr, db: &std::path::Path) -> Server {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let opts = pcmail_server::ServeOptions::new(db, TOKEN);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
                ready_tx.send(()).unwrap();
                pcmail_server::serve_with_listener(listener, opts, async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            });
        });
        ready_rx.recv().unwrap();
        Server { stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

#[test]
fn a_pc_fails_over_to_the_next_address_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (free_addr(), free_addr());
    let (url_a, url_b) = (format!("http://{a}/api"), format!("http://{b}/api"));
    let server_b = Server::start(b, &dir.path().join("b.db"));
    let t = Http::new(&url_a, Some(TOKEN), "pc-a", true)
        .unwrap()
        .with_failover(std::slice::from_ref(&url_b), Duration::from_millis(300));

    // A is down: the request is answered by B, and B is where the PC stays.
    let r = t.call(&Op::Hello).unwrap();
    assert_eq!(r["ok"], true);
    assert_eq!(t.describe(), url_b, "doctor shows the address that answered");

    // A comes up; within the return window the PC stays on B.
    let server_a = Server::start(a, &dir.path().join("a.db"));
    t.call(&Op::Hello).unwrap();
    assert_eq!(t.describe(), url_b);
    std::thread::sleep(Duration::from_millis(350));
    t.call(&Op::Hello).unwrap();
    assert_eq!(t.describe(), url_a, "back on the first address once it answers");

    // Both down: one clear transient error naming the last address tried.
    drop(server_a);
    drop(server_b);
    match t.call(&Op::Hello) {
        Err(CallError::Transient(m)) => assert!(m.contains(&url_b) || m.contains(&url_a), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_single_address_behaves_as_before() {
    let addr = free_addr();
    let t = Http::new(&format!("http://{addr}/api"), Some(TOKEN), "pc-a", true).unwrap();
    assert!(matches!(t.call(&Op::Hello), Err(CallError::Transient(_))));
    assert_eq!(t.describe(), format!("http://{addr}/api"));
}
