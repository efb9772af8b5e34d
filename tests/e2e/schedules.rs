//! Work on a schedule end to end (issue 25 §3): a `[[schedule]]` of the
//! config file fires at its cron times, and each run is a turn of the
//! scripted agent answered in its target.

use std::time::{Duration, SystemTime};

use nostr_sdk::prelude::EventId;

use crate::support::*;

/// Every two seconds, in the Paris zone (the zone does not move seconds).
const EVERY_TWO_SECONDS: &str = "[[schedule]]\nid = \"tick\"\ncron = \"*/2 * * * * *\"\n\
     timezone = \"Europe/Paris\"\ntarget = \"dm\"\nprompt = \"scheduled check-in\"\n";
/// The cron's period, and more: a fire time surely passes within it.
const PERIOD_AND_MARGIN: Duration = Duration::from_millis(2_500);
/// How long a stopped daemon gets to exit.
const EXIT_WITHIN: Duration = Duration::from_secs(20);

/// Keeps a stopped daemon down until `moment`: the condition under test
/// is time passing while it is down, so this waits on the clock itself.
async fn down_until(moment: SystemTime) {
    while SystemTime::now() < moment {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A config file holding `text`; its path.
fn config_file(text: &str) -> String {
    let file = temp_dir("schedules").join("acp-bridge.toml");
    std::fs::write(&file, text).expect("config file");
    file.to_str().expect("a UTF-8 path").to_owned()
}

/// A schedule with a seconds cron fires while the daemon runs: the run is
/// journaled as a mention of the owner and answered in the owner's DM,
/// framed as a scheduled run; `!schedules` lists it with its next run and
/// `!status` counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_schedule_fires_and_is_answered_in_the_owners_dm() {
    let file = config_file(EVERY_TWO_SECONDS);
    let scene = Scene::builder().flags(&["--config", &file]).start().await;
    let log = &scene.bridge.log;
    log.wait(log.start(), Line::new("schedule armed").with("schedule", "tick"))
        .await;
    // Armed after the start-up catch-up check: a new schedule has none.
    assert!(
        log.matching(log.start(), Line::new("schedule caught up"))
            .is_empty(),
        "{}",
        log.tail(20)
    );
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
    let run = EventId::from_hex(&run).expect("hex");
    log.wait(log.start(), Line::new("turn finished").in_turn(&run))
        .await;

    // The owner sees the schedule, its next run, and the count in !status.
    scene.owner.dm(&scene.bot, "!schedules").await;
    scene
        .owner
        .dm_containing(
            &scene.bot,
            "Schedules: 1.\ntick (config file, in dm: scheduled check-in): next run 20",
        )
        .await;
    scene.owner.dm(&scene.bot, "!status").await;
    scene.owner.dm_containing(&scene.bot, " Schedules: 1.").await;
}

/// A fire time that passes while the daemon is down makes one catch-up
/// run at the next start (not one per missed time), answered, its prompt
/// saying it was due while the bridge was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_time_missed_while_down_makes_one_catch_up_run() {
    let file = config_file(EVERY_TWO_SECONDS);
    let mut scene = Scene::builder().flags(&["--config", &file]).start().await;
    let log = &scene.bridge.log;
    let fired = log
        .wait(log.start(), Line::new("schedule fired").with("schedule", "tick"))
        .await;
    let first = EventId::from_hex(fired["event_id"].as_str().expect("id")).expect("hex");
    log.wait(log.start(), Line::new("turn finished").in_turn(&first))
        .await;
    scene.bridge.terminate(EXIT_WITHIN).await;
    // At least one fire time (several, at times) passes while it is down.
    down_until(SystemTime::now() + PERIOD_AND_MARGIN).await;
    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    let caught = log
        .wait(
            log.start(),
            Line::new("schedule caught up").with("schedule", "tick"),
        )
        .await;
    // Arming comes after every catch-up decision of the start.
    log.wait(log.start(), Line::new("schedule armed").with("schedule", "tick"))
        .await;
    assert_eq!(
        log.matching(log.start(), Line::new("schedule caught up")).len(),
        1,
        "one catch-up run, not one per missed time: {caught}"
    );
    let answer = scene
        .owner
        .dm_containing(&scene.bot, "this is its one catch-up run")
        .await;
    assert!(
        answer.content.contains("> scheduled check-in"),
        "{}",
        answer.content
    );
}

/// A fire while the schedule's previous run still runs is skipped,
/// logged and counted (the run itself counted as fired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_while_the_previous_run_runs_is_skipped() {
    let file = config_file(
        "[[schedule]]\nid = \"slow\"\ncron = \"*/2 * * * * *\"\ntarget = \"dm\"\n\
         prompt = \"slow check-in [delay=4500]\"\n",
    );
    let scene = Scene::builder()
        .flags(&["--config", &file])
        .metrics()
        .start()
        .await;
    let log = &scene.bridge.log;
    let skipped = log
        .wait(
            log.start(),
            Line::new("schedule run skipped")
                .with("schedule", "slow")
                .with("reason", "previous run still waiting or running"),
        )
        .await;
    let previous = EventId::from_hex(skipped["previous"].as_str().expect("previous")).expect("hex");
    log.wait(log.start(), Line::new("turn finished").in_turn(&previous))
        .await;
    let skips = metric(
        scene.metrics_port(),
        "acp_bridge_schedule_runs_total{outcome=\"skipped\"}",
    )
    .await;
    assert!(skips >= 1.0, "the skipped fire is counted: {skips}");
    let fired = metric(
        scene.metrics_port(),
        "acp_bridge_schedule_runs_total{outcome=\"fired\"}",
    )
    .await;
    assert!(fired >= 1.0, "the run is counted: {fired}");
}

/// The owner's message in the target conversation while a scheduled run
/// is in flight steers that run, as any mid-turn mention does: the run's
/// answer carries the steer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_message_steers_a_scheduled_run_in_flight() {
    let file = config_file(EVERY_TWO_SECONDS);
    let scene = Scene::builder()
        .agent(&["--rounds", "6", "--round-delay-ms", "300"])
        .flags(&["--config", &file])
        .start()
        .await;
    let log = &scene.bridge.log;
    let fired = log
        .wait(log.start(), Line::new("schedule fired").with("schedule", "tick"))
        .await;
    let run = EventId::from_hex(fired["event_id"].as_str().expect("id")).expect("hex");
    log.wait(log.start(), Line::new("agent run started").in_turn(&run))
        .await;
    let mark = log.cursor();
    scene.owner.dm(&scene.bot, "also cover the budget").await;
    log.wait(mark, Line::new("steered into the live turn")).await;
    let answer = scene
        .owner
        .dm_containing(&scene.bot, "> also cover the budget")
        .await;
    assert!(
        answer.content.contains("> scheduled check-in"),
        "the steer is in the scheduled run's answer: {}",
        answer.content
    );
}

/// A schedule whose target is a NIP-29 group is answered in that group,
/// threaded under the run's prompt, which the bot posts there first (kind
/// 9s with the group's `h` tag).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_schedule_is_answered_in_its_group() {
    let mut stage = Scene::builder().stage().await;
    let file = config_file(&format!(
        "[[schedule]]\nid = \"room-tick\"\ncron = \"*/2 * * * * *\"\n\
         target = \"group:{}'room\"\nprompt = \"scheduled check-in\"\n",
        stage.relay.url()
    ));
    stage.spec.flags.extend(["--config".to_owned(), file]);
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    let fired = log
        .wait(
            log.start(),
            Line::new("schedule fired").with("schedule", "room-tick"),
        )
        .await;
    assert_eq!(
        fired["conversation"].as_str(),
        Some(format!("group:{}'room", scene.relay.url()).as_str())
    );
    // The prompt is posted in the group first, and the answer threads
    // under that post, which readers can see and reply to.
    let prompt = EventId::from_hex(fired["prompt_event"].as_str().expect("the prompt's post")).expect("hex");
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &prompt, "> scheduled check-in")
        .await;
    let posted = scene
        .owner
        .client
        .fetch_events(
            nostr_sdk::prelude::Filter::new().id(prompt),
            Duration::from_secs(5),
        )
        .await
        .expect("fetch the prompt's post");
    let posted = posted.first().expect("the prompt's post is on the relay");
    assert_eq!(posted.content, "Scheduled `room-tick`: scheduled check-in");
    assert!(
        posted.tags.iter().any(|tag| tag.as_slice() == ["h", "room"]),
        "posted in the group: {:?}",
        posted.tags
    );
    assert_eq!(answer.kind, nostr_sdk::prelude::Kind::Custom(9));
    assert!(
        answer.tags.iter().any(|tag| tag.as_slice() == ["h", "room"]),
        "{:?}",
        answer.tags
    );
}

/// A schedule whose target is a public note thread is answered in that
/// thread: a kind 1 of the bot's naming the thread's root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_schedule_is_answered_in_its_thread() {
    let mut stage = Scene::builder().stage().await;
    let root = stage
        .owner
        .publish(nostr_sdk::prelude::EventBuilder::text_note("the weekly thread"))
        .await;
    let file = config_file(&format!(
        "[[schedule]]\nid = \"weekly\"\ncron = \"*/2 * * * * *\"\n\
         target = \"note:{}\"\nprompt = \"scheduled check-in\"\n",
        root.id.to_hex()
    ));
    stage.spec.flags.extend(["--config".to_owned(), file]);
    let scene = stage.start().await;
    let log = &scene.bridge.log;
    let fired = log
        .wait(
            log.start(),
            Line::new("schedule fired").with("schedule", "weekly"),
        )
        .await;
    let prompt = EventId::from_hex(fired["prompt_event"].as_str().expect("the prompt's post")).expect("hex");
    // The prompt is posted in the thread first (a reply to its root) ...
    let posted = scene
        .owner
        .reply_containing(&scene.bot, &root.id, "Scheduled `weekly`: scheduled check-in")
        .await;
    assert_eq!(posted.id, prompt);
    // ... and the answer threads under it, in the same thread.
    let answer = scene
        .owner
        .reply_containing(&scene.bot, &root.id, "> scheduled check-in")
        .await;
    assert_eq!(answer.kind, nostr_sdk::prelude::Kind::TextNote);
    let referenced: Vec<String> = answer
        .tags
        .iter()
        .filter(|tag| tag.as_slice().first().map(String::as_str) == Some("e"))
        .filter_map(|tag| tag.as_slice().get(1).cloned())
        .collect();
    assert!(
        referenced.contains(&prompt.to_hex()) && referenced.contains(&root.id.to_hex()),
        "threaded under the prompt's post, in the thread: {referenced:?}"
    );
}

/// Two shards of one bot with the same schedule: its runs fire on the
/// shard owning the owner's DM conversation only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_on_the_shard_owning_its_conversation_only() {
    let file = config_file(EVERY_TWO_SECONDS);
    let scene = Scene::builder()
        .flags(&["--shard", "0/2", "--config", &file])
        .start()
        .await;
    let replica = Bridge::start(&scene.spec().replica(&["--shard", "1/2", "--config", &file]));
    replica.ready().await;
    // Three armings each: both shards passed at least two fire times.
    for log in [&scene.bridge.log, &replica.log] {
        log.wait_nth(
            log.start(),
            3,
            Line::new("schedule armed").with("schedule", "tick"),
        )
        .await;
    }
    let fired: Vec<usize> = [&scene.bridge.log, &replica.log]
        .iter()
        .map(|log| log.matching(log.start(), Line::new("schedule fired")).len())
        .collect();
    assert!(
        fired.iter().filter(|count| **count > 0).count() == 1,
        "exactly one shard fires the schedule: {fired:?}"
    );
}

/// How long past a one-shot's time the test waits before starting the
/// daemon again, so the time has surely passed while it was down.
const ONE_SHOT_MARGIN: Duration = Duration::from_millis(500);

/// The owner schedules from chat: `!every` runs the prompt in the
/// conversation it was given in, `!schedules` lists it with its id, and
/// `!unschedule` stops it (no fire of it after the scheduler unarmed it,
/// bounded by a later schedule's run that must come after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_schedules_run_are_listed_and_stop_when_unscheduled() {
    let scene = Scene::builder().start().await;
    let log = &scene.bridge.log;
    scene.owner.dm(&scene.bot, "!every 2s chat tick").await;
    let set = scene
        .owner
        .dm_containing(&scene.bot, "Scheduled c1: every 2s")
        .await;
    assert!(set.content.contains("!unschedule c1"), "{}", set.content);
    let fired = log
        .wait(log.start(), Line::new("schedule fired").with("schedule", "c1"))
        .await;
    let run = EventId::from_hex(fired["event_id"].as_str().expect("id")).expect("hex");
    scene.owner.dm_containing(&scene.bot, "> chat tick").await;
    log.wait(log.start(), Line::new("turn finished").in_turn(&run))
        .await;

    scene.owner.dm(&scene.bot, "!schedules").await;
    scene
        .owner
        .dm_containing(&scene.bot, "c1 (every 2s, in dm: chat tick): next run 20")
        .await;
    let before = log.cursor();
    scene.owner.dm(&scene.bot, "!unschedule c1").await;
    scene
        .owner
        .dm_containing(&scene.bot, "Unscheduled c1: it runs no more.")
        .await;
    log.wait(before, Line::new("schedule unarmed").with("schedule", "c1"))
        .await;
    let unarmed = log.cursor();

    // A one-shot set after it must fire and be answered; by then c1 would
    // have fired again had it not been stopped (it fired every 2s).
    scene.owner.dm(&scene.bot, "!at +3s closing marker").await;
    scene
        .owner
        .dm_containing(&scene.bot, "Scheduled c2: once at")
        .await;
    log.wait(unarmed, Line::new("schedule fired").with("schedule", "c2"))
        .await;
    scene.owner.dm_containing(&scene.bot, "> closing marker").await;
    assert!(
        log.matching(unarmed, Line::new("schedule fired").with("schedule", "c1"))
            .is_empty(),
        "c1 fired after it was unscheduled: {}",
        log.tail(30)
    );
    scene.owner.dm(&scene.bot, "!unschedule standup").await;
    scene
        .owner
        .dm_containing(&scene.bot, "No schedule is named `standup`")
        .await;
}

/// A one-shot `!at` whose time passes while the daemon is down runs once
/// at the next start (its catch-up run, answered) and is then forgotten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_one_shot_missed_while_down_runs_once_after_restart() {
    let mut scene = Scene::builder().start().await;
    let sent = SystemTime::now();
    scene.owner.dm(&scene.bot, "!at +5s missed ping").await;
    scene
        .owner
        .dm_containing(&scene.bot, "Scheduled c1: once at")
        .await;
    scene.bridge.terminate(EXIT_WITHIN).await;
    assert!(
        scene
            .bridge
            .log
            .matching(scene.bridge.log.start(), Line::new("schedule fired"))
            .is_empty(),
        "the one-shot fired before the daemon stopped; the test needs it not to"
    );
    down_until(sent + Duration::from_secs(5) + ONE_SHOT_MARGIN).await;
    scene.restart(scene.spec()).await;
    let log = &scene.bridge.log;
    log.wait(
        log.start(),
        Line::new("schedule caught up").with("schedule", "c1"),
    )
    .await;
    let answer = scene
        .owner
        .dm_containing(&scene.bot, "this is its one catch-up run")
        .await;
    assert!(answer.content.contains("> missed ping"), "{}", answer.content);
    scene.owner.dm(&scene.bot, "!schedules").await;
    scene
        .owner
        .dm_containing(&scene.bot, "No schedules run here")
        .await;
}

/// A schedule's `agent` is the profile its runs use, whatever the target
/// conversation keeps; one naming no profile is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedules_runs_use_its_agent_profile() {
    let binary = bridge_binary();
    let profiles = format!(
        "[agents.plain]\ncommand = \"{binary}\"\ndefault = true\n\n\
         [agents.controlled]\ncommand = \"{binary}\"\n\
         args = [\"scripted-agent\", \"--rounds\", \"1\", \"--round-delay-ms\", \"10\", \"--controls\", \"config\"]\n\n"
    );
    let refused = config_file(&format!(
        "{profiles}[[schedule]]\nid = \"tick\"\ncron = \"*/2 * * * * *\"\ntarget = \"dm\"\n\
         prompt = \"x\"\nagent = \"nosuch\"\n"
    ));
    let secret = nostr_sdk::Keys::generate().secret_key().to_secret_hex();
    let owner = nostr_sdk::Keys::generate().public_key().to_hex();
    let output = check_with_agent_args(
        "embedded",
        &owner,
        Some(&secret),
        "scripted-agent",
        &["--config", &refused],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && stderr.contains("schedule `tick`: `agent = \"nosuch\"` names no agent profile"),
        "{stderr}"
    );

    let file = config_file(&format!(
        "{profiles}[[schedule]]\nid = \"tick\"\ncron = \"*/2 * * * * *\"\ntarget = \"dm\"\n\
         prompt = \"profiled check-in\"\nagent = \"controlled\"\n"
    ));
    let scene = Scene::builder()
        .agent(&["--rounds", "1", "--round-delay-ms", "10"])
        .flags(&["--config", &file])
        .start()
        .await;
    let answer = scene.owner.dm_containing(&scene.bot, "> profiled check-in").await;
    assert!(
        answer.content.contains("model: fast, mode: ask"),
        "answered by the schedule's profile: {}",
        answer.content
    );
    scene.owner.dm(&scene.bot, "!agent").await;
    scene
        .owner
        .dm_containing(&scene.bot, "controlled (this conversation's)")
        .await;
}

/// `!every` with an interval past the calendar's end (issue 35 §4) is
/// refused in one line, keeps no row, and the daemon goes on: before the
/// bounds it panicked on the first fire time, and again at every start
/// from the kept row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_past_the_calendars_end_is_refused_in_one_line() {
    let mut scene = Scene::builder().start().await;
    scene.owner.dm(&scene.bot, "!every 100000000d overflow").await;
    let refused = scene
        .owner
        .dm_containing(
            &scene.bot,
            "Not scheduled: the interval is at most 366d (a year).",
        )
        .await;
    assert_eq!(refused.content.lines().count(), 1, "{}", refused.content);
    println!("refusal: {}", refused.content);
    scene.owner.dm(&scene.bot, "!every 366d yearly review").await;
    scene
        .owner
        .dm_containing(&scene.bot, "Scheduled c1: every 366d")
        .await;
    scene.bridge.terminate(EXIT_WITHIN).await;
    scene.restart(scene.spec()).await;
    scene.owner.dm(&scene.bot, "!schedules").await;
    scene
        .owner
        .dm_containing(&scene.bot, "c1 (every 366d, in dm: yearly review)")
        .await;
}
