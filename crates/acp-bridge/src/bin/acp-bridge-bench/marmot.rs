//! A Marmot (MLS) encrypted group's member on the bench's side, built on
//! mdk-core as White Noise is (and as `tests/e2e/marmot.rs` does): it
//! finds the bot's key package, creates a group of the two of them,
//! gift-wraps the bot its welcome, and then mentions the bot and reads its
//! answers, each a kind 445 it decrypts.
//!
//! The member's MLS work (encrypting each mention, decrypting each answer,
//! its own SQLite file) runs in the bench's process, so the daemon's
//! figures do not hold it: callgrind runs only the daemon, and the
//! context switches and CPU time are read from the daemon's `/proc` entry.

use std::collections::HashSet;
use std::path::Path;

use acp_bridge::EmbeddedRelay;
use mdk_core::MDK;
use mdk_core::groups::NostrGroupConfigData;
use mdk_core::messages::MessageProcessingResult;
use mdk_core::prelude::GroupId;
use mdk_sqlite_storage::{EncryptionConfig, MdkSqliteStorage};
use nostr_sdk::prelude::*;
use tokio::sync::broadcast;

use crate::harness::PATIENCE;

/// The addressable key package's kind (MIP-00).
const KEY_PACKAGE: Kind = Kind::Custom(30443);

/// A person in an encrypted group with the bot, who mentions it and waits
/// for its answers one at a time.
pub struct Member {
    keys: Keys,
    bot: PublicKey,
    client: Client,
    /// The client's notifications since before the group's subscription:
    /// the bot's answers arrive here.
    notifications: broadcast::Receiver<RelayPoolNotification>,
    mdk: MDK<MdkSqliteStorage>,
    group: GroupId,
    /// The 445 wrappers this member sent (the relay echoes them back; mdk
    /// would not read them).
    sent: HashSet<EventId>,
}

impl Member {
    /// `keys` (a person the bot hears) on `relay`, with MLS state in a file
    /// under `dir`, in a new group with the bot, whose welcome is sent. The
    /// bot has joined once it answers a first mention.
    pub async fn invite_bot(
        relay: &EmbeddedRelay,
        keys: Keys,
        bot: PublicKey,
        dir: &Path,
    ) -> Result<Member, String> {
        let client = Client::builder()
            .signer(keys.clone())
            .websocket_transport(acp_bridge::NoDelayTransport::default())
            .build();
        client
            .add_relay(relay.url().clone())
            .await
            .map_err(|error| error.to_string())?;
        client.connect().await;
        client
            .wait_for_connection(std::time::Duration::from_secs(5))
            .await;
        let mut notifications = client.notifications();
        let mdk = MDK::new(open_storage(dir)?);
        let package = Self::bot_key_package(&client, &mut notifications, bot).await?;
        let config = NostrGroupConfigData::new(
            "bench group".into(),
            "the bench and the bot".into(),
            None,
            None,
            None,
            vec![relay.url().clone()],
            vec![keys.public_key()],
        );
        let created = mdk
            .create_group(&keys.public_key(), vec![package], config)
            .map_err(|error| format!("create the group: {error}"))?;
        let group = created.group.mls_group_id.clone();
        mdk.merge_pending_commit(&group)
            .map_err(|error| format!("merge the group's creation: {error}"))?;
        let messages = Filter::new()
            .kind(Kind::MlsGroupMessage)
            .custom_tag(
                SingleLetterTag::lowercase(Alphabet::H),
                created
                    .group
                    .nostr_group_id
                    .iter()
                    .map(|byte| format!("{byte:02x}"))
                    .collect::<String>(),
            )
            .since(Timestamp::now());
        client
            .subscribe(messages, None)
            .await
            .map_err(|error| format!("subscribe to the group: {error}"))?;
        for welcome in created.welcome_rumors {
            let wrap = EventBuilder::gift_wrap(&keys, &bot, welcome, [])
                .await
                .map_err(|error| format!("wrap the welcome: {error}"))?;
            client
                .send_event(&wrap)
                .await
                .map_err(|error| format!("send the welcome: {error}"))?;
        }
        Ok(Member {
            keys,
            bot,
            client,
            notifications,
            mdk,
            group,
            sent: HashSet::new(),
        })
    }

    /// The bot's key package, once the relay has it (the daemon publishes
    /// it when its relay connects, about when it is ready).
    async fn bot_key_package(
        client: &Client,
        notifications: &mut broadcast::Receiver<RelayPoolNotification>,
        bot: PublicKey,
    ) -> Result<Event, String> {
        let packages = Filter::new().author(bot).kind(KEY_PACKAGE);
        client
            .subscribe(packages, None)
            .await
            .map_err(|error| format!("subscribe to key packages: {error}"))?;
        next_event(notifications, |event| {
            event.kind == KEY_PACKAGE && event.pubkey == bot
        })
        .await
        .ok_or_else(|| "no key package of the bot on the relay".to_owned())
    }

    /// Mentions the bot with `text` and waits for its answer (a message of
    /// the bot's with an `e` tag of the mention).
    pub async fn round_trip(&mut self, text: &str) {
        let mut rumor = EventBuilder::new(Kind::Custom(9), text)
            .tag(Tag::public_key(self.bot))
            .build(self.keys.public_key());
        let mention = rumor.id();
        let wrapper = self
            .mdk
            .create_message(&self.group, rumor, None)
            .expect("encrypt the mention");
        self.sent.insert(wrapper.id);
        self.client.send_event(&wrapper).await.expect("publish");
        let Member {
            notifications,
            mdk,
            sent,
            bot,
            ..
        } = self;
        let answered = next_event(notifications, |event| {
            if event.kind != Kind::MlsGroupMessage || sent.contains(&event.id) {
                return false;
            }
            // Commits are merged by reading them too.
            match mdk.process_message(event) {
                Ok(MessageProcessingResult::ApplicationMessage(message)) => {
                    message.event.pubkey == *bot && message.event.tags.event_ids().any(|id| *id == mention)
                }
                _ => false,
            }
        })
        .await;
        assert!(answered.is_some(), "the bot's answer to {mention} in the group");
    }
}

/// The first event of `notifications` that `wanted` takes, within
/// [`PATIENCE`].
async fn next_event(
    notifications: &mut broadcast::Receiver<RelayPoolNotification>,
    mut wanted: impl FnMut(&Event) -> bool,
) -> Option<Event> {
    let found = async {
        loop {
            match notifications.recv().await {
                Ok(RelayPoolNotification::Event { event, .. }) if wanted(&event) => return Some(*event),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    };
    tokio::time::timeout(PATIENCE, found).await.ok().flatten()
}

/// mdk's SQLite file in `dir`; SQLCipher with a random key, as mdk 0.8
/// offers no unencrypted file outside its test utilities.
fn open_storage(dir: &Path) -> Result<MdkSqliteStorage, String> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|error| format!("a random key: {error}"))?;
    MdkSqliteStorage::new_with_key(dir.join("member.sqlite"), EncryptionConfig::new(key))
        .map_err(|error| format!("the member's MLS state: {error}"))
}
