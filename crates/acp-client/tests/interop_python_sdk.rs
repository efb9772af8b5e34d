//! Interop: acp-client against an agent built on the official ACP Python SDK
//! (`agent-client-protocol` from PyPI), code we did not write.

use std::time::Duration;

use acp_client::{
    AgentClient, AgentCommand, CancelOutcome, ClientConfig, ContentBlock, PermissionPolicy, StopReason,
    TurnEvent, TurnOptions, TurnProgress,
};

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

fn sdk_agent() -> AgentClient {
    let python = test_support::python();
    let command = AgentCommand::new("sdk-agent", python)
        .args([test_support::fixture("sdk_agent.py")])
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    AgentClient::spawn(&command, ClientConfig::default()).expect("spawn the SDK agent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_agent_full_turn_with_permission_chosen_by_kind() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let client = sdk_agent();
        let info = client.initialize().await.expect("initialize");
        assert_eq!(info.name.as_deref(), Some("sdk-agent"));
        assert_eq!(info.protocol_version, 1);

        let session = client
            .new_session(&std::env::temp_dir(), Vec::new())
            .await
            .expect("new session");
        let options = TurnOptions {
            permission: PermissionPolicy::AllowOnce,
            ..TurnOptions::default()
        };
        let mut turn = client
            .prompt(&session, vec![ContentBlock::text("hello [permission]")], options)
            .await
            .expect("prompt");
        let mut tool_statuses = Vec::new();
        let outcome = loop {
            match turn.next().await.expect("turn event") {
                TurnProgress::Event(TurnEvent::ToolCall(call) | TurnEvent::ToolCallUpdate(call)) => {
                    tool_statuses.push(call.status.unwrap_or_default())
                }
                TurnProgress::Event(TurnEvent::PermissionAnswered { chosen, .. }) => {
                    assert_eq!(chosen.map(|option| option.id).as_deref(), Some("sdk-yes"));
                }
                TurnProgress::Event(_) => {}
                TurnProgress::Finished(outcome) => break outcome,
            }
        };
        assert_eq!(outcome.stop_reason, StopReason::EndTurn);
        assert!(
            outcome.message.starts_with("sdk heard: hello"),
            "{}",
            outcome.message
        );
        assert!(
            outcome.message.contains("permission: selected sdk-yes"),
            "{}",
            outcome.message
        );
        assert_eq!(tool_statuses, ["pending", "completed"]);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_agent_cancel_ends_the_turn_cancelled() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let client = sdk_agent();
        client.initialize().await.expect("initialize");
        let session = client
            .new_session(&std::env::temp_dir(), Vec::new())
            .await
            .expect("new session");
        let mut turn = client
            .prompt(
                &session,
                vec![ContentBlock::text("work [slow]")],
                TurnOptions::default(),
            )
            .await
            .expect("prompt");
        // Wait until the turn is visibly running before cancelling it.
        while let TurnProgress::Event(event) = turn.next().await.expect("event") {
            if matches!(event, TurnEvent::MessageChunk { ref text, .. } if text == ".") {
                break;
            }
        }
        let cancel = client.cancel(&session).await.expect("cancel");
        assert_eq!(cancel, CancelOutcome::Ended);
        let outcome = turn.finish_quietly().await.expect("outcome");
        assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    })
    .await
    .expect("test timed out");
}
