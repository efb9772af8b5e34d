//! The `read_thread` tool of the bridge's MCP server (issue 24 §1), end to
//! end: the scripted agent calls it (`[mcp-read-thread=N]`) and answers
//! with what it got, which follows the thread context's rules: only heard
//! authors, the newest `N`, framed by the bridge.

use nostr_sdk::prelude::*;

use crate::support::*;

/// What the agent's answer says `read_thread` returned.
const READ_MARK: &str = "mcp read_thread: ok: ";

/// A second mention in a thread gets no context (the session saw it all),
/// but `read_thread` reads the thread again: the newest `limit` messages of
/// heard authors, never the stranger's (who would be among the newest if
/// heard), never the bot's own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_thread_gives_the_newest_heard_messages_up_to_the_limit() {
    let (scene, friend) = scene_with_an_allowlisted_friend().await;
    let stranger = scene.join().await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);

    let root = owner
        .publish(
            EventBuilder::text_note("a thread about turtles")
                .custom_created_at(Timestamp::from_secs(Timestamp::now().as_secs() - 100)),
        )
        .await;
    friend.publish(note_in_thread(&root, "note three", 90)).await;
    friend.publish(note_in_thread(&root, "note four", 80)).await;
    stranger
        .publish(note_in_thread(&root, "the stranger's words", 70))
        .await;
    let first = owner.publish(ask_in_thread(&root, bot, "first question")).await;
    scene.reply_to(&first).await;

    let mark = log.cursor();
    let second = owner
        .publish(ask_in_thread(&root, bot, "second question [mcp-read-thread=3]"))
        .await;
    let answer = scene.reply_to(&second).await.content;
    println!("answer:\n{answer}");
    let (prompt, read) = answer
        .split_once(READ_MARK)
        .unwrap_or_else(|| panic!("no `{READ_MARK}` in:\n{answer}"));
    assert!(
        !prompt.contains("> note four"),
        "the second prompt carries no context: the session saw it"
    );
    for newest in [
        "> note four",
        "> first question",
        "> second question",
        "[acp-bridge] End of the earlier messages.",
    ] {
        assert!(read.contains(newest), "`{newest}` is read:\n{read}");
    }
    for left_out in ["note three", "the stranger's words", "a thread about turtles"] {
        assert!(!read.contains(left_out), "`{left_out}` is not read:\n{read}");
    }
    assert_eq!(read.matches("Earlier message from").count(), 3, "{read}");
    let line = log.wait(mark, Line::new("thread read for the agent")).await;
    assert_eq!(line["quoted"], 3, "{line}");
    assert_eq!(line["unheard"], 1, "{line}");
}

/// With `--thread-context 0` there is nothing to read by: the tool is
/// refused, and the mention is answered all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_thread_is_refused_when_thread_context_is_off() {
    let scene = Scene::builder().flags(&["--thread-context", "0"]).start().await;
    let mention = scene.mention("room", "[mcp-read-thread=5]").await;
    let answer = scene.reply_to(&mention).await.content;
    assert!(
        answer.contains("mcp read_thread: error: reading the thread is off here"),
        "{answer}"
    );
}

/// A `limit` past `--thread-context` is capped there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_thread_caps_the_limit_at_thread_context() {
    let scene = Scene::builder()
        .flags(&["--thread-context", "2", "--follow-threads", "off"])
        .start()
        .await;
    let (owner, bot, log) = (&scene.owner, scene.bot, &scene.bridge.log);
    let root = owner
        .publish(
            EventBuilder::text_note("a thread")
                .custom_created_at(Timestamp::from_secs(Timestamp::now().as_secs() - 100)),
        )
        .await;
    for (text, seconds_ago) in [("one", 30), ("two", 20), ("three", 10)] {
        owner.publish(note_in_thread(&root, text, seconds_ago)).await;
    }
    let mark = log.cursor();
    let mention = owner
        .publish(ask_in_thread(&root, bot, "read it all [mcp-read-thread=50]"))
        .await;
    let answer = scene.reply_to(&mention).await.content;
    let (_, read) = answer
        .split_once(READ_MARK)
        .unwrap_or_else(|| panic!("no `{READ_MARK}` in:\n{answer}"));
    assert_eq!(read.matches("Earlier message from").count(), 2, "{read}");
    assert!(read.contains("> three") && !read.contains("> two"), "{read}");
    let line = log.wait(mark, Line::new("thread read for the agent")).await;
    assert_eq!(line["quoted"], 2, "{line}");
}

/// An agent calling `read_thread` in every turn is held to a budget, like
/// `post_message`'s: 5 reads in a row, then one every 10 s; past it the
/// tool is refused (each read is a relay query) and the mention answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_thread_is_rate_limited_per_conversation() {
    const TURNS: usize = 8;
    let scene = Scene::builder().flags(&["--thread-context", "10"]).start().await;
    let started = std::time::Instant::now();
    let mut read = 0;
    let mut refused = 0;
    for turn in 0..TURNS {
        let mention = scene
            .mention("room", &format!("read {turn} [mcp-read-thread=1]"))
            .await;
        let answer = scene.reply_to(&mention).await.content;
        if answer.contains("mcp read_thread: error: too many thread reads") {
            refused += 1;
        } else if answer.contains("mcp read_thread: ok") {
            read += 1;
        } else {
            panic!("no read_thread outcome in:\n{answer}");
        }
    }
    let elapsed = started.elapsed();
    println!(
        "{TURNS} turns calling read_thread in one conversation within {:.1} s: read {read}, refused {refused}",
        elapsed.as_secs_f64()
    );
    // The burst, and one more per full 10 s that passed.
    let allowed = 5 + (elapsed.as_secs() / 10) as usize;
    assert!(read <= allowed, "read {read}, at most {allowed}");
    assert!(read >= 5, "the burst is read");
    assert!(refused >= 1 || elapsed.as_secs() >= 30, "past the burst, refused");
}
