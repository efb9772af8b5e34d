//! Marmot (MLS) encrypted groups (docs/marmot.md), against a member built on
//! mdk-core on the test side, as White Noise is: it finds the bot's key
//! package on the relay.

use mdk_core::MDK;
use mdk_memory_storage::MdkMemoryStorage;
use nostr_sdk::prelude::*;

use crate::support::*;

/// The addressable key package's kind (MIP-00).
const KEY_PACKAGE: Kind = Kind::Custom(30443);

/// A Marmot member: a person on the relay with MLS state of its own.
struct Member {
    person: Person,
    mdk: MDK<MdkMemoryStorage>,
}

impl Member {
    async fn join<R: RelayServer>(scene: &Scene<R>) -> Member {
        Member {
            person: scene.join().await,
            mdk: MDK::new(MdkMemoryStorage::default()),
        }
    }

    /// The bot's key package as the relay holds it, once it is there.
    async fn bot_key_package<R: RelayServer>(&self, scene: &Scene<R>) -> Event {
        self.person.newest_where(&scene.bot, KEY_PACKAGE, |_| true).await
    }
}

/// The relay URLs of the `relay` tags of `event` (kind 10051).
fn relay_tags(event: &Event) -> Vec<String> {
    event
        .tags
        .iter()
        .filter(|tag| tag.kind().as_str() == "relay")
        .filter_map(|tag| tag.content().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_finds_the_bots_key_package_and_key_package_relays() {
    let scene = Scene::builder().flags(&["--marmot"]).start().await;
    let member = Member::join(&scene).await;

    let package = member.bot_key_package(&scene).await;
    let parsed = member.mdk.parse_key_package(&package);
    let relays = member
        .person
        .newest_where(&scene.bot, Kind::MlsKeyPackageRelays, |_| true)
        .await;
    println!(
        "key package {} ({} bytes of content); 10051 relays: {:?}",
        package.id,
        package.content.len(),
        relay_tags(&relays)
    );
    assert!(parsed.is_ok(), "mdk parses the bot's key package: {parsed:?}");
    assert_eq!(
        relay_tags(&relays),
        [RelayUrl::parse(&scene.relay.url()).unwrap().to_string()]
    );
    let legacy = member.person.newest(&scene.bot, Kind::MlsKeyPackage).await;
    assert!(
        legacy.is_some_and(|event| event.content == package.content),
        "the legacy 443 copy"
    );
}
