//! Long answers: bounded in memory, published as a numbered series of
//! threaded events that each fit a relay and NIP-44, in one agent run.

use nostr_sdk::prelude::*;
use scripted_agent::filler_text;

use crate::support::*;

/// Big enough to need several parts, under the default `--max-reply-bytes`.
const LONG_ANSWER_BYTES: usize = 200_000;

/// The label of a part of a series, `(k/n) `, parsed; `None` for a lone reply.
fn label(content: &str) -> Option<(usize, usize, &str)> {
    let rest = content.strip_prefix('(')?;
    let (numbers, text) = rest.split_once(") ")?;
    let (k, n) = numbers.split_once('/')?;
    Some((k.parse().ok()?, n.parse().ok()?, text))
}

/// Puts a series back together: every part numbered k/n once, for one n.
fn reassemble<'a>(contents: impl IntoIterator<Item = &'a str>) -> (usize, String) {
    let mut parts: Vec<(usize, usize, &str)> = contents
        .into_iter()
        .map(|content| label(content).unwrap_or_else(|| panic!("an unnumbered part: {:.80}", content)))
        .collect();
    parts.sort_by_key(|(k, _, _)| *k);
    let total = parts[0].1;
    assert!(parts.iter().all(|(_, n, _)| *n == total), "one series");
    let numbers: Vec<usize> = parts.iter().map(|(k, _, _)| *k).collect();
    assert_eq!(numbers, (1..=total).collect::<Vec<_>>(), "every part once");
    (total, parts.iter().map(|(_, _, text)| *text).collect())
}

/// The long answer's end as the reply carries it (trailing line breaks
/// of a message are left out).
fn said() -> &'static str {
    static SAID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SAID.get_or_init(|| filler_text(LONG_ANSWER_BYTES).trim_end_matches('\n').to_owned())
}

/// The turns that finished, from the daemon's log.
fn turns_finished(scene: &Scene) -> Vec<serde_json::Value> {
    let log = &scene.bridge.log;
    log.matching(log.start(), Line::new("turn finished"))
}

/// The parts by the bot referencing `mention`, once all `n` have arrived.
async fn group_series(scene: &Scene, mention: &Event) -> Vec<Event> {
    let first = scene.reply_to(mention).await;
    let (_, total, _) = label(&first.content).expect("a numbered series");
    scene.owner.replies_from(&scene.bot, &mention.id, total).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_group_answer_arrives_as_a_numbered_threaded_series_in_one_run() {
    let scene = Scene::builder().start().await;
    let text = format!("write a lot [rounds=1] [say-bytes={LONG_ANSWER_BYTES}]");
    let mention = scene.mention("room", &text).await;

    let parts = group_series(&scene, &mention).await;
    let (total, answer) = reassemble(parts.iter().map(|part| part.content.as_str()));
    assert!(answer.starts_with("round 1/1"), "{:.80}", answer);
    assert!(answer.ends_with(said()), "the whole answer, in order");
    // Threaded: every part under the mention as root; the first replies to
    // the mention, each next one to the part before it.
    let by_number = |k: usize| {
        parts
            .iter()
            .find(|part| label(&part.content).unwrap().0 == k)
            .expect("part")
    };
    for k in 1..=total {
        let part = by_number(k);
        let replied = if k == 1 { mention.id } else { by_number(k - 1).id };
        let expected: std::collections::BTreeSet<_> = [
            (mention.id.to_hex(), "root".to_owned()),
            (replied.to_hex(), "reply".to_owned()),
        ]
        .into();
        assert_eq!(e_tags(part), expected, "part {k}");
        assert!(p_tags(part, &scene.owner.public_key()));
        assert_eq!(channel_of(part), Some("room"));
        assert!(
            part.as_json().len() <= 64 * 1024,
            "part {k} fits a relay's event limit"
        );
    }

    scene.settle("room").await;
    let turns = turns_finished(&scene);
    println!(
        "long group answer: {LONG_ANSWER_BYTES} bytes in {total} parts; turns {} (with the settling one)",
        turns.len()
    );
    assert_eq!(turns.len(), 2, "one run for the long answer, one to settle");
    assert!(
        turns.iter().all(|turn| turn["outcome"] == "answered"),
        "{turns:?}"
    );
    assert_eq!(
        scene
            .owner
            .replies_from(&scene.bot, &mention.id, total)
            .await
            .len(),
        total
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_dm_answer_arrives_as_a_numbered_series_in_one_run() {
    let scene = Scene::builder().start().await;
    let (owner, bot) = (&scene.owner, scene.bot);
    owner
        .dm(
            &bot,
            &format!("privately, a lot [rounds=1] [say-bytes={LONG_ANSWER_BYTES}]"),
        )
        .await;
    let first = owner.direct_messages_from(&bot, 1).await;
    let (_, total, _) = label(&first[0].content).expect("a numbered series");
    let parts = owner.direct_messages_from(&bot, total).await;
    let (total, answer) = reassemble(parts.iter().map(|part| part.content.as_str()));
    assert!(answer.ends_with(said()), "the whole answer, in order");
    // Each next part replies to the one before it (by the rumor's id).
    let mut by_number: Vec<&UnsignedEvent> = parts.iter().collect();
    by_number.sort_by_key(|part| label(&part.content).unwrap().0);
    for pair in by_number.windows(2) {
        let previous = pair[0].id.expect("rumor id").to_hex();
        let replies_to = pair[1]
            .tags
            .iter()
            .find(|tag| tag.kind() == TagKind::e())
            .and_then(|tag| tag.content());
        assert_eq!(replies_to, Some(previous.as_str()));
    }

    // Settles the DM conversation: a retry of the long answer would come
    // before this one is answered.
    owner.dm(&bot, "settle [rounds=1]").await;
    owner.direct_messages_from(&bot, total + 1).await;
    let turns = turns_finished(&scene);
    println!(
        "long DM answer: {LONG_ANSWER_BYTES} bytes in {total} parts; turns {} (with the settling one)",
        turns.len()
    );
    assert_eq!(turns.len(), 2, "one run for the long answer, one to settle");
    assert!(
        turns.iter().all(|turn| turn["outcome"] == "answered"),
        "{turns:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_reply_bytes_truncates_the_answer_and_says_so() {
    const MAX_REPLY_BYTES: usize = 30_000;
    let scene = Scene::builder()
        .flags(&["--max-reply-bytes", &MAX_REPLY_BYTES.to_string()])
        .start()
        .await;
    let mention = scene
        .mention("room", "write too much [rounds=1] [say-bytes=100000]")
        .await;

    let parts = group_series(&scene, &mention).await;
    let (total, answer) = reassemble(parts.iter().map(|part| part.content.as_str()));
    let marker = format!("\n\n[answer truncated at {MAX_REPLY_BYTES} bytes]");
    let kept = answer
        .strip_suffix(&marker)
        .expect("the answer says it was truncated");
    assert!(kept.len() <= MAX_REPLY_BYTES, "{} bytes kept", kept.len());
    let filler = filler_text(100_000);
    let said = &kept[kept.find("000001 ").expect("the filler began")..];
    assert!(
        filler.starts_with(said),
        "what is kept is the start of what was said"
    );
    assert!(
        said.len() > MAX_REPLY_BYTES - 2_000,
        "the bound, not less, was kept"
    );
    println!(
        "truncated answer: {} bytes kept of 100000+, in {total} parts",
        kept.len()
    );

    scene.settle("room").await;
    assert_eq!(turns_finished(&scene).len(), 2, "the turn ended normally, once");
}
