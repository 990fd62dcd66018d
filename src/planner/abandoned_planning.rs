//! A planning nobody waits for any more. A statement stopped by its `statement_timeout` or a
//! cancel while it is planned leaves the planning running on its thread, unseen: DataFusion's
//! analyzer and optimizer have no point to stop it at. Meanwhile it keeps one of the few
//! planner places, and a hostile statement (a thousand-term `1 + 1 + …`) planned for minutes
//! in a debug build, while every later statement waited for a place. Our expression rules ask
//! here before each expression and give up once the planning is abandoned, so that it ends
//! soon after its statement does; DataFusion's own rules still run to their end.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::error::{DataFusionError, Result};

thread_local! {
    /// The flag of the planning this thread runs, if it is watched.
    static WATCHED: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Whoever waits for a planning: dropped, it marks the planning abandoned.
#[derive(Debug, Default)]
pub struct Waiter(Arc<AtomicBool>);

impl Waiter {
    /// The planning this waiter waits for, to run on another thread.
    pub fn planning(&self) -> Planning {
        Planning(Arc::clone(&self.0))
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A planning whose [`Waiter`] may stop waiting.
#[derive(Debug)]
pub struct Planning(Arc<AtomicBool>);

impl Planning {
    /// Runs `planning` on this thread, where [`check`] fails once the waiter is gone.
    pub fn run<T>(self, planning: impl FnOnce() -> T) -> T {
        let _restore = Restore(WATCHED.with(|watched| watched.replace(Some(self.0))));
        planning()
    }
}

/// Puts back the planning the thread watched before, also when a planning panics.
struct Restore(Option<Arc<AtomicBool>>);

impl Drop for Restore {
    fn drop(&mut self) {
        WATCHED.with(|watched| *watched.borrow_mut() = self.0.take());
    }
}

/// Fails once the planning running on this thread is abandoned; rules call it between
/// expressions.
pub fn check() -> Result<()> {
    let abandoned = WATCHED.with(|watched| watched.borrow().as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed)));
    if abandoned {
        Err(DataFusionError::Execution("planning abandoned: its statement has ended".into()))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_planning_fails_its_checks_once_its_waiter_is_gone() {
        let waiter = Waiter::default();
        assert!(waiter.planning().run(check).is_ok(), "waited for");
        let planning = waiter.planning();
        drop(waiter);
        assert!(planning.run(check).is_err(), "abandoned");
        assert!(check().is_ok(), "a planning that is not watched goes on");
    }
}
