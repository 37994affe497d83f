//! The libtest-mimic harness: starts (or connects to) one cluster on the main thread's runtime,
//! runs every test in a fresh namespace with a timeout, and tears the cluster down before
//! exiting. On an existing cluster, tests marked [`E2eTest::local_only`] are ignored, on the
//! local control plane those marked [`E2eTest::cluster_only`], and the run says why for each.
//!
//! After the run it names the slowest tests (their own time, lock waits apart). A failed test
//! leaves `failures/<test>.txt` in the run's folder (kept then): its message, when it ran and
//! its namespace's Events. `LOOP_PLUGINS_E2E_REPEAT=N` runs each selected test N times side by
//! side, to make one that fails once in a while fail on demand.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};

use super::clock::Clock;
use super::target::Target;
use super::{Cluster, Ns};

type TestFuture = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;
type TestFn = Arc<dyn Fn(Ns) -> TestFuture + Send + Sync>;

/// Set to keep the run's folder (logs, volumes) even when every test passed.
const KEEP_ENV: &str = "LOOP_PLUGINS_E2E_KEEP";

/// Set to N to run each selected test N times side by side (`<name>#2` .. `<name>#N` beside
/// the test itself, each in its own namespace): to make a test that fails once in a while
/// fail here, under the load of its own copies.
const REPEAT_ENV: &str = "LOOP_PLUGINS_E2E_REPEAT";

/// How long a test may take unless it says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// One e2e test: a name and an async body that gets a fresh namespace (or, for a test of the
/// harness itself, a plain function that needs no cluster).
#[derive(Clone)]
pub struct E2eTest {
    name: String,
    timeout: Duration,
    body: Body,
    /// Why the test needs the local control plane, if it does.
    local_only: Option<&'static str>,
    /// Why the test needs a real cluster (kind), if it does.
    cluster_only: Option<&'static str>,
    /// Why the test cannot run on the chart rehearsal (`make e2e-existing`: the chart on the
    /// local control plane, whose kubelet stand-in runs every container as root).
    not_on_rehearsal: Option<&'static str>,
}

/// Where the suite runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The local control plane the suite starts.
    Local,
    /// An existing cluster whose Pods the kubelet stand-in runs (`make e2e-existing`).
    Rehearsal,
    /// An existing cluster with real containers (kind).
    Real,
}

#[derive(Clone)]
enum Body {
    InNamespace(TestFn),
    Plain(fn() -> anyhow::Result<()>),
}

impl E2eTest {
    /// A longer (or shorter) time limit than the default two minutes.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The test needs what only the local control plane has (`reason` says what); on an
    /// existing cluster it is ignored.
    pub fn local_only(mut self, reason: &'static str) -> Self {
        self.local_only = Some(reason);
        self
    }

    /// The test needs what only a real cluster has, such as a CNI that enforces
    /// NetworkPolicy (`reason` says what); on the local control plane it is ignored.
    pub fn cluster_only(mut self, reason: &'static str) -> Self {
        self.cluster_only = Some(reason);
        self
    }

    /// The test needs containers run as their runAsUser, which the chart rehearsal's stand-in
    /// does not do (`reason` says why it matters); there it is ignored.
    pub fn not_on_rehearsal(mut self, reason: &'static str) -> Self {
        self.not_on_rehearsal = Some(reason);
        self
    }

    /// Why the run ignores the test at `place`, if it does.
    fn ignored_because(&self, place: Place) -> Option<String> {
        match place {
            Place::Local => self
                .cluster_only
                .map(|r| format!("needs a real cluster: {r}")),
            Place::Rehearsal => self
                .local_only
                .map(|r| format!("is local-only: {r}"))
                .or(self
                    .cluster_only
                    .map(|r| format!("needs a real cluster: {r}")))
                .or(self
                    .not_on_rehearsal
                    .map(|r| format!("cannot run on the chart rehearsal: {r}"))),
            Place::Real => self.local_only.map(|r| format!("is local-only: {r}")),
        }
    }

    /// Whether the run ignores the test at `place`.
    fn ignored(&self, place: Place) -> bool {
        self.ignored_because(place).is_some()
    }
}

/// A test of the harness that needs no cluster (it runs even when the cluster cannot start).
pub fn plain(name: &str, body: fn() -> anyhow::Result<()>) -> E2eTest {
    E2eTest {
        name: name.to_string(),
        timeout: DEFAULT_TIMEOUT,
        body: Body::Plain(body),
        local_only: None,
        cluster_only: None,
        not_on_rehearsal: None,
    }
}

/// An e2e test named `name` (prefix it with its module: `pods::serves_http`).
pub fn test<F, Fut>(name: &str, body: F) -> E2eTest
where
    F: Fn(Ns) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    E2eTest {
        name: name.to_string(),
        timeout: DEFAULT_TIMEOUT,
        body: Body::InNamespace(Arc::new(move |ns| Box::pin(body(ns)))),
        local_only: None,
        cluster_only: None,
        not_on_rehearsal: None,
    }
}

/// Runs the tests against one cluster and returns libtest's exit code.
pub fn run(tests: Vec<E2eTest>) -> ExitCode {
    let mut args = Arguments::from_args();
    // The tests mostly wait on the cluster: run more of them at once than there are cores.
    if args.test_threads.is_none() {
        let threads = std::env::var("RUST_TEST_THREADS")
            .ok()
            .and_then(|t| t.parse().ok());
        args.test_threads = Some(threads.unwrap_or(8));
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,kube_client::client::builder=off")
            }),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("the tokio runtime starts");

    // Listing tests, or running only those that need no cluster, starts none.
    let listing = args.list;
    let place = match super::target::try_target() {
        Ok(Target::Existing(e)) if e.real_containers => Place::Real,
        Ok(Target::Existing(_)) => Place::Rehearsal,
        Ok(Target::Local) => Place::Local,
        Err(_) if listing => Place::Local,
        Err(e) => {
            eprintln!("e2e: {e}");
            return ExitCode::FAILURE;
        }
    };
    let existing = place != Place::Local;
    let needed = !listing && tests.iter().any(|t| wanted(&args, t, place));
    let started = Instant::now();
    let cluster: Result<Arc<Cluster>, String> = if needed {
        runtime
            .block_on(Cluster::start())
            .map(Arc::new)
            .map_err(|e| format!("{e:#}"))
    } else {
        Err("no test that needs a cluster is selected".into())
    };
    match &cluster {
        Ok(c) => eprintln!(
            "e2e: {} cluster up in {:.1}s at {} (run folder {})",
            if existing { "existing" } else { "local" },
            started.elapsed().as_secs_f64(),
            c.server(),
            c.run_dir().display()
        ),
        Err(reason) if needed => eprintln!("e2e: the cluster could not start: {reason}"),
        Err(_) => {}
    }
    if !listing {
        for t in &tests {
            if let Some(why) = t.ignored_because(place) {
                eprintln!("e2e: {} {why}", t.name);
            }
        }
    }

    let trials = repeated(tests)
        .into_iter()
        .map(|t| {
            let cluster = cluster.clone();
            let handle = runtime.handle().clone();
            let name = t.name.clone();
            let ignored = t.ignored(place);
            let trial = match t.body {
                Body::Plain(body) => Trial::test(t.name, move || {
                    body().map_err(|e| Failed::from(format!("{e:#}")))
                }),
                Body::InNamespace(body) => Trial::test(t.name, move || match cluster {
                    Err(reason) => Err(Failed::from(format!(
                        "the cluster could not start: {reason}"
                    ))),
                    Ok(cluster) => handle.block_on(run_one(cluster, &name, t.timeout, body)),
                }),
            };
            trial.with_ignored_flag(ignored)
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    let slowest = slowest_tests(SLOWEST);

    if let Ok(cluster) = cluster {
        let started = Instant::now();
        match Arc::try_unwrap(cluster) {
            Ok(mut cluster) => {
                if conclusion.has_failed() || std::env::var_os(KEEP_ENV).is_some() {
                    cluster.keep_run_dir();
                    eprintln!("e2e: logs kept in {}", cluster.run_dir().display());
                }
                runtime.block_on(cluster.shutdown());
            }
            Err(cluster) => drop(cluster),
        }
        eprint!("{slowest}");
        // libtest's summary stays the last line unless stopping was slow.
        if started.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "e2e: stopping the cluster took {:.1}s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    drop(runtime);
    conclusion.exit_code()
}

/// Whether the run will run `test` (by libtest's filters and ignore flags) and it needs the
/// cluster.
fn wanted(args: &Arguments, test: &E2eTest, place: Place) -> bool {
    if matches!(test.body, Body::Plain(_)) {
        return false;
    }
    let ignored = test.ignored(place);
    if (args.ignored && !ignored) || (ignored && !args.ignored && !args.include_ignored) {
        return false;
    }
    let matches = |filter: &str| {
        if args.exact {
            test.name == filter
        } else {
            test.name.contains(filter)
        }
    };
    let selected = args.filter.as_deref().is_none_or(matches);
    selected && !args.skip.iter().any(|s| matches(s))
}

/// The tests, each test in a namespace `$LOOP_PLUGINS_E2E_REPEAT` times (once without it).
fn repeated(tests: Vec<E2eTest>) -> Vec<E2eTest> {
    let times: usize = std::env::var(REPEAT_ENV)
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut all = Vec::with_capacity(tests.len() * times);
    for test in tests {
        if matches!(test.body, Body::InNamespace(_)) {
            for copy in 2..=times {
                let mut again = test.clone();
                again.name = format!("{}#{copy}", test.name);
                all.push(again);
            }
        }
        all.push(test);
    }
    all
}

/// How long one test ran, and how much of that it waited for the suite's locks.
struct TestTime {
    name: String,
    took: Duration,
    waited: Duration,
}

/// Every test run so far, as it ended.
static TIMES: std::sync::Mutex<Vec<TestTime>> = std::sync::Mutex::new(Vec::new());

/// How many of the slowest tests the run names at its end.
const SLOWEST: usize = 12;

/// The `n` tests that took longest of their own (lock waits left out), a line each: where
/// the suite's time goes, for whoever makes it shorter.
fn slowest_tests(n: usize) -> String {
    let mut times = std::mem::take(&mut *TIMES.lock().expect("the times' lock"));
    if times.is_empty() {
        return String::new();
    }
    let own = |t: &TestTime| t.took.saturating_sub(t.waited);
    times.sort_by_key(|t| std::cmp::Reverse(own(t)));
    let mut text = format!(
        "e2e: the {} slowest tests of their own (and their lock waits):\n",
        n.min(times.len())
    );
    for t in times.iter().take(n) {
        text.push_str(&format!(
            "    {:>6.1}s  (+{:.1}s)  {}\n",
            own(t).as_secs_f64(),
            t.waited.as_secs_f64(),
            t.name
        ));
    }
    text
}

async fn run_one(
    cluster: Arc<Cluster>,
    name: &str,
    timeout: Duration,
    body: TestFn,
) -> Result<(), Failed> {
    let ns = Ns::create(cluster, name)
        .await
        .map_err(|e| Failed::from(format!("creating the namespace: {e:#}")))?;
    let namespace = ns.name().to_string();
    let started = jiff::Timestamp::now();
    let clock = Clock::default();
    let began = Instant::now();
    let outcome = clock.limit(timeout, body(ns.clone())).await;
    TIMES.lock().expect("the times' lock").push(TestTime {
        name: name.to_string(),
        took: began.elapsed(),
        waited: clock.waited(),
    });
    let message = match outcome {
        Ok(Ok(())) => {
            ns.delete().await;
            return Ok(());
        }
        Ok(Err(e)) => format!("{e:#}\n(namespace {namespace} kept)"),
        Err(waited) => format!(
            "timed out after {timeout:?} of its own (and {:.0?} waiting for other tests' locks; namespace {namespace} kept)",
            waited
        ),
    };
    record_failure(&ns, name, started, &message).await;
    Err(Failed::from(message))
}

/// Writes what a failed test said, when it ran and the Events of its namespace to
/// `failures/<test>.txt` in the run's folder (kept after a failure): CI shows only the end of
/// the output, and the cluster with its Events is gone by the time anyone looks.
async fn record_failure(ns: &Ns, name: &str, started: jiff::Timestamp, message: &str) {
    use k8s_openapi::api::core::v1::Event;
    use std::fmt::Write as _;

    let mut text = format!(
        "test: {name}\nnamespace: {}\nran: {started} .. {}\n\n{message}\n\nEvents of the namespace:\n",
        ns.name(),
        jiff::Timestamp::now()
    );
    match ns.api::<Event>().list(&Default::default()).await {
        Ok(list) => {
            let mut events = list.items;
            events.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
            for e in events {
                let object = &e.involved_object;
                let _ = writeln!(
                    text,
                    "{} {} {} {}/{}: {} (x{})",
                    e.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0.to_string())
                        .unwrap_or_default(),
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    object.kind.clone().unwrap_or_default(),
                    object.name.clone().unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    e.count.unwrap_or(1),
                );
            }
        }
        Err(e) => {
            let _ = writeln!(text, "(could not list them: {e})");
        }
    }
    let dir = ns.cluster().run_dir().join("failures");
    let file: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = dir.join(format!("{file}.txt"));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
        eprintln!("e2e: could not write {}: {e}", path.display());
    }
}
