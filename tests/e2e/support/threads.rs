//! Note threads for the thread context and `read_thread` tests: replies in
//! a thread dated in the past, mentions of the bot there, and a bridge that
//! hears the owner and one allowlisted friend but no stranger.

use nostr_sdk::prelude::*;

use super::{Person, RelayServer, Scene};

/// A kind-1 reply in the thread of `root`, dated `seconds_ago`.
pub fn note_in_thread(root: &Event, text: &str, seconds_ago: u64) -> EventBuilder {
    EventBuilder::text_note_reply(text, root, Some(root), None)
        .custom_created_at(Timestamp::from_secs(Timestamp::now().as_secs() - seconds_ago))
}

/// A reply in the thread of `root` that mentions the bot.
pub fn ask_in_thread(root: &Event, bot: PublicKey, text: &str) -> EventBuilder {
    EventBuilder::text_note_reply(text, root, Some(root), None).tag(Tag::public_key(bot))
}

/// A bridge under `--respond-to allowlist` with `friend` on the allowlist,
/// a thread context of 10 and thread following off (so a thread's earlier
/// notes stay context, not follow-ups of an answer); the friend joined.
pub async fn scene_with_an_allowlisted_friend() -> (Scene, Person) {
    let friend = Keys::generate();
    let friend_npub = friend.public_key().to_bech32().expect("npub");
    let scene = Scene::builder()
        .flags(&[
            "--respond-to",
            "allowlist",
            "--allowlist",
            &friend_npub,
            "--thread-context",
            "10",
            "--follow-threads",
            "off",
        ])
        .start()
        .await;
    let friend = Person::join_as(friend, &scene.relay.url()).await;
    (scene, friend)
}
