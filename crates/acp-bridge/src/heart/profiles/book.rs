//! The profile each turn runs on: the resolver's pick over the
//! conversation's stored profile, kept once made.
//!
//! Owns asking the store what a conversation keeps, resolving, keeping the
//! first pick, and logging once a stored name that is no longer
//! configured. It does not own the rules ([`super::resolve`]) nor the
//! table ([`ConversationProfiles`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use acp_bridge_core::mention::{ConversationKey, Intent, Mention, Thread};

use super::Profiles;
use super::resolve::{Facts, pick};
use crate::state::store::ConversationProfiles;

/// What `!agent` answers, and whether the conversation switched (its
/// session is then to be rotated, as `!rotate` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentSwitch {
    pub answer: String,
    pub switched: bool,
}

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
        if let Some(agent) = self.scheduled_agent(first) {
            if stored.is_none()
                && let Err(error) = self.stored.keep_first(conversation, agent)
            {
                tracing::warn!(%conversation, %error, "cannot keep the conversation's profile");
            }
            return agent.to_owned();
        }
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
        } else if stored.is_none()
            && let Err(error) = self.stored.keep_first(conversation, picked.profile)
        {
            tracing::warn!(%conversation, %error, "cannot keep the conversation's profile");
        }
        picked.profile.to_owned()
    }

    /// The profile a scheduled run asks for, when `first` is one and the
    /// profile is configured (start-up refuses a schedule naming another).
    /// It runs that turn whatever the conversation keeps, as the schedule
    /// says; the conversation keeps its own profile for its other turns.
    fn scheduled_agent<'a>(&self, first: &'a Mention) -> Option<&'a str> {
        let Intent::Scheduled {
            agent: Some(agent), ..
        } = &first.intent
        else {
            return None;
        };
        self.profiles.named(agent).map(|_| agent.as_str())
    }

    /// The profile the conversation keeps if still configured, else the
    /// default: what a delegated task of it runs on.
    pub(crate) fn of(&self, conversation: &ConversationKey) -> String {
        self.stored_name(conversation)
            .filter(|name| self.profiles.named(name).is_some())
            .unwrap_or_else(|| self.profiles.default_profile().name.clone())
    }

    /// The owner's `!agent [NAME]` in `conversation` (`mid_turn`: a turn
    /// is in flight there): the profiles listed, or the conversation
    /// switched to `name` from its next turn.
    pub(crate) fn command(
        &self,
        conversation: &ConversationKey,
        name: Option<&str>,
        mid_turn: bool,
    ) -> AgentSwitch {
        let current = self.of(conversation);
        let listed = || self.listing(&current);
        let answer = |answer: String, switched: bool| AgentSwitch { answer, switched };
        let Some(name) = name else {
            return answer(format!("{} Switch with !agent NAME.", listed()), false);
        };
        if self.profiles.named(name).is_none() {
            return answer(format!("No agent profile is named `{name}`. {}", listed()), false);
        }
        if name == current {
            return answer(format!("This conversation already talks to {name}."), false);
        }
        if let Err(error) = self.stored.choose(conversation, name) {
            tracing::warn!(%conversation, %error, "cannot keep the conversation's profile");
            return answer(
                format!("Cannot switch to {name}: the choice could not be kept ({error})."),
                false,
            );
        }
        tracing::info!(%conversation, from = %current, to = name, "conversation switched to another agent profile");
        let when = if mid_turn { " after the turn in flight" } else { "" };
        answer(
            format!("This conversation now talks to {name}; it starts a fresh session{when}."),
            true,
        )
    }

    /// `Agent profiles: a (default, this conversation's), b.`
    fn listing(&self, current: &str) -> String {
        let default = &self.profiles.default_profile().name;
        let names: Vec<String> = self
            .profiles
            .all()
            .iter()
            .map(|profile| {
                let marks: Vec<&str> = [
                    (&profile.name == default).then_some("default"),
                    (profile.name == current).then_some("this conversation's"),
                ]
                .into_iter()
                .flatten()
                .collect();
                match marks.as_slice() {
                    [] => profile.name.clone(),
                    marks => format!("{} ({})", profile.name, marks.join(", ")),
                }
            })
            .collect();
        format!("Agent profiles: {}.", names.join(", "))
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
