//! Bounds on what an author controls while the intake cannot decide on
//! them yet: events parked for a profile lookup hold at most
//! `--max-parked-bytes`, and what does not fit is fetched again, not lost.

use acp_bridge::Attestation;
use nostr_sdk::prelude::*;

use crate::support::*;

/// `--max-parked-bytes` in the test; one author may hold a sixteenth.
const MAX_PARKED_BYTES: u64 = 256 * 1024;
const AUTHOR_SHARE_BYTES: u64 = MAX_PARKED_BYTES / 16;
/// Mentions of this size: a few fill one author's share.
const CONTENT_BYTES: usize = 6_000;
const MENTIONS: usize = 12;
const PARKING: &str = "parking an event for its author's profile lookup";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_mentions_during_a_profile_lookup_are_parked_within_the_byte_bound_and_answered_once() {
    let bound = MAX_PARKED_BYTES.to_string();
    let stage = Scene::builder()
        .flags(&["--max-parked-bytes", &bound, "--rate-limit-burst", "100"])
        .stage_on(PickyRelay::start().await)
        .await;
    // A sibling by its profile: every mention waits for the lookup.
    let sibling = stage.join().await;
    let attestation = Attestation::sign(&stage.owner.keys, &sibling.public_key(), "kind=9").expect("sign");
    sibling
        .publish(EventBuilder::metadata(&Metadata::new().name("sibling")).tag(attestation.to_tag()))
        .await;
    let sibling_key = sibling.public_key();
    // The relay sits on the lookup of that profile until released.
    stage.relay.hold_queries(move |filter| {
        let profile = filter
            .kinds
            .as_ref()
            .is_some_and(|kinds| kinds.contains(&Kind::Metadata));
        let of_sibling = filter
            .authors
            .as_ref()
            .is_some_and(|authors| authors.contains(&sibling_key));
        profile && of_sibling
    });
    let scene = stage.start().await;
    let (bot, log) = (scene.bot, &scene.bridge.log);
    let mark = log.cursor();

    let mut mentions = Vec::new();
    for n in 0..MENTIONS {
        let text = format!("{n} {}", "x".repeat(CONTENT_BYTES));
        mentions.push(sibling.mention_in_group(&bot, "bots", &text).await);
    }
    // Each one met the lookup under way: parked, or left to the relay.
    for mention in &mentions {
        log.wait(mark, Line::new(PARKING).with("event_id", mention.id.to_hex()))
            .await;
    }
    scene.relay.release_queries();

    let result = scene
        .tally("large mentions of a sibling during its profile lookup", &mentions)
        .await;
    let parkings = log.matching(mark, Line::new(PARKING));
    let peak = |field: &str| {
        parkings
            .iter()
            .filter_map(|line| line[field].as_u64())
            .max()
            .unwrap_or(0)
    };
    let outcomes = |outcome: &str| parkings.iter().filter(|line| line["outcome"] == outcome).count();
    println!(
        "parked {} times, left to the relay {} times (bytes); peak parked {} B of {MAX_PARKED_BYTES} B, one author's peak {} B of {AUTHOR_SHARE_BYTES} B",
        outcomes("parked"),
        outcomes("too_many_bytes"),
        peak("parked_bytes"),
        peak("author_bytes"),
    );
    assert_exactly_once(result);
    assert!(outcomes("too_many_bytes") > 0, "the byte bound was reached");
    assert!(peak("parked_bytes") <= MAX_PARKED_BYTES);
    assert!(peak("author_bytes") <= AUTHOR_SHARE_BYTES);
    log.wait(mark, Line::new("fetching untaken events again")).await;
}
