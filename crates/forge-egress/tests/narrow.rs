//! A task's narrowed policy at both enforcement points, for real on loopback: the proxy serving a
//! listener the caller bound (`EgressProxy::serve_on`) refuses the agent-allowed host outside the
//! scope with 403 `blocked-host` and never dials it, while the agent's own proxy still reaches
//! it; the client on the narrowed policy (`EgressClient::with_policy`) refuses it too, telling
//! both its own observer and the task's, and the agent's client is unchanged.

mod common;

use std::sync::Arc;

use common::*;
use forge_egress::client::{ClientOptions, EgressClient};
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, Outcome, ProxyOptions, REASON_HEADER};
use forge_egress::EgressRefusal as Refusal;

#[tokio::test]
async fn a_narrowed_listener_and_client_refuse_what_the_scope_leaves_out() {
    let a = http_upstream().await;
    let b = http_upstream().await;
    let (ea, eb) = (
        format!("127.0.0.1:{}", a.port()),
        format!("127.0.0.1:{}", b.port()),
    );
    let agent = Arc::new(EgressPolicy::allowlist([ea.as_str(), eb.as_str()]).unwrap());
    let task = Arc::new(agent.narrow(&[ea.as_str()], "allowed_hosts").unwrap());

    // The task's own listener, bound by the caller.
    let dialer = LoopbackDialer::default();
    let seen = Arc::new(Collect::default());
    let opts = ProxyOptions {
        observer: Some(seen.clone()),
        dialer: Arc::new(dialer.clone()),
        ..Default::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bound = listener.local_addr().unwrap();
    let (addr, handle) = EgressProxy::serve_on(listener, task.clone(), opts.clone()).unwrap();
    assert_eq!(addr, bound, "serves the listener it was given");
    let ok = get_via(addr, &format!("http://{ea}/x"), &ea).await;
    assert_eq!(ok.status, 200, "{ok:?}");
    let refused = get_via(addr, &format!("http://{eb}/x"), &eb).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(
        refused.header(REASON_HEADER).as_deref(),
        Some("blocked-host")
    );
    assert!(
        refused.body.contains("outside this task's allowed hosts"),
        "{}",
        refused.body
    );
    assert!(
        !dialer.dialed().contains(&b),
        "the out-of-scope host is never dialed"
    );
    let decisions = seen.wait_for(2).await;
    assert!(decisions
        .iter()
        .any(|d| d.outcome == Outcome::Blocked && d.port == b.port()));
    handle.shutdown().await;

    // The agent's proxy (same options, agent policy) still reaches B.
    let (agent_addr, agent_handle) = EgressProxy::serve(agent.clone(), opts).await.unwrap();
    assert_eq!(
        get_via(agent_addr, &format!("http://{eb}/x"), &eb)
            .await
            .status,
        200
    );
    agent_handle.shutdown().await;

    // The client: the agent's, and the task's view of it on the narrowed policy.
    let own = Arc::new(Collect::default());
    let agent_client = EgressClient::new(
        agent.clone(),
        ClientOptions {
            dialer: Arc::new(LoopbackDialer::default()),
            observer: Some(own.clone()),
            ..Default::default()
        },
    );
    let task_seen = Arc::new(Collect::default());
    let task_client = agent_client.with_policy(task.clone(), Some(task_seen.clone()));
    let err = task_client
        .get(&format!("http://{eb}/x"))
        .await
        .expect_err("out of scope");
    assert!(
        matches!(err.refusal(), Some(Refusal::OutOfScope { .. })),
        "{err}"
    );
    assert_eq!(task_seen.all().len(), 1, "the task's observer heard it");
    assert_eq!(
        own.all().len(),
        1,
        "the client's own observer (audit) heard it too"
    );
    assert_eq!(
        task_client
            .get(&format!("http://{ea}/x"))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        agent_client
            .get(&format!("http://{eb}/x"))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(task_client.policy().scope(), Some(vec![ea.clone()]));
    assert_eq!(agent_client.policy().scope(), None);
}
