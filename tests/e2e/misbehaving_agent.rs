//! A misbehaving agent through the real daemon: updates for sessions the
//! bridge never opened are dropped and counted, and the turn they came
//! with is answered as if they had not been sent.

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_for_sessions_never_opened_are_dropped_counted_and_kept_out_of_the_answer() {
    const FOREIGN: u32 = 1000;
    let scene = Scene::builder().metrics().start().await;
    let log = &scene.bridge.log;
    let mark = log.cursor();
    let mention = scene
        .mention("room", &format!("[foreign-updates={FOREIGN}] hello"))
        .await;
    let reply = scene.reply_to(&mention).await;
    log.wait(mark, Line::new("turn finished").in_turn(&mention.id))
        .await;
    let port = scene.metrics_port();
    let dropped = metric(
        port,
        "acp_bridge_agent_updates_dropped_total{reason=\"unknown_session\"}",
    )
    .await;
    let warnings = log
        .matching(
            mark,
            Line::new(
                "update for a session this client never opened: dropped (this and the next ones, counted)",
            ),
        )
        .len();
    println!(
        "{FOREIGN} updates for sessions never opened: dropped and counted {dropped}, warned {warnings} time(s); the answer: {:?}",
        reply.content
    );
    assert!(!reply.content.contains("not yours"), "{}", reply.content);
    assert!(reply.content.contains("round 1/"), "{}", reply.content);
    assert_eq!(dropped, f64::from(FOREIGN));
    assert_eq!(warnings, 1, "one warning, not one per update");
}
