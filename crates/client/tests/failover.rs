//! A PC with several addresses of one server: a request that cannot reach
//! the first goes to the next, the PC stays there, and comes back to the
//! first once it answers again. Real `pcmail serve` servers on loopback.

mod common;

use common::serve_at;
use pcmail_client::transport::{CallError, Http, Transport};
use pcmail_core::protocol::Op;
use pcmail_testkit::free_addr;
use std::time::Duration;

const TOKEN: &str = "failover-token-0123";

#[test]
fn a_pc_fails_over_to_the_next_address_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (free_addr(), free_addr());
    let (url_a, url_b) = (format!("http://{a}/api"), format!("http://{b}/api"));
    let server_b = serve_at(b, &dir.path().join("b.db"), TOKEN, 1);
    let t = Http::connect(&[url_a.clone(), url_b.clone()], None, Some(TOKEN), "pc-a", true)
        .unwrap()
        .with_return_after(Duration::from_millis(300));

    // A is down: the request is answered by B, and B is where the PC stays.
    let r = t.call(&Op::Hello).unwrap();
    assert_eq!(r["ok"], true);
    assert_eq!(t.describe(), url_b, "doctor shows the address that answered");

    // A comes up; within the return window the PC stays on B.
    let server_a = serve_at(a, &dir.path().join("a.db"), TOKEN, 1);
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
