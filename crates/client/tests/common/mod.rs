//! A server that answers from a script and records every request (the poll
//! cycle's tests drive the client against it).

use pcmail_client::transport::{CallError, Transport};
use pcmail_core::protocol::Op;
use serde_json::Value;
use std::sync::{Arc, Mutex};

pub type Answer = Box<dyn FnMut(&Op) -> Result<Value, CallError> + Send>;

#[derive(Clone, Default)]
pub struct Scripted {
    pub calls: Arc<Mutex<Vec<Op>>>,
    pub answer: Arc<Mutex<Option<Answer>>>,
    /// What `describe` says (the client prints it in errors).
    pub name: &'static str,
}

impl Transport for Scripted {
    fn call(&self, op: &Op) -> Result<Value, CallError> {
        self.calls.lock().unwrap().push(op.clone());
        (self.answer.lock().unwrap().as_mut().expect("the test set no answer"))(op)
    }
    fn long_poll(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        self.name.into()
    }
}
