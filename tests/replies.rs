//! The Nostr side end to end: mentions in, threaded replies out.

mod support;

use std::time::Duration;

use nostr_sdk::prelude::*;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_mention_in_group_gets_a_threaded_reply() {
    let relay = TestRelay::start().await;
    let owner = Person::join(&relay.url()).await;
    let spec = BridgeSpec::new(&relay.url(), owner.public_key());
    let bot = spec.bot.public_key();
    let bridge = Bridge::start(&spec).ready().await;

    let mention = owner.mention_in_group(&bot, "room", "hello bot").await;
    let replies = owner.replies_from(&bot, &mention.id, 1).await;
    let reply = &replies[0];
    assert_eq!(reply.kind, Kind::Custom(9));
    assert!(reply.content.contains("done: "), "{}", reply.content);
    assert!(
        reply.content.contains("> hello bot"),
        "the prompt carried the mention: {}",
        reply.content
    );
    let expected: std::collections::BTreeSet<_> = [
        (mention.id.to_hex(), "root".to_owned()),
        (mention.id.to_hex(), "reply".to_owned()),
    ]
    .into();
    assert_eq!(e_tags(reply), expected, "a top-level mention is root and reply");
    assert!(p_tags(reply, &owner.public_key()));
    assert!(
        reply
            .tags
            .iter()
            .any(|tag| tag.kind() == TagKind::h() && tag.content() == Some("room"))
    );
    // One reply only.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        owner.events_referencing(&bot, &mention.id).await.len(),
        1,
        "{}",
        bridge.log()
    );
}
