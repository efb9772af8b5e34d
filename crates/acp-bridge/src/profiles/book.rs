//! The profile each turn runs on: the resolver's pick over the
//! conversation's stored profile, kept once made.
//!
//! Owns asking the store what a conversation keeps, resolving, keeping the
//! first pick, and logging once a stored name that is no longer
//! configured. It does not own the rules ([`super::resolve`]) nor the
//! table ([`ConversationProfiles`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use super::Profiles;
use super::resolve::{Facts, pick};
use crate::mention::{ConversationKey, Mention, Thread};
use crate::store::ConversationProfiles;

/// The profiles and the conversations' choices; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct ProfileBook {
    profiles: Arc<Profiles>,
    stored: ConversationProfiles,
    /// Stored names no longer configured, already logged.
    stale_logged: Arc<Mutex<HashSet<String>>>,
}

impl ProfileBook {
    pub(crate) fn new(profiles: Profiles, stored: ConversationProfiles) -> ProfileBook {
        ProfileBook {
            profiles: Arc::new(profiles),
            stored,
            stale_logged: Arc::default(),
        }
    }

    /// The profile of the turn that `first` (its batch's oldest mention)
    /// starts; kept for the conversation when it had none, so that later
    /// turns stay on it whoever mentions the bot.
    pub(crate) fn for_turn(&self, conversation: &ConversationKey, first: Option<&Mention>) -> String {
        let Some(first) = first else {
            return self.of(conversation);
        };
        let channel = match (&first.thread, &first.origin) {
            (Thread::Group { channel, .. }, Some(relay)) => {
                Some(format!("{}'{channel}", relay.as_str_without_trailing_slash()))
            }
            (Thread::Group { channel, .. }, None) => Some(channel.clone()),
            _ => None,
        };
        let stored = self.stored_name(conversation);
        let picked = pick(
            &self.profiles,
            Facts {
                stored: stored.as_deref(),
                conversation: conversation.as_str(),
                channel: channel.as_deref(),
                author: &first.author,
            },
        );
        if let Some(stale) = &picked.stale {
            self.log_stale_once(stale, picked.profile);
        } else if stored.is_none() {
            if let Err(error) = self.stored.keep_first(conversation, picked.profile) {
                tracing::warn!(%conversation, %error, "cannot keep the conversation's profile");
            }
        }
        picked.profile.to_owned()
    }

    /// The profile the conversation keeps if still configured, else the
    /// default: what a delegated task of it runs on.
    pub(crate) fn of(&self, conversation: &ConversationKey) -> String {
        self.stored_name(conversation)
            .filter(|name| self.profiles.named(name).is_some())
            .unwrap_or_else(|| self.profiles.default_profile().name.clone())
    }

    fn stored_name(&self, conversation: &ConversationKey) -> Option<String> {
        self.stored.stored(conversation).unwrap_or_else(|error| {
            tracing::warn!(%conversation, %error, "cannot read the conversation's profile");
            None
        })
    }

    fn log_stale_once(&self, stale: &str, instead: &str) {
        let first_time = self
            .stale_logged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(stale.to_owned());
        if first_time {
            tracing::warn!(
                profile = stale,
                instead,
                "a conversation keeps a profile that is no longer configured; it runs on another"
            );
        }
    }
}
