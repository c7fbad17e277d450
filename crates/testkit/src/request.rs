//! Protocol requests as JSON, posted to a server; the address a server
//! process announces.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::Child;
use std::time::{Duration, Instant};

/// One request of protocol version 1 with the admin secret `token`.
pub fn req(pc: &str, op: &str, token: &str, args: Value) -> Value {
    json!({"v": 1, "op": op, "pc": pc, "token": token, "args": args})
}

/// Posts `body` to `url` and requires HTTP 200; the answer.
pub async fn call(url: &str, body: Value) -> Value {
    let r = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Posts `body` to `url` whatever the HTTP status; the answer.
pub async fn post(url: &str, body: Value) -> Value {
    reqwest::Client::new().post(url).json(&body).send().await.unwrap().json().await.unwrap()
}

/// Puts each label on the roster with the admin secret (its hostname the
/// label in capitals), requiring each to succeed.
pub async fn register(url: &str, token: &str, labels: &[&str]) {
    for pc in labels {
        let r = call(url, req(pc, "roster.set", token, json!({"label": pc, "hostname": pc.to_uppercase()}))).await;
        assert_eq!(r["ok"], json!(true), "{r}");
    }
}

/// Reads a starting server process's stdout until it says where it listens
/// (`listening on URL`), handing each line to `each` on the way, then keeps
/// draining it in a thread so the server never blocks on a full pipe. None
/// when the output ends first (the server exited); a panic when no line says
/// it within `within`.
pub fn listening_url(child: &mut Child, within: Duration, mut each: impl FnMut(&str)) -> Option<String> {
    let mut lines = BufReader::new(child.stdout.take().expect("the server's stdout is piped")).lines();
    let deadline = Instant::now() + within;
    let url = loop {
        assert!(Instant::now() < deadline, "the server did not say where it listens");
        let line = lines.next()?.unwrap();
        each(&line);
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Some(url)
}
