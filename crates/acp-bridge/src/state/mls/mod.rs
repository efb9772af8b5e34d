//! The MLS state of the bot's Marmot (encrypted) groups: mdk's own SQLite
//! file, `marmot.sqlite` in the state dir, encrypted with SQLCipher under
//! the key of [`key`].
//!
//! A door like the store's (docs/architecture.md): the one owner of that
//! file, handed only to the stages that use it. It signs nothing: mdk
//! returns a key package's unsigned content and tags (the bot's signer signs
//! them, `outbound/marmot`), and signs a group message's kind 445 wrapper
//! with an ephemeral key of its own.
//!
//! mdk is synchronous SQLite and MLS crypto work: every call runs on the
//! blocking pool, one at a time behind a mutex (an epoch's secrets are read
//! and advanced by the same calls, so two must not interleave), and never
//! holds a runtime worker across an await.

pub(crate) mod key;
mod write_ahead;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mdk_core::key_packages::KeyPackageEventData;
use mdk_core::messages::MessageProcessingResult;
use mdk_core::prelude::{group_types, welcome_types};
use mdk_core::{GroupId, MDK};
use mdk_sqlite_storage::{EncryptionConfig, MdkSqliteStorage};
use mdk_storage_traits::messages::MessageStorage;
use nostr_sdk::prelude::{Event, EventId, PublicKey, RelayUrl, UnsignedEvent};
use openmls_traits::OpenMlsProvider;

/// The MLS database's file name in the state dir.
pub(crate) const MLS_DB_FILE_NAME: &str = "marmot.sqlite";
/// The default key file's name in the state dir.
pub(crate) const MLS_KEY_FILE_NAME: &str = "marmot.key";

#[derive(Debug, thiserror::Error)]
pub(crate) enum MlsError {
    #[error(transparent)]
    Key(#[from] key::KeyError),
    #[error("cannot open the Marmot state {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("Marmot: {0}")]
    Mdk(#[from] mdk_core::Error),
    #[error("Marmot: the blocking pool stopped: {0}")]
    Stopped(String),
}

/// The bot's MLS state; cheap to clone (one database behind it).
#[derive(Clone)]
pub(crate) struct MlsState {
    mdk: Arc<Mutex<MDK<MdkSqliteStorage>>>,
}

impl std::fmt::Debug for MlsState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("MlsState")
    }
}

impl MlsState {
    /// Opens (or creates) `marmot.sqlite` in `state_dir` with the key in
    /// `key_file` (`None`: `marmot.key` in the state dir, created on first
    /// start; a named file must exist).
    pub(crate) fn open(state_dir: &Path, key_file: Option<&Path>) -> Result<MlsState, MlsError> {
        let key = match key_file {
            Some(path) => key::load_or_create(path, false)?,
            None => key::load_or_create(&state_dir.join(MLS_KEY_FILE_NAME), true)?,
        };
        let path: PathBuf = state_dir.join(MLS_DB_FILE_NAME);
        let failed = |reason: String| MlsError::Open {
            path: path.display().to_string(),
            reason,
        };
        let storage = || {
            MdkSqliteStorage::new_with_key(&path, EncryptionConfig::new(key))
                .map_err(|error| failed(error.to_string()))
        };
        if !path.exists() {
            // mdk makes the file: its permissions (0600), its tables.
            drop(storage()?);
        }
        write_ahead::write_ahead(&path, key).map_err(failed)?;
        let storage = storage()?;
        Ok(MlsState {
            mdk: Arc::new(Mutex::new(MDK::new(storage))),
        })
    }

    /// Runs `work` on mdk on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&MDK<MdkSqliteStorage>) -> Result<T, mdk_core::Error> + Send + 'static,
    ) -> Result<T, MlsError> {
        let mdk = Arc::clone(&self.mdk);
        let done = tokio::task::spawn_blocking(move || {
            // A panic mid-call leaves mdk's own transactions rolled back.
            let mdk = mdk.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            work(&mdk)
        })
        .await
        .map_err(|error| MlsError::Stopped(error.to_string()))?;
        Ok(done?)
    }

    /// A fresh key package of `bot`'s, naming `relays` (MIP-00): its
    /// unsigned content and the tags of both kinds (30443, legacy 443).
    pub(crate) async fn key_package(
        &self,
        bot: PublicKey,
        relays: Vec<RelayUrl>,
    ) -> Result<KeyPackageEventData, MlsError> {
        self.blocking(move |mdk| mdk.create_key_package_for_event(&bot, relays))
            .await
    }
}

/// What a kind 445 group message turned out to be.
#[derive(Debug)]
pub(crate) enum Opened {
    /// A member's application message: its kind 9 rumor, whose `pubkey`
    /// mdk checked against the sender's MLS credential (a Nostr key).
    /// `recovered`: mdk had decrypted it before (a crash between its
    /// commit and the journal's) and it was read back from mdk's store.
    Message {
        group: String,
        rumor: UnsignedEvent,
        recovered: bool,
        /// Addressed to the bot without naming it: a reply to one of its
        /// messages, or any message of a group of two (as in a DM).
        to_bot: bool,
    },
    /// A commit: the group's epoch moved on (a member added or removed, a
    /// key update); `still_member` is false once it removed the bot.
    Commit { group: String, still_member: bool },
    /// Nothing to answer: a proposal, or a message processed before whose
    /// content mdk did not keep.
    Nothing(&'static str),
}

/// What became of a welcome.
#[derive(Debug)]
pub(crate) enum Welcomed {
    Joined(JoinedGroup),
    Declined,
    /// Accepted or declined already, at its first delivery.
    Before,
}

/// A group the bot is a member of, for the subscription to its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JoinedGroup {
    /// The Nostr group id (the wrappers' `h`), hex.
    pub group: String,
    pub relays: Vec<RelayUrl>,
}

impl MlsState {
    /// Opens a kind 445 group message. Exactly once: a wrapper mdk already
    /// processed is never processed again (its MLS secret is consumed and
    /// the second pass would fail); its message is read back from mdk's
    /// store instead, so a crash between mdk's commit and the journal's
    /// row loses nothing. The journal's row (deduplicated on the wrapper
    /// id) is the commit point of "taken".
    pub(crate) async fn read_message(&self, event: Event, bot: PublicKey) -> Result<Opened, MlsError> {
        self.blocking(move |mdk| {
            if let Some(done) = mdk
                .provider
                .storage()
                .find_processed_message_by_event_id(&event.id)
                .map_err(|error| mdk_core::Error::Message(error.to_string()))?
            {
                if let (Some(id), Some(group_id)) = (done.message_event_id, done.mls_group_id)
                    && let Some(message) = mdk.get_message(&group_id, &id)?
                {
                    return Ok(Opened::Message {
                        group: nostr_group_of(mdk, &group_id)?,
                        to_bot: to_bot(mdk, &group_id, &message.event, &bot)?,
                        rumor: message.event,
                        recovered: true,
                    });
                }
                return Ok(Opened::Nothing("processed before"));
            }
            Ok(match mdk.process_message(&event)? {
                MessageProcessingResult::ApplicationMessage(message) => Opened::Message {
                    group: nostr_group_of(mdk, &message.mls_group_id)?,
                    to_bot: to_bot(mdk, &message.mls_group_id, &message.event, &bot)?,
                    rumor: message.event,
                    recovered: false,
                },
                MessageProcessingResult::Commit { mls_group_id } => Opened::Commit {
                    group: nostr_group_of(mdk, &mls_group_id)?,
                    still_member: mdk.get_members(&mls_group_id)?.contains(&bot),
                },
                _ => Opened::Nothing("not an application message"),
            })
        })
        .await
    }

    /// Reads the welcome `rumor` (kind 444) that came in the gift wrap
    /// `wrapper`, and joins its group (`accept`) or declines it. A welcome
    /// answered before (its gift wrap delivered again after a restart) is
    /// left as it was: accepting it again would rebuild the group at the
    /// welcome's epoch and lose every later one.
    pub(crate) async fn welcome(
        &self,
        wrapper: EventId,
        rumor: UnsignedEvent,
        accept: bool,
    ) -> Result<Welcomed, MlsError> {
        self.blocking(move |mdk| {
            let welcome = mdk.process_welcome(&wrapper, &rumor)?;
            if welcome.state != welcome_types::WelcomeState::Pending {
                return Ok(Welcomed::Before);
            }
            if !accept {
                mdk.decline_welcome(&welcome)?;
                return Ok(Welcomed::Declined);
            }
            mdk.accept_welcome(&welcome)?;
            Ok(Welcomed::Joined(JoinedGroup {
                group: hex(&welcome.nostr_group_id),
                relays: welcome.group_relays.into_iter().collect(),
            }))
        })
        .await
    }

    /// The groups the bot is an active member of.
    pub(crate) async fn groups(&self) -> Result<Vec<JoinedGroup>, MlsError> {
        self.blocking(|mdk| {
            let mut joined = Vec::new();
            for group in mdk.get_groups()? {
                if group.state == group_types::GroupState::Active {
                    joined.push(JoinedGroup {
                        group: hex(&group.nostr_group_id),
                        relays: mdk.get_relays(&group.mls_group_id)?.into_iter().collect(),
                    });
                }
            }
            Ok(joined)
        })
        .await
    }

    /// `rumor` encrypted for the group `group` (a Nostr group id, hex), as
    /// the kind 445 event to publish (signed by mdk with an ephemeral key).
    pub(crate) async fn encrypt(&self, group: String, rumor: UnsignedEvent) -> Result<Event, MlsError> {
        self.blocking(move |mdk| {
            let group_id = mls_group_of(mdk, &group)?;
            mdk.create_message(&group_id, rumor, None)
        })
        .await
    }
}

/// Whether `rumor` in the group `group_id` is to `bot` without naming it:
/// the group has two members (the bot and the sender), or it replies (an
/// `e` tag) to a message of the bot's.
fn to_bot(
    mdk: &MDK<MdkSqliteStorage>,
    group_id: &GroupId,
    rumor: &UnsignedEvent,
    bot: &PublicKey,
) -> Result<bool, mdk_core::Error> {
    if mdk.get_members(group_id)?.len() == 2 {
        return Ok(true);
    }
    for id in rumor.tags.event_ids() {
        if mdk
            .get_message(group_id, id)?
            .is_some_and(|message| message.pubkey == *bot)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

impl MlsState {
    /// The bot's self-removal from the group `group` (hex): the proposal
    /// to publish, which an admin's commit carries out (the bot's state of
    /// the group is dropped when that commit removes it).
    pub(crate) async fn leave(&self, group: String) -> Result<Event, MlsError> {
        self.blocking(move |mdk| {
            let group_id = mls_group_of(mdk, &group)?;
            Ok(mdk.leave_group(&group_id)?.evolution_event)
        })
        .await
    }
}

/// The MLS group id of the Nostr group id `group` (hex).
fn mls_group_of(mdk: &MDK<MdkSqliteStorage>, group: &str) -> Result<GroupId, mdk_core::Error> {
    mdk.get_groups()?
        .into_iter()
        .find(|joined| hex(&joined.nostr_group_id) == group)
        .map(|joined| joined.mls_group_id)
        .ok_or(mdk_core::Error::GroupNotFound)
}

/// The Nostr group id (hex) of the MLS group `group_id`.
fn nostr_group_of(mdk: &MDK<MdkSqliteStorage>, group_id: &GroupId) -> Result<String, mdk_core::Error> {
    mdk.get_group(group_id)?
        .map(|group| hex(&group.nostr_group_id))
        .ok_or(mdk_core::Error::GroupNotFound)
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
