//! Leadership (placeholder until the Lease elector lands).

use tokio::sync::watch;

#[derive(Clone)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
}

impl Leadership {
    pub fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        std::mem::forget(tx);
        Leadership { rx }
    }
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }
    pub fn is_known(&self) -> bool {
        true
    }
    pub fn holder(&self) -> Option<String> {
        None
    }
    pub async fn changed(&mut self) {
        let _ = self.rx.changed().await;
    }
}
