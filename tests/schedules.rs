//! Work on a schedule end to end (issue 25 §3): a `[[schedule]]` of the
//! config file fires at its cron times, and each run is a turn of the
//! scripted agent answered in its target.

mod support;

use support::*;

/// A config file holding `text`; its path.
fn config_file(text: &str) -> String {
    let file = temp_dir("schedules").join("acp-bridge.toml");
    std::fs::write(&file, text).expect("config file");
    file.to_str().expect("a UTF-8 path").to_owned()
}

/// A schedule with a seconds cron fires while the daemon runs: the run is
/// journaled as a mention of the owner and answered in the owner's DM,
/// framed as a scheduled run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_schedule_fires_and_is_answered_in_the_owners_dm() {
    let file = config_file(
        "[[schedule]]\nid = \"tick\"\ncron = \"*/2 * * * * *\"\ntimezone = \"Europe/Paris\"\n\
         target = \"dm\"\nprompt = \"scheduled check-in\"\n",
    );
    let scene = Scene::builder().flags(&["--config", &file]).start().await;
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new("schedule armed").with("schedule", "tick"))
        .await;
    let fired = log
        .wait(log.start(), Line::new("schedule fired").with("schedule", "tick"))
        .await;
    let run = fired["event_id"].as_str().expect("the run's event id").to_owned();
    let answer = scene
        .owner
        .dm_containing(&scene.bot, "> scheduled check-in")
        .await;
    assert!(
        answer.content.contains("Scheduled run of `tick`"),
        "the agent saw the run framed as scheduled: {}",
        answer.content
    );
    let run = nostr_sdk::prelude::EventId::from_hex(&run).expect("hex");
    log.wait(log.start(), Line::new("turn finished").in_turn(&run))
        .await;
}
