//! The OpenAI and Anthropic providers against fake vendor servers on loopback, through the real
//! egress client: request shapes, two-step tool calling, 429-then-success retry, 401 and unknown
//! model errors, retry bound, timeout, cancellation, and the egress policy refusing an unlisted host.

use forge_testkit::llm as fake_llm;

use std::sync::Arc;
use std::time::Duration;

use fake_llm::{Reply, Responder};
use forge_egress::client::{ClientOptions, EgressClient};
use forge_egress::EgressPolicy;
use forge_llm::anthropic::Anthropic;
use forge_llm::openai::OpenAi;
use forge_llm::transport::EgressTransport;
use forge_llm::{
    ChatRequest, Message, ModelHttp, Provider, ProviderError, RetryPolicy, ToolResult, ToolSpec,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn transport_for(entries: &[String]) -> Arc<dyn ModelHttp> {
    let policy = Arc::new(
        EgressPolicy::allowlist(entries.iter().map(String::as_str)).expect("valid entries"),
    );
    Arc::new(EgressTransport::new(Arc::new(EgressClient::new(
        policy,
        ClientOptions::default(),
    ))))
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        request_timeout: Duration::from_secs(20),
    }
}

fn calc_tool() -> ToolSpec {
    ToolSpec {
        name: "math_calculate".into(),
        description: "Evaluate an arithmetic expression".into(),
        input_schema: json!({"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}),
    }
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        system: "You are a test agent.".into(),
        messages,
        tools: vec![calc_tool()],
    }
}

fn openai(fake: &fake_llm::FakeLlm, key: Option<&str>) -> OpenAi {
    OpenAi::new(
        "openai",
        "gpt-test",
        url::Url::parse(&format!("{}/v1", fake.base())).unwrap(),
        key.map(str::to_string),
        "OPENAI_API_KEY",
        transport_for(&[fake.addr.to_string()]),
        fast_retry(),
    )
}

fn anthropic(fake: &fake_llm::FakeLlm, key: Option<&str>) -> Anthropic {
    Anthropic::new(
        "claude-test",
        url::Url::parse(&fake.base()).unwrap(),
        key.map(str::to_string),
        transport_for(&[fake.addr.to_string()]),
        fast_retry(),
    )
}

#[tokio::test]
async fn openai_two_step_tool_calling_round_trips_the_tool_result() {
    let respond: Responder = Arc::new(|i, req| match i {
        0 => Reply::Json(
            200,
            vec![],
            fake_llm::openai_tool_calls(&[(
                "call_a",
                "math_calculate",
                json!({"expression": "6*7"}),
            )]),
        ),
        _ => {
            let result = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
            Reply::Json(
                200,
                vec![],
                fake_llm::openai_text(&format!("The tool said {result}")),
            )
        }
    });
    let fake = fake_llm::start(respond).await;
    let p = openai(&fake, Some("sk-test-openai"));
    let cancel = CancellationToken::new();

    let first = p
        .chat(
            &request(vec![Message::User("what is 6*7?".into())]),
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(first.tool_calls[0].id, "call_a");
    assert_eq!(first.tool_calls[0].name, "math_calculate");
    assert_eq!(first.tool_calls[0].arguments, json!({"expression": "6*7"}));
    assert_eq!(first.usage.input_tokens, 11);
    assert_eq!(first.attempts, 1);

    let r0 = fake.request(0);
    assert_eq!(r0.method, "POST");
    assert_eq!(r0.path, "/v1/chat/completions");
    assert_eq!(r0.header("authorization"), Some("Bearer sk-test-openai"));
    assert_eq!(r0.body["model"], "gpt-test");
    assert_eq!(r0.body["messages"][0]["role"], "system");
    assert_eq!(r0.body["messages"][1]["content"], "what is 6*7?");
    assert_eq!(r0.body["tools"][0]["type"], "function");
    assert_eq!(r0.body["tools"][0]["function"]["name"], "math_calculate");

    let second = p
        .chat(
            &request(vec![
                Message::User("what is 6*7?".into()),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: first.tool_calls.clone(),
                },
                Message::ToolResults(vec![ToolResult {
                    call_id: "call_a".into(),
                    name: "math_calculate".into(),
                    content: "42".into(),
                    is_error: false,
                }]),
            ]),
            &cancel,
        )
        .await
        .unwrap();
    assert!(second.tool_calls.is_empty());
    assert_eq!(second.text, "The tool said 42");
    let r1 = fake.request(1);
    let msgs = r1.body["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_a");
    assert_eq!(
        msgs[2]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .map(|s| serde_json::from_str::<serde_json::Value>(s).unwrap()),
        Some(json!({"expression": "6*7"}))
    );
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "42"})
    );
}

#[tokio::test]
async fn anthropic_two_step_tool_use_round_trips_the_tool_result() {
    let respond: Responder = Arc::new(|i, req| match i {
        0 => Reply::Json(
            200,
            vec![],
            fake_llm::anthropic_tool_use(&[(
                "toolu_1",
                "math_calculate",
                json!({"expression": "2+3"}),
            )]),
        ),
        _ => {
            let result = fake_llm::anthropic_last_tool_result(&req.body).unwrap_or_default();
            Reply::Json(
                200,
                vec![],
                fake_llm::anthropic_text(&format!("Result: {result}")),
            )
        }
    });
    let fake = fake_llm::start(respond).await;
    let p = anthropic(&fake, Some("sk-ant-test"));
    let cancel = CancellationToken::new();
    let first = p
        .chat(&request(vec![Message::User("2+3?".into())]), &cancel)
        .await
        .unwrap();
    assert_eq!(first.tool_calls[0].id, "toolu_1");
    assert_eq!(first.tool_calls[0].arguments, json!({"expression": "2+3"}));
    let r0 = fake.request(0);
    assert_eq!(r0.path, "/v1/messages");
    assert_eq!(r0.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(r0.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r0.body["system"], "You are a test agent.");
    assert_eq!(
        r0.body["tools"][0]["input_schema"]["required"][0],
        "expression"
    );
    assert!(r0.body["max_tokens"].as_u64().unwrap() > 0);

    let second = p
        .chat(
            &request(vec![
                Message::User("2+3?".into()),
                Message::Assistant {
                    text: "Let me compute.".into(),
                    tool_calls: first.tool_calls.clone(),
                },
                Message::ToolResults(vec![ToolResult {
                    call_id: "toolu_1".into(),
                    name: "math_calculate".into(),
                    content: "5".into(),
                    is_error: false,
                }]),
            ]),
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!(second.text, "Result: 5");
    let msgs = fake.request(1).body["messages"].as_array().unwrap().clone();
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "text", "text": "Let me compute."})
    );
    assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(
        msgs[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "5", "is_error": false})
    );
}

#[tokio::test]
async fn a_429_then_success_is_retried() {
    for vendor in ["openai", "anthropic"] {
        let respond: Responder = Arc::new(move |i, _| match (i, vendor) {
            (0, _) => Reply::Json(
                429,
                vec![("retry-after".into(), "0".into())],
                json!({"error": {"message": "rate limited"}}),
            ),
            (_, "openai") => Reply::Json(200, vec![], fake_llm::openai_text("after retry")),
            _ => Reply::Json(200, vec![], fake_llm::anthropic_text("after retry")),
        });
        let fake = fake_llm::start(respond).await;
        let p: Box<dyn Provider> = match vendor {
            "openai" => Box::new(openai(&fake, Some("k"))),
            _ => Box::new(anthropic(&fake, Some("k"))),
        };
        let r = p
            .chat(
                &request(vec![Message::User("hi".into())]),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(r.text, "after retry", "{vendor}");
        assert_eq!(r.attempts, 2, "{vendor}");
        assert_eq!(fake.count(), 2, "{vendor}");
    }
}

#[tokio::test]
async fn a_401_names_the_provider_and_the_variable_to_set() {
    let respond: Responder = Arc::new(|_, _| {
        Reply::Json(
            401,
            vec![],
            json!({"error": {"message": "Incorrect API key provided"}}),
        )
    });
    let fake = fake_llm::start(respond).await;
    let err = openai(&fake, Some("sk-wrong"))
        .chat(
            &request(vec![Message::User("hi".into())]),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ProviderError::Unauthorized { .. }), "{msg}");
    assert!(msg.starts_with("openai rejected"), "{msg}");
    assert!(msg.contains("Set OPENAI_API_KEY"), "{msg}");
    assert!(msg.contains("Incorrect API key provided"), "{msg}");
    assert!(
        !msg.contains("sk-wrong"),
        "the key never appears in the message: {msg}"
    );
    assert_eq!(fake.count(), 1, "401 is not retried");

    let respond: Responder = Arc::new(|_, _| {
        Reply::Json(
            401,
            vec![],
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        )
    });
    let fake = fake_llm::start(respond).await;
    let err = anthropic(&fake, Some("k"))
        .chat(
            &request(vec![Message::User("hi".into())]),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("anthropic rejected"), "{err}");
    assert!(err.to_string().contains("Set ANTHROPIC_API_KEY"), "{err}");
}

#[tokio::test]
async fn an_unknown_model_is_a_clear_error() {
    let respond: Responder = Arc::new(|_, _| {
        Reply::Json(
            404,
            vec![],
            json!({"error": {"message": "The model `gpt-nope` does not exist", "code": "model_not_found"}}),
        )
    });
    let fake = fake_llm::start(respond).await;
    let err = openai(&fake, Some("k"))
        .chat(
            &request(vec![Message::User("hi".into())]),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::UnknownModel { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("does not know the model 'gpt-test'"),
        "{err}"
    );
    assert!(err.to_string().contains("--model"), "{err}");

    let respond: Responder = Arc::new(|_, _| {
        Reply::Json(
            404,
            vec![],
            json!({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"}}),
        )
    });
    let fake = fake_llm::start(respond).await;
    let err = anthropic(&fake, Some("k"))
        .chat(
            &request(vec![Message::User("hi".into())]),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::UnknownModel { .. }), "{err}");
}

#[tokio::test]
async fn retries_are_bounded() {
    let respond: Responder =
        Arc::new(|_, _| Reply::Json(503, vec![], json!({"error": {"message": "overloaded"}})));
    let fake = fake_llm::start(respond).await;
    let err = openai(&fake, Some("k"))
        .chat(
            &request(vec![Message::User("hi".into())]),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    match &err {
        ProviderError::RetriesExhausted { attempts, last, .. } => {
            assert_eq!(*attempts, 4);
            assert!(
                last.contains("HTTP 503") && last.contains("overloaded"),
                "{last}"
            );
        }
        other => panic!("expected RetriesExhausted, got {other}"),
    }
    assert_eq!(fake.count(), 4, "1 attempt + max_retries (3)");
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_request_timeout() {
    let respond: Responder = Arc::new(|_, _| Reply::Hang);
    let fake = fake_llm::start(respond).await;
    let p = OpenAi::new(
        "openai",
        "m",
        url::Url::parse(&format!("{}/v1", fake.base())).unwrap(),
        Some("k".into()),
        "OPENAI_API_KEY",
        transport_for(&[fake.addr.to_string()]),
        RetryPolicy {
            max_retries: 1,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
            request_timeout: Duration::from_millis(300),
        },
    );
    let err = p
        .chat(
            &request(vec![Message::User("hi".into())]),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("request timeout"), "{err}");
    assert_eq!(fake.count(), 2);
}

#[tokio::test]
async fn cancellation_interrupts_a_pending_request() {
    let respond: Responder = Arc::new(|_, _| Reply::Hang);
    let fake = fake_llm::start(respond).await;
    let p = openai(&fake, Some("k"));
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let fake_count = fake.requests.clone();
    tokio::spawn(async move {
        // Cancel once the request has reached the server (bounded wait).
        for _ in 0..3000 {
            if !fake_count.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        c2.cancel();
    });
    let err = p
        .chat(&request(vec![Message::User("hi".into())]), &cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Cancelled), "{err}");
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn a_provider_host_outside_the_policy_is_blocked_without_a_request() {
    let respond: Responder =
        Arc::new(|_, _| Reply::Json(200, vec![], fake_llm::openai_text("should not happen")));
    let fake = fake_llm::start(respond).await;
    // The policy allows some other port only.
    let p = OpenAi::new(
        "openai",
        "m",
        url::Url::parse(&format!("{}/v1", fake.base())).unwrap(),
        Some("k".into()),
        "OPENAI_API_KEY",
        transport_for(&["127.0.0.1:1".to_string()]),
        fast_retry(),
    );
    let err = p
        .chat(
            &request(vec![Message::User("hi".into())]),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Blocked(_)), "{err}");
    assert!(
        err.to_string().starts_with("blocked by egress policy:"),
        "{err}"
    );
    assert_eq!(fake.count(), 0, "nothing reached the server");
}
