//! One target: its corpus replayed, then generated inputs for a time budget, each under the
//! bounds.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use sha2::{Digest, Sha256};

use crate::alloc;

/// What one input may cost.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// The stack the parser runs on: a tokio worker's 2 MiB by default.
    pub stack: usize,
    /// CPU time of the thread for one input, in a debug build (CPU time, not wall time: a
    /// loaded machine preempts the thread without the parser doing more work).
    pub time: Duration,
    /// The most bytes the parser may hold at once for one input.
    pub memory: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            stack: 2 << 20,
            time: Duration::from_secs(2),
            memory: 64 << 20,
        }
    }
}

/// The property an input must keep: `Ok` or a reason; a panic counts as a failure too.
type Property = dyn Fn(&[u8]) -> Result<(), String> + Send + Sync;

/// A parser of untrusted input under test.
pub struct Target {
    name: &'static str,
    corpus: PathBuf,
    bounds: Bounds,
}

/// What a run saw, printed when it ends (`cargo test -- --nocapture` shows it).
#[derive(Default)]
struct Seen {
    corpus: usize,
    generated: u64,
    slowest: Duration,
    largest: usize,
}

impl Target {
    /// The target `name` of the crate at `manifest_dir` (`env!("CARGO_MANIFEST_DIR")`); its
    /// corpus is `tests/hostile/<name>/`.
    pub fn new(name: &'static str, manifest_dir: &str) -> Target {
        Target {
            name,
            corpus: Path::new(manifest_dir).join("tests/hostile").join(name),
            bounds: Bounds::default(),
        }
    }

    pub fn bounds(mut self, bounds: Bounds) -> Target {
        self.bounds = bounds;
        self
    }

    /// Replays the corpus, then runs the inputs `strategy` makes until the time budget is
    /// spent; panics naming the first input that breaks the property or a bound. The strategy
    /// is made on the target's own thread (proptest's boxed strategies stay on one).
    pub fn run<S, F>(
        self,
        strategy: F,
        property: impl Fn(&[u8]) -> Result<(), String> + Send + Sync + 'static,
    ) where
        S: Strategy<Value = Vec<u8>>,
        F: FnOnce() -> S + Send + 'static,
    {
        let property: Arc<Property> = Arc::new(property);
        let stack = self.bounds.stack;
        let name = self.name;
        let outcome = std::thread::Builder::new()
            .name(format!("hostile-{name}"))
            .stack_size(stack)
            .spawn(move || self.run_here(strategy(), property))
            .expect("spawn the target's thread")
            .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(why)) => panic!("hostile input for {name}: {why}"),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    fn run_here<S: Strategy<Value = Vec<u8>>>(
        self,
        strategy: S,
        property: Arc<Property>,
    ) -> Result<(), String> {
        assert!(
            alloc::installed(),
            "install hostile::Counting as the test binary's #[global_allocator]: \
             without it the memory bound is not measured"
        );
        let seen = RefCell::new(Seen::default());
        let started = Instant::now();
        for (path, bytes) in self.corpus_inputs()? {
            seen.borrow_mut().corpus += 1;
            self.check(&*property, &bytes, &seen)
                .map_err(|why| format!("corpus input {}: {why}", path.display()))?;
        }
        let budget = budget();
        let seed = seed();
        // Said first: an input that overflows the stack aborts the binary before the summary.
        eprintln!(
            "hostile {}: generating with LOOP_FUZZ_SEED={seed}",
            self.name
        );
        let deadline = Instant::now() + budget;
        let mut batch = 0u64;
        while Instant::now() < deadline {
            let config = Config {
                cases: 16,
                failure_persistence: None,
                max_shrink_time: 60_000,
                ..Config::default()
            };
            let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed, batch));
            let mut runner = TestRunner::new_with_rng(config, rng);
            let cases = Cell::new(0u64);
            let result = runner.run(&strategy, |input| {
                cases.set(cases.get() + 1);
                self.check(&*property, &input, &seen)
                    .map_err(TestCaseError::fail)
            });
            seen.borrow_mut().generated += cases.get();
            if let Err(e) = result {
                return Err(self.failed(e, seed, batch));
            }
            batch += 1;
        }
        let _ = std::fs::remove_file(self.pending());
        let seen = seen.into_inner();
        eprintln!(
            "hostile {}: {} corpus inputs and {} generated in {:.1}s (seed {seed}); slowest {} ms \
             of CPU, most memory {} KiB",
            self.name,
            seen.corpus,
            seen.generated,
            started.elapsed().as_secs_f64(),
            seen.slowest.as_millis(),
            seen.largest / 1024
        );
        Ok(())
    }

    /// Runs the property on one input and holds it to the bounds.
    fn check(&self, property: &Property, bytes: &[u8], seen: &RefCell<Seen>) -> Result<(), String> {
        // With LOOP_FUZZ_SAVE, each input is on disk while it runs: one that aborts the
        // binary (a stack overflow is no panic) stays there to be renamed into the corpus.
        let pending = std::env::var_os("LOOP_FUZZ_SAVE").map(|_| self.pending());
        if let Some(path) = &pending {
            let _ =
                std::fs::create_dir_all(&self.corpus).and_then(|()| std::fs::write(path, bytes));
        }
        let start = thread_cpu_time();
        let (outcome, peak) = alloc::measure(|| catch_unwind(AssertUnwindSafe(|| property(bytes))));
        let took = thread_cpu_time().saturating_sub(start);
        {
            let mut seen = seen.borrow_mut();
            seen.slowest = seen.slowest.max(took);
            seen.largest = seen.largest.max(peak);
        }
        match outcome {
            Err(panic) => return Err(format!("panicked: {}", panic_message(&panic))),
            Ok(Err(why)) => return Err(why),
            Ok(Ok(())) => {}
        }
        if took > self.bounds.time {
            return Err(format!(
                "took {} ms of CPU, over the bound of {} ms",
                took.as_millis(),
                self.bounds.time.as_millis()
            ));
        }
        if peak > self.bounds.memory {
            return Err(format!(
                "held {} KiB at once, over the bound of {} KiB",
                peak / 1024,
                self.bounds.memory / 1024
            ));
        }
        Ok(())
    }

    /// Where the input running now is kept under `LOOP_FUZZ_SAVE` (not read as corpus).
    fn pending(&self) -> PathBuf {
        self.corpus.join("running.pending")
    }

    fn corpus_inputs(&self) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
        let entries = match std::fs::read_dir(&self.corpus) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(format!("reading {}: {e}", self.corpus.display())),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "pending"))
            .collect();
        paths.sort();
        paths
            .into_iter()
            .map(|p| {
                std::fs::read(&p)
                    .map(|bytes| (p.clone(), bytes))
                    .map_err(|e| format!("reading {}: {e}", p.display()))
            })
            .collect()
    }

    /// The message for a failing generated input, which is saved into the corpus when
    /// `LOOP_FUZZ_SAVE` is set.
    fn failed(&self, error: TestError<Vec<u8>>, seed: u64, batch: u64) -> String {
        let (why, input) = match error {
            TestError::Fail(why, input) => (why.to_string(), input),
            TestError::Abort(why) => return format!("the generator gave up: {why}"),
        };
        let digest = hex::encode(&Sha256::digest(&input)[..8]);
        let saved = if std::env::var_os("LOOP_FUZZ_SAVE").is_some() {
            let path = self.corpus.join(format!("{digest}.bin"));
            match std::fs::create_dir_all(&self.corpus).and_then(|()| std::fs::write(&path, &input))
            {
                Ok(()) => format!("saved as {}", path.display()),
                Err(e) => format!("not saved: {e}"),
            }
        } else {
            "LOOP_FUZZ_SAVE=1 saves it into the corpus".to_string()
        };
        format!(
            "{why}\n  input: {} bytes, {}\n  found with LOOP_FUZZ_SEED={seed} (batch {batch}); {saved}",
            input.len(),
            preview(&input),
        )
    }
}

/// The CPU time this thread has used.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own; this clock exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The time for generated inputs: `LOOP_FUZZ_SECONDS`, 3 s when unset.
fn budget() -> Duration {
    std::env::var("LOOP_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(3), Duration::from_secs_f64)
}

/// `LOOP_FUZZ_SEED` to repeat a run, or one from the clock.
fn seed() -> u64 {
    std::env::var("LOOP_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        })
}

fn seed_bytes(seed: u64, batch: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&batch.to_le_bytes());
    bytes
}

/// The start of an input, as text where it is text.
fn preview(input: &[u8]) -> String {
    let head = &input[..input.len().min(240)];
    let more = if input.len() > head.len() { "…" } else { "" };
    match std::str::from_utf8(head) {
        Ok(text) => format!("starting {text:?}{more}"),
        Err(_) => format!("starting {}{more}", hex::encode(head)),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
