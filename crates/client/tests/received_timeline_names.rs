//! Names with the received timeline: mail addressed to a name this PC holds gets the
//! same received updates as mail to its label. The server's sweep expires a
//! mail to `ani` that pc-b holds: pc-b's store reads `expired` with the
//! server's time. Real server engine on a SQLite file, real PC stores, a
//! clock this test moves; the session is registered as the hook records one.

use pcmail_client::ops::{Draft, Expires};
use pcmail_core::State;
use pcmail_store::leases::{self as sl, SessionRow};
use serde_json::json;

mod common;
use common::{advance, clock};

#[test]
fn mail_to_a_name_the_server_expires_reads_expired_on_the_pc_holding_the_name() {
    let common::Two { dir: _dir, db, mut a, mut b } = common::two_pcs(clock);

    // A session on pc-b, as the hook records it (prompted just now), takes `ani`.
    let now = clock();
    b.store
        .write(|tx| {
            sl::session_record(
                tx,
                &SessionRow {
                    session: "t1-session".into(),
                    pid: None,
                    pid_start: None,
                    cwd: Some("/w/app".into()),
                    repo: Some("github.com/kim/app".into()),
                    branch: Some("main".into()),
                    started_at: now,
                    last_prompt_at: Some(now),
                    ended_at: None,
                    end_reason: None,
                },
            )
        })
        .unwrap();
    b.name_take("ani", "t1-session").unwrap();

    let draft = Draft {
        to: "ani".into(),
        body: "decide by noon".into(),
        expires: Some(Expires::In(60_000)),
        ..Default::default()
    };
    let id = a.send(draft).unwrap().ids[0].clone();
    let stored_at = advance(100);
    b.sync_once(0).unwrap();
    let m = b.store.inbox_get(&id).unwrap().expect("mail to the name is stored on pc-b");
    let delivered = m.timeline.iter().find(|e| e.state == State::Delivered).expect("delivered recorded");
    assert_eq!((delivered.at, delivered.by.as_str()), (stored_at, "pc-b"), "the server's record of the confirm");

    // The sweep expires it; nobody on pc-b touched it.
    let swept_at = advance(120_000);
    let engine = pcmail_server::Engine::open(&db, pcmail_server::EngineConfig::default()).unwrap();
    assert_eq!(
        engine.handle_value(&json!({"v": 1, "op": "sweep", "pc": "pc-a", "args": {}}), swept_at)["expired"],
        json!(1)
    );
    advance(5_000);
    let r = b.sync_once(0).unwrap();
    assert!(r.received_updates >= 1, "{r:?}");

    let m = b.store.inbox_get(&id).unwrap().unwrap();
    assert_eq!(m.status, State::Expired, "pc-b learns of the server-side expiry");
    // At the moment the server's rule fired (its `expiresAt`), whenever the sweep ran.
    assert_eq!(Some(m.status_at), m.expires_at, "with the server's time");
    assert!(m.status_at < swept_at);
    assert_eq!(m.status_by.as_deref(), Some("server"));
}
