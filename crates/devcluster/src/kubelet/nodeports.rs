//! A minimal kube-proxy for node ports: each port of a NodePort or LoadBalancer Service that
//! has a nodePort is a listener on 127.0.0.1:<nodePort>, and each TCP connection it accepts is
//! forwarded to one of the Service's ready Pods, round robin.
//!
//! This is what kind gives a NodePort Service through kind-config.yaml's extraPortMappings
//! (node port 30080 is the host's 127.0.0.1:30080), so such a Service has the same URL on both.
//! The URL names the Service, not a Pod: a Pod replaced by a restart is reached at it again as
//! soon as the new Pod is Ready.
//!
//! The endpoints come from the Pods, not from EndpointSlices. kube-controller-manager runs its
//! endpointslice controller (`--controllers=*`), but the API server refuses loopback addresses
//! in an EndpointSlice ("may not be in the loopback range"), and every Pod here has one, so the
//! slices it makes stay empty. This module does what that controller would have written: the
//! Pods in the Service's namespace that its selector matches, with an address, Ready and not
//! terminating (any not finished, with publishNotReadyAddresses), at the Service port's
//! targetPort resolved in each Pod (a number, or the name of one of its containers' ports;
//! unset, the Service port's own number). A Service without a selector has no endpoints here.
//!
//! A connection that arrives while no endpoint is ready, or while none accepts, waits up to
//! [`WAIT_FOR_ENDPOINT`] for one and is then closed: while a Deployment's only Pod is replaced
//! there is a gap of a second or two, and a client that connects in it gets through instead of
//! failing (a client retrying at once would only land in the same gap). TCP only; no cluster
//! IPs, session affinity or traffic policies. A listener closes when its Service or port goes
//! away or changes; connections already forwarded live on, as under kube-proxy, until the
//! stand-in stops. A node port that cannot be bound (another program holds it) is warned about,
//! not fatal, and tried again now and then.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a connection waits for a ready endpoint that accepts it before it is closed.
pub const WAIT_FOR_ENDPOINT: Duration = Duration::from_secs(2);

/// How often a waiting connection tries the endpoints again when they have not changed.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How often node ports that could not be bound are tried again.
const RETRY_BLOCKED: Duration = Duration::from_secs(5);

/// One port of one Service, as a node port serves it. A listener lives as long as this stays
/// the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frontend {
    pub namespace: String,
    pub service: String,
    /// The Service's uid: one deleted and made again is another frontend.
    pub uid: String,
    /// The Service port's name, "" when it has none (a Service's only port may have none).
    pub port_name: String,
    /// The Service port's number.
    pub port: i32,
}

impl fmt::Display for Frontend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} port ", self.namespace, self.service)?;
        if self.port_name.is_empty() {
            write!(f, "{}", self.port)
        } else {
            write!(f, "{} ({})", self.port_name, self.port)
        }
    }
}

/// What a node port forwards to: a Service port, and how to find its endpoints.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePort {
    pub frontend: Frontend,
    /// The Service's selector; empty: no endpoints.
    pub selector: BTreeMap<String, String>,
    /// The Service port's targetPort, its own number when unset.
    pub target_port: IntOrString,
    /// The Service's publishNotReadyAddresses: every Pod with an address is an endpoint.
    pub publish_not_ready: bool,
}

/// The node ports the Services ask for, by port: each TCP port with a nodePort of each
/// NodePort or LoadBalancer Service. (The API server keeps node ports unique; should two
/// Services claim one while a change settles, the first seen keeps it.)
pub fn node_ports(services: &[impl Borrow<Service>]) -> BTreeMap<u16, NodePort> {
    let mut wanted = BTreeMap::new();
    for service in services {
        let service = service.borrow();
        let Some(spec) = &service.spec else { continue };
        if !matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer")) {
            continue;
        }
        for port in spec.ports.iter().flatten() {
            if port.protocol.as_deref().unwrap_or("TCP") != "TCP" {
                continue;
            }
            let Some(node_port) = port
                .node_port
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0)
            else {
                continue;
            };
            let frontend = Frontend {
                namespace: service.namespace().unwrap_or_default(),
                service: service.name_any(),
                uid: service.uid().unwrap_or_default(),
                port_name: port.name.clone().unwrap_or_default(),
                port: port.port,
            };
            wanted.entry(node_port).or_insert_with(|| NodePort {
                frontend,
                selector: spec.selector.clone().unwrap_or_default(),
                target_port: port
                    .target_port
                    .clone()
                    .unwrap_or(IntOrString::Int(port.port)),
                publish_not_ready: spec.publish_not_ready_addresses.unwrap_or(false),
            });
        }
    }
    wanted
}

/// The ready endpoints of a node port's Service among `pods`, sorted, each once.
pub fn endpoints(node_port: &NodePort, pods: &[impl Borrow<Pod>]) -> Vec<SocketAddr> {
    if node_port.selector.is_empty() {
        return Vec::new();
    }
    let mut found: Vec<SocketAddr> = pods
        .iter()
        .map(Borrow::borrow)
        .filter(|pod| pod.metadata.namespace.as_deref() == Some(&node_port.frontend.namespace))
        .filter(|pod| {
            let labels = pod.labels();
            node_port
                .selector
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
        })
        .filter(|pod| is_ready_endpoint(pod, node_port.publish_not_ready))
        .filter_map(|pod| {
            let ip: IpAddr = pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()?;
            let port = target_port(pod, &node_port.target_port)?;
            Some(SocketAddr::new(ip, port))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Whether the endpointslice controller would mark the Pod's endpoint ready: a Pod not
/// finished, Ready and not terminating, or any such Pod with publishNotReadyAddresses.
fn is_ready_endpoint(pod: &Pod, publish_not_ready: bool) -> bool {
    let status = pod.status.as_ref();
    if matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    if publish_not_ready {
        return true;
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready && pod.metadata.deletion_timestamp.is_none()
}

/// The targetPort in this Pod: a number as it is, a name as the number of the container port
/// of that name (TCP); None when the Pod has no such port.
fn target_port(pod: &Pod, target: &IntOrString) -> Option<u16> {
    match target {
        IntOrString::Int(n) => u16::try_from(*n).ok().filter(|n| *n != 0),
        IntOrString::String(name) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| {
                p.name.as_deref() == Some(name.as_str())
                    && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
            })
            .and_then(|p| u16::try_from(p.container_port).ok()),
    }
}

/// The endpoints in the order a connection tries them: from the one whose turn it is, round.
fn in_turn(endpoints: &[SocketAddr], turn: usize) -> impl Iterator<Item = SocketAddr> + '_ {
    let n = endpoints.len();
    (0..n).map(move |i| endpoints[(turn % n + i) % n])
}

/// Serves the node ports of the cluster's Services, for as long as the task runs. Dropping the
/// task closes its listeners and ends the connections they forwarded.
pub async fn run(client: Client) {
    let (services, services_writer) = reflector::store::<Service>();
    let (pods, pods_writer) = reflector::store::<Pod>();
    let config = watcher::Config::default();
    let mut service_events = reflector(
        services_writer,
        watcher(Api::<Service>::all(client.clone()), config.clone()),
    )
    .default_backoff()
    .boxed();
    let mut pod_events = reflector(pods_writer, watcher(Api::<Pod>::all(client), config))
        .default_backoff()
        .boxed();
    let mut proxy = Proxy::default();
    let mut retry = tokio::time::interval(RETRY_BLOCKED);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let sync = tokio::select! {
            event = service_events.next() => match event {
                Some(event) => settled(event, "services"),
                None => break,
            },
            event = pod_events.next() => match event {
                Some(event) => settled(event, "pods"),
                None => break,
            },
            _ = retry.tick() => !proxy.blocked.is_empty(),
        };
        if sync {
            let wanted = node_ports(&services.state());
            proxy.sync(wanted, &pods.state()).await;
        }
    }
}

/// Whether the store changed with this event (a relist counts once it is done).
fn settled<K>(event: Result<watcher::Event<K>, watcher::Error>, what: &str) -> bool {
    match event {
        Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => true,
        Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => false,
        Err(e) => {
            tracing::warn!(error = %e, "watching {what} for node ports");
            false
        }
    }
}

/// The node ports being served, and those another program holds.
struct Proxy {
    listening: BTreeMap<u16, Listening>,
    /// Node ports that could not be bound, with the frontend each was warned about for.
    blocked: BTreeMap<u16, Frontend>,
    /// Never sent on: dropping it (with the proxy) ends every forwarded connection.
    stop: watch::Sender<()>,
}

impl Default for Proxy {
    fn default() -> Self {
        Self {
            listening: BTreeMap::new(),
            blocked: BTreeMap::new(),
            stop: watch::channel(()).0,
        }
    }
}

/// One listener, the endpoints it forwards to, and its task (aborted when dropped).
struct Listening {
    frontend: Frontend,
    endpoints: watch::Sender<Vec<SocketAddr>>,
    task: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Makes the listeners those `wanted`, and gives each the endpoints `pods` have for it.
    async fn sync(&mut self, wanted: BTreeMap<u16, NodePort>, pods: &[impl Borrow<Pod>]) {
        let stale: Vec<u16> = self
            .listening
            .iter()
            .filter(|(port, l)| wanted.get(port).is_none_or(|w| w.frontend != l.frontend))
            .map(|(port, _)| *port)
            .collect();
        for port in stale {
            if let Some(mut listening) = self.listening.remove(&port) {
                listening.task.abort();
                // Once the task is gone so is its socket, and the port can be bound again.
                let _ = (&mut listening.task).await;
                tracing::info!(
                    service = %listening.frontend,
                    node_port = port,
                    "closed the node port"
                );
            }
        }
        self.blocked
            .retain(|port, frontend| wanted.get(port).is_some_and(|w| w.frontend == *frontend));

        for (port, node_port) in wanted {
            let found = endpoints(&node_port, pods);
            if let Some(listening) = self.listening.get(&port) {
                listening.endpoints.send_if_modified(|current| {
                    let changed = *current != found;
                    if changed {
                        tracing::debug!(
                            service = %listening.frontend,
                            node_port = port,
                            endpoints = ?found,
                            "endpoints"
                        );
                        *current = found;
                    }
                    changed
                });
                continue;
            }
            match TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
                Ok(listener) => {
                    let frontend = node_port.frontend;
                    if self.blocked.remove(&port).is_some() {
                        tracing::info!(
                            service = %frontend,
                            node_port = port,
                            "the node port is free now"
                        );
                    }
                    tracing::info!(
                        service = %frontend,
                        node_port = port,
                        endpoints = ?found,
                        "listening on 127.0.0.1:{port}"
                    );
                    let (endpoints, receiver) = watch::channel(found);
                    let task = tokio::spawn(serve(
                        listener,
                        Arc::from(frontend.to_string()),
                        receiver,
                        self.stop.subscribe(),
                    ));
                    self.listening.insert(
                        port,
                        Listening {
                            frontend,
                            endpoints,
                            task,
                        },
                    );
                }
                Err(e) => {
                    if self.blocked.get(&port) != Some(&node_port.frontend) {
                        tracing::warn!(
                            service = %node_port.frontend,
                            node_port = port,
                            error = %e,
                            "cannot listen on 127.0.0.1:{port}: the Service is not reachable at \
                             its node port here (trying again every {}s)",
                            RETRY_BLOCKED.as_secs(),
                        );
                        self.blocked.insert(port, node_port.frontend);
                    }
                }
            }
        }
    }
}

/// Accepts connections and forwards each on a task of its own.
async fn serve(
    listener: TcpListener,
    frontend: Arc<str>,
    endpoints: watch::Receiver<Vec<SocketAddr>>,
    stop: watch::Receiver<()>,
) {
    let turn = Arc::new(AtomicUsize::new(0));
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                tokio::spawn(forward(
                    client,
                    frontend.clone(),
                    endpoints.clone(),
                    turn.clone(),
                    stop.clone(),
                ));
            }
            Err(e) => {
                // Out of file descriptors, say: the listener itself is fine.
                tracing::warn!(service = %frontend, error = %e, "accepting a connection");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Copies between the client and an endpoint until either closes, or the proxy stops.
async fn forward(
    mut client: TcpStream,
    frontend: Arc<str>,
    mut endpoints: watch::Receiver<Vec<SocketAddr>>,
    turn: Arc<AtomicUsize>,
    mut stop: watch::Receiver<()>,
) {
    let upstream = tokio::select! {
        upstream = connect(&mut endpoints, &turn) => upstream,
        _ = stop.changed() => return,
    };
    let Some(mut upstream) = upstream else {
        tracing::info!(
            service = %frontend,
            "no ready endpoint took the connection within {}s: closing it",
            WAIT_FOR_ENDPOINT.as_secs(),
        );
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    tokio::select! {
        copied = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
            if let Err(e) = copied {
                tracing::debug!(service = %frontend, error = %e, "forwarding a connection");
            }
        }
        _ = stop.changed() => {}
    }
}

/// A connection to a ready endpoint, trying them from the one whose turn it is. When none is
/// ready or none accepts, tries again as the endpoints change (or after a short pause) until
/// [`WAIT_FOR_ENDPOINT`] has passed; None then, or once the listener is gone.
async fn connect(
    endpoints: &mut watch::Receiver<Vec<SocketAddr>>,
    turn: &AtomicUsize,
) -> Option<TcpStream> {
    let deadline = Instant::now() + WAIT_FOR_ENDPOINT;
    loop {
        let ready = endpoints.borrow_and_update().clone();
        for addr in in_turn(&ready, turn.fetch_add(1, Ordering::Relaxed)) {
            match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Some(stream),
                // Its process is gone or not listening yet; the endpoints lag a little.
                Ok(Err(e)) => tracing::debug!(%addr, error = %e, "an endpoint refused"),
                Err(_) => return None,
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        let pause = (now + RETRY_PAUSE).min(deadline);
        if let Ok(Err(_)) = tokio::time::timeout_at(pause, endpoints.changed()).await {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodSpec, PodStatus, ServicePort, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn service(name: &str, type_: &str, ports: Vec<ServicePort>) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(type_.into()),
                selector: Some([("app".to_string(), name.to_string())].into()),
                ports: Some(ports),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn port(
        name: Option<&str>,
        port: i32,
        target: Option<IntOrString>,
        node: Option<i32>,
    ) -> ServicePort {
        ServicePort {
            name: name.map(Into::into),
            port,
            target_port: target,
            node_port: node,
            ..Default::default()
        }
    }

    /// A Running Pod of app `app` at `ip`, Ready or not, with container ports (name, number).
    fn pod(name: &str, app: &str, ip: &str, ready: bool, ports: &[(&str, i32)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    ports: Some(
                        ports
                            .iter()
                            .map(|(name, number)| ContainerPort {
                                name: Some(name.to_string()),
                                container_port: *number,
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(ip.into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn node_ports_of_nodeport_and_loadbalancer_services_only() {
        let services = [
            service(
                "api",
                "NodePort",
                vec![
                    port(
                        Some("http"),
                        8080,
                        Some(IntOrString::String("http".into())),
                        Some(30080),
                    ),
                    // Not allocated (yet): nothing to listen on.
                    port(Some("metrics"), 9090, None, None),
                    ServicePort {
                        protocol: Some("UDP".into()),
                        ..port(Some("dns"), 53, None, Some(30053))
                    },
                ],
            ),
            service(
                "lb",
                "LoadBalancer",
                vec![port(None, 80, None, Some(30081))],
            ),
            // Kubernetes refuses this, but a ClusterIP Service never gets a node port here.
            service(
                "internal",
                "ClusterIP",
                vec![port(None, 80, None, Some(30082))],
            ),
        ];
        let wanted = node_ports(&services);
        assert_eq!(wanted.keys().copied().collect::<Vec<_>>(), [30080, 30081]);

        let api = &wanted[&30080];
        assert_eq!(
            api.frontend,
            Frontend {
                namespace: "ns".into(),
                service: "api".into(),
                uid: "uid-api".into(),
                port_name: "http".into(),
                port: 8080,
            }
        );
        assert_eq!(api.frontend.to_string(), "ns/api port http (8080)");
        assert_eq!(api.target_port, IntOrString::String("http".into()));
        assert_eq!(
            api.selector,
            [("app".to_string(), "api".to_string())].into()
        );

        // An unset targetPort is the Service port's own number.
        let lb = &wanted[&30081];
        assert_eq!(lb.target_port, IntOrString::Int(80));
        assert_eq!(lb.frontend.to_string(), "ns/lb port 80");
    }

    #[test]
    fn a_changed_service_is_another_frontend() {
        let before = node_ports(&[service(
            "api",
            "NodePort",
            vec![port(None, 80, None, Some(30080))],
        )]);
        let mut recreated = service("api", "NodePort", vec![port(None, 80, None, Some(30080))]);
        recreated.metadata.uid = Some("another".into());
        let renamed = service(
            "api",
            "NodePort",
            vec![port(Some("web"), 80, None, Some(30080))],
        );
        assert_ne!(
            before[&30080].frontend,
            node_ports(&[recreated])[&30080].frontend
        );
        assert_ne!(
            before[&30080].frontend,
            node_ports(&[renamed])[&30080].frontend
        );
    }

    #[test]
    fn endpoints_are_the_ready_pods_the_selector_matches() {
        let wanted = node_ports(&[service(
            "api",
            "NodePort",
            vec![port(None, 80, Some(IntOrString::Int(8080)), Some(30080))],
        )]);
        let api = &wanted[&30080];
        let mut deleting = pod("deleting", "api", "127.9.0.3", true, &[]);
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let mut finished = pod("finished", "api", "127.9.0.4", true, &[]);
        finished.status.as_mut().unwrap().phase = Some("Succeeded".into());
        let mut elsewhere = pod("elsewhere", "api", "127.9.0.5", true, &[]);
        elsewhere.metadata.namespace = Some("other".into());
        let mut unaddressed = pod("unaddressed", "api", "", true, &[]);
        unaddressed.status.as_mut().unwrap().pod_ip = None;
        let mut no_conditions = pod("starting", "api", "127.9.0.6", true, &[]);
        no_conditions.status.as_mut().unwrap().conditions = None;
        let pods = [
            pod("b", "api", "127.9.0.2", true, &[]),
            pod("a", "api", "127.9.0.1", true, &[]),
            pod("unready", "api", "127.9.0.7", false, &[]),
            pod("other-app", "web", "127.9.0.8", true, &[]),
            deleting,
            finished,
            elsewhere,
            unaddressed,
            no_conditions,
        ];
        assert_eq!(
            endpoints(api, &pods),
            [addr("127.9.0.1:8080"), addr("127.9.0.2:8080")]
        );

        // publishNotReadyAddresses: every Pod with an address that has not finished.
        let mut publish = api.clone();
        publish.publish_not_ready = true;
        assert_eq!(
            endpoints(&publish, &pods),
            [
                "127.9.0.1",
                "127.9.0.2",
                "127.9.0.3",
                "127.9.0.6",
                "127.9.0.7"
            ]
            .map(|ip| addr(&format!("{ip}:8080")))
        );

        // No selector: endpoints are not ours to find.
        let mut selectorless = api.clone();
        selectorless.selector.clear();
        assert!(endpoints(&selectorless, &pods).is_empty());
    }

    #[test]
    fn a_named_target_port_is_resolved_in_each_pod() {
        let wanted = node_ports(&[service(
            "api",
            "NodePort",
            vec![
                port(
                    Some("http"),
                    80,
                    Some(IntOrString::String("http".into())),
                    Some(30080),
                ),
                port(Some("metrics"), 9090, None, Some(30090)),
            ],
        )]);
        let pods = [
            // The same port name, another number in each Pod (as in a rollout that moves it).
            pod(
                "old",
                "api",
                "127.9.0.1",
                true,
                &[("http", 8080), ("metrics", 9100)],
            ),
            pod(
                "new",
                "api",
                "127.9.0.2",
                true,
                &[("metrics", 9100), ("http", 8081)],
            ),
            // No port of that name: not an endpoint of the named port.
            pod("bare", "api", "127.9.0.3", true, &[]),
        ];
        assert_eq!(
            endpoints(&wanted[&30080], &pods),
            [addr("127.9.0.1:8080"), addr("127.9.0.2:8081")]
        );
        // A numbered (here unset, so the Service port's) target port needs no container port.
        assert_eq!(
            endpoints(&wanted[&30090], &pods),
            ["127.9.0.1", "127.9.0.2", "127.9.0.3"].map(|ip| addr(&format!("{ip}:9090")))
        );
    }

    #[test]
    fn endpoints_are_taken_in_turn() {
        let all = [
            addr("127.9.0.1:1"),
            addr("127.9.0.2:1"),
            addr("127.9.0.3:1"),
        ];
        let order = |turn| in_turn(&all, turn).collect::<Vec<_>>();
        assert_eq!(order(0), all);
        assert_eq!(order(1), [all[1], all[2], all[0]]);
        assert_eq!(order(5), [all[2], all[0], all[1]]);
        assert_eq!(order(usize::MAX).len(), 3);
        assert_eq!(in_turn(&[], 7).count(), 0);
    }

    /// A port nothing listens on now (the kernel's pick, given back).
    fn free_port() -> u16 {
        std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A backend that answers every connection with `name` and closes it.
    async fn backend(name: &'static str) -> (SocketAddr, JoinHandle<()>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let _ = conn.write_all(name.as_bytes()).await;
            }
        });
        (addr, task)
    }

    /// What the node port answers, or None when it closes the connection without a word.
    async fn ask(node_port: u16) -> Option<String> {
        let mut conn = TcpStream::connect((Ipv4Addr::LOCALHOST, node_port))
            .await
            .ok()?;
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.ok()?;
        Some(answer).filter(|a| !a.is_empty())
    }

    /// A node port for Service `api` (its uid `uid`), whose target port is named `http`.
    fn wanted(node_port: u16, uid: &str) -> BTreeMap<u16, NodePort> {
        let mut svc = service(
            "api",
            "NodePort",
            vec![port(
                None,
                80,
                Some(IntOrString::String("http".into())),
                Some(i32::from(node_port)),
            )],
        );
        svc.metadata.uid = Some(uid.into());
        node_ports(&[svc])
    }

    /// A Ready Pod of Service `api` playing `backend`: every backend listens on 127.0.0.1, at
    /// its own port, which the Pod names `http`.
    fn pod_at(name: &str, backend: SocketAddr) -> Pod {
        let ip = backend.ip().to_string();
        pod(
            name,
            "api",
            &ip,
            true,
            &[("http", i32::from(backend.port()))],
        )
    }

    #[tokio::test]
    async fn a_node_port_forwards_to_the_ready_endpoints_and_follows_them() {
        let node_port = free_port();
        let (first, _a) = backend("first").await;
        let (second, _b) = backend("second").await;
        let mut proxy = Proxy::default();

        let wanted = wanted(node_port, "u1");
        proxy.sync(wanted.clone(), &[pod_at("old", first)]).await;
        assert_eq!(ask(node_port).await.as_deref(), Some("first"));

        // The Pod replaced: the same node port reaches the new one.
        let pods = [pod_at("new", second)];
        proxy.sync(wanted.clone(), &pods).await;
        assert_eq!(ask(node_port).await.as_deref(), Some("second"));

        // No ready endpoint: a connection waits for one, and gets the one that comes.
        proxy.sync(wanted.clone(), &[] as &[Pod]).await;
        let waiting = tokio::spawn(ask(node_port));
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.sync(wanted.clone(), &pods).await;
        assert_eq!(waiting.await.unwrap().as_deref(), Some("second"));

        // None comes: the connection is closed after a while.
        proxy.sync(wanted.clone(), &[] as &[Pod]).await;
        let started = Instant::now();
        assert_eq!(ask(node_port).await, None);
        assert!(started.elapsed() >= WAIT_FOR_ENDPOINT - Duration::from_millis(50));

        // The Service made again under the same port: a new listener, bound at once.
        let pods = [pod_at("again", first)];
        proxy.sync(self::wanted(node_port, "u2"), &pods).await;
        assert_eq!(ask(node_port).await.as_deref(), Some("first"));

        // The Service gone: the port closes.
        proxy.sync(BTreeMap::new(), &pods).await;
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, node_port))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_taken_node_port_is_not_fatal_and_is_bound_once_free() {
        let taken = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let node_port = taken.local_addr().unwrap().port();
        let (backend, _task) = backend("api").await;
        let wanted = wanted(node_port, "u1");
        let pods = [pod_at("p", backend)];
        let mut proxy = Proxy::default();

        proxy.sync(wanted.clone(), &pods).await;
        assert!(proxy.listening.is_empty());
        assert!(proxy.blocked.contains_key(&node_port));

        drop(taken);
        proxy.sync(wanted, &pods).await;
        assert!(proxy.blocked.is_empty());
        assert_eq!(ask(node_port).await.as_deref(), Some("api"));
    }

    #[tokio::test]
    async fn round_robin_over_the_ready_endpoints() {
        let node_port = free_port();
        let (a, _a) = backend("a").await;
        let (b, _b) = backend("b").await;
        let pods = [pod_at("a", a), pod_at("b", b)];
        let mut proxy = Proxy::default();
        proxy.sync(wanted(node_port, "u1"), &pods).await;
        let mut answers = Vec::new();
        for _ in 0..4 {
            answers.push(ask(node_port).await.unwrap());
        }
        assert_ne!(answers[0], answers[1], "{answers:?}");
        assert_eq!(answers[..2], answers[2..], "{answers:?}");
    }
}
