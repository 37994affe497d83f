//! A test's clock: its time limit counts the test's own work, not the time it spends waiting
//! for another test to give up a lock of the suite (the cluster-state lock of the controller
//! tests). With eight tests at once, a test that waits for an exclusive holder (or a writer
//! that waits for every reader) can wait longer than its own limit on a slow cluster; that is
//! not the test being slow.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// How long a test may wait for locks in all, past its own limit: a lock that never comes is a
/// bug of the suite and should fail the test, not hang the run.
pub const MAX_LOCK_WAIT: Duration = Duration::from_secs(30 * 60);

tokio::task_local! {
    static CLOCK: Clock;
}

/// What one test has waited for, shared between the harness and the test's task.
#[derive(Clone, Default)]
pub struct Clock(Arc<Mutex<Waits>>);

#[derive(Default)]
struct Waits {
    /// Waits that ended.
    done: Duration,
    /// When the wait under way (if any) began.
    since: Option<Instant>,
}

impl Clock {
    /// The time waited for locks so far, the wait under way included.
    pub fn waited(&self) -> Duration {
        let waits = self.0.lock().expect("the clock's lock is not poisoned");
        waits.done + waits.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Runs `body` on this clock and gives up once it has run `limit` past what it waited for
    /// locks (or waited more than [`MAX_LOCK_WAIT`]). `Err` carries the time waited.
    pub async fn limit<F: Future>(&self, limit: Duration, body: F) -> Result<F::Output, Duration> {
        let started = Instant::now();
        let body = CLOCK.scope(self.clone(), body);
        tokio::pin!(body);
        loop {
            let waited = self.waited().min(MAX_LOCK_WAIT);
            let deadline = started + limit + waited;
            match tokio::time::timeout_at(deadline, &mut body).await {
                Ok(output) => return Ok(output),
                // Time out only when no lock wait moved the deadline on meanwhile.
                Err(_) if self.waited().min(MAX_LOCK_WAIT) <= waited => {
                    return Err(self.waited());
                }
                Err(_) => {}
            }
        }
    }
}

/// Waits for `lock` (a future that takes a lock of the suite) without counting the wait
/// against the calling test's time limit. Outside a test run by the harness it just waits.
pub async fn lock_wait<F: Future>(lock: F) -> F::Output {
    let Ok(clock) = CLOCK.try_with(Clock::clone) else {
        return lock.await;
    };
    let began = Instant::now();
    clock
        .0
        .lock()
        .expect("the clock's lock is not poisoned")
        .since = Some(began);
    // Whether `lock` ends or the test is dropped mid-wait, the wait is counted once.
    struct Ends(Clock, Instant);
    impl Drop for Ends {
        fn drop(&mut self) {
            let mut waits = self.0.0.lock().expect("the clock's lock is not poisoned");
            waits.since = None;
            waits.done += self.1.elapsed();
        }
    }
    let _ends = Ends(clock, began);
    lock.await
}

/// The harness's own test of the clock (plain: it needs no cluster).
pub fn a_lock_wait_does_not_count_against_the_time_limit() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let limit = Duration::from_millis(300);
    let work = Duration::from_millis(200);
    runtime.block_on(async {
        // 600 ms waiting for a lock, then 200 ms of work: within a 300 ms limit.
        let clock = Clock::default();
        let waited = clock
            .limit(limit, async {
                lock_wait(tokio::time::sleep(Duration::from_millis(600))).await;
                tokio::time::sleep(work).await;
            })
            .await;
        anyhow::ensure!(waited.is_ok(), "the wait counted: {waited:?}");
        anyhow::ensure!(clock.waited() >= Duration::from_millis(600));
        // 400 ms of work and no wait: over the limit.
        let clock = Clock::default();
        let over = clock.limit(limit, tokio::time::sleep(work * 2)).await;
        anyhow::ensure!(over == Err(Duration::ZERO), "{over:?}");
        Ok(())
    })
}
