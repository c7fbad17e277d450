//! The one state machine: `new → delivered → seen → done | failed | expired`.
//! Forward only and idempotent: a transition to a state of rank ≤ the current
//! one is a no-op that still answers ok.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum State {
    New,
    Delivered,
    Seen,
    Done,
    Failed,
    Expired,
}

impl State {
    pub const ALL: [State; 6] = [State::New, State::Delivered, State::Seen, State::Done, State::Failed, State::Expired];

    pub fn rank(self) -> u8 {
        match self {
            State::New => 0,
            State::Delivered => 1,
            State::Seen => 2,
            State::Done | State::Failed | State::Expired => 3,
        }
    }

    pub fn is_final(self) -> bool {
        self.rank() == 3
    }

    pub fn as_str(self) -> &'static str {
        match self {
            State::New => "new",
            State::Delivered => "delivered",
            State::Seen => "seen",
            State::Done => "done",
            State::Failed => "failed",
            State::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.iter().copied().find(|st| st.as_str() == s)
    }

    /// The state after asking for `target`: `Some(target)` when it moves
    /// forward, `None` when it is a no-op (already there, or past it).
    pub fn advance(self, target: State) -> Option<State> {
        if target.rank() > self.rank() {
            Some(target)
        } else {
            None
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn documented_cases() {
        assert_eq!(State::New.advance(State::Delivered), Some(State::Delivered));
        assert_eq!(State::Done.advance(State::Seen), None, "seen after done stays done");
        assert_eq!(State::Done.advance(State::Expired), None, "expired never overrides done");
        assert_eq!(State::Failed.advance(State::Expired), None);
        assert_eq!(State::Failed.advance(State::Done), None);
        assert_eq!(State::New.advance(State::Done), Some(State::Done), "skipping forward is allowed");
        assert_eq!(State::Seen.advance(State::Seen), None);
    }

    fn any_state() -> impl Strategy<Value = State> {
        prop::sample::select(State::ALL.to_vec())
    }

    proptest! {
        // Any sequence of requested transitions only ever moves forward, and a
        // final state never changes again.
        #[test]
        fn forward_only(targets in prop::collection::vec(any_state(), 0..40)) {
            let mut cur = State::New;
            for t in targets {
                let before = cur;
                if let Some(next) = cur.advance(t) { cur = next; }
                prop_assert!(cur.rank() >= before.rank());
                if before.is_final() { prop_assert_eq!(cur, before); }
                // Applying the same target again is a no-op (idempotent).
                prop_assert_eq!(cur.advance(t).is_none() || t.rank() > cur.rank(), true);
                prop_assert!(cur.advance(cur).is_none());
            }
        }
    }
}
