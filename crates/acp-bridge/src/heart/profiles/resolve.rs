//! Which profile a conversation uses: a pure function of the stored
//! choice, the routing rules and the mention that starts the turn.
//!
//! The order: the conversation's stored profile (the owner's `!agent`, or
//! the pick of its first turn, stored so that a second author cannot flip
//! its session), else the first profile whose `channels` name the
//! conversation, else the first whose `authors` name the mention's author,
//! else the default. A stored name no longer configured falls back to the
//! rules, and says so, so that the caller logs it.

use nostr_sdk::PublicKey;

use super::{Profile, Profiles};

/// What the pick is made from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    /// The conversation's stored profile, if any.
    pub stored: Option<&'a str>,
    /// The conversation's key, as the bridge writes it.
    pub conversation: &'a str,
    /// The group channel it is in (`<relay>'<group id>`), if any.
    pub channel: Option<&'a str>,
    /// The author of the mention that starts the turn.
    pub author: &'a PublicKey,
}

/// Why that profile was picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    /// The conversation's stored choice.
    Stored,
    /// A routing rule on its channel.
    Channel,
    /// A routing rule on the mention's author.
    Author,
    /// Nothing picked another.
    Default,
}

/// The pick, and a stored name that is no longer configured (to log once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pick<'p> {
    pub profile: &'p str,
    pub why: Why,
    pub stale: Option<String>,
}

/// The profile `facts` pick among `profiles`.
pub(crate) fn pick<'p>(profiles: &'p Profiles, facts: Facts<'_>) -> Pick<'p> {
    let stored = facts.stored.map(|name| profiles.named(name).ok_or(name));
    if let Some(Ok(profile)) = stored {
        return Pick {
            profile: &profile.name,
            why: Why::Stored,
            stale: None,
        };
    }
    let stale = stored.and_then(Result::err).map(str::to_owned);
    let on_channel = |profile: &&Profile| {
        profile
            .channels
            .iter()
            .any(|channel| channel == facts.conversation || Some(channel.as_str()) == facts.channel)
    };
    let by_author = |profile: &&Profile| profile.authors.contains(facts.author);
    let (profile, why) = if let Some(profile) = profiles.all().iter().find(on_channel) {
        (profile, Why::Channel)
    } else if let Some(profile) = profiles.all().iter().find(by_author) {
        (profile, Why::Author)
    } else {
        (profiles.default_profile(), Why::Default)
    };
    Pick {
        profile: &profile.name,
        why,
        stale,
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::Keys;

    use super::*;
    use crate::agents::pool::AgentSettings;
    use crate::tools::mcp::args::{McpMode, McpSettings};

    fn profile(name: &str, channels: &[&str], authors: &[PublicKey]) -> Profile {
        Profile {
            name: name.to_owned(),
            agent: AgentSettings::local(name.to_owned(), Vec::new()),
            mcp: McpSettings::without_operator_servers(McpMode::Off),
            channels: channels.iter().map(|channel| (*channel).to_owned()).collect(),
            authors: authors.to_vec(),
        }
    }

    /// `claude` (the default), `codex` for one channel, `gemini` for one
    /// author and also for that channel (the channel rule of the first
    /// profile wins).
    fn profiles(alice: PublicKey) -> Profiles {
        Profiles {
            profiles: vec![
                profile("claude", &[], &[]),
                profile("codex", &["wss://relay.example'dev"], &[]),
                profile("gemini", &["wss://relay.example'dev"], &[alice]),
            ],
            default: 0,
        }
    }

    fn facts<'a>(stored: Option<&'a str>, channel: Option<&'a str>, author: &'a PublicKey) -> Facts<'a> {
        Facts {
            stored,
            conversation: "dm:abc",
            channel,
            author,
        }
    }

    #[test]
    fn the_stored_choice_wins_over_every_rule() {
        let alice = Keys::generate().public_key();
        let all = profiles(alice);
        let pick = pick(
            &all,
            facts(Some("claude"), Some("wss://relay.example'dev"), &alice),
        );
        assert_eq!(
            (pick.profile, pick.why, pick.stale),
            ("claude", Why::Stored, None)
        );
    }

    #[test]
    fn a_channel_rule_comes_before_an_author_rule() {
        let alice = Keys::generate().public_key();
        let all = profiles(alice);
        let pick = pick(&all, facts(None, Some("wss://relay.example'dev"), &alice));
        assert_eq!((pick.profile, pick.why), ("codex", Why::Channel));
    }

    #[test]
    fn a_channel_rule_matches_the_conversation_key_too() {
        let alice = Keys::generate().public_key();
        let all = Profiles {
            profiles: vec![profile("claude", &[], &[]), profile("codex", &["dm:abc"], &[])],
            default: 0,
        };
        assert_eq!(pick(&all, facts(None, None, &alice)).profile, "codex");
    }

    #[test]
    fn an_author_rule_applies_outside_the_routed_channels() {
        let alice = Keys::generate().public_key();
        let all = profiles(alice);
        let pick = pick(&all, facts(None, Some("wss://relay.example'other"), &alice));
        assert_eq!((pick.profile, pick.why), ("gemini", Why::Author));
    }

    #[test]
    fn nothing_matching_picks_the_default() {
        let alice = Keys::generate().public_key();
        let bob = Keys::generate().public_key();
        let all = Profiles {
            default: 1,
            ..profiles(alice)
        };
        let pick = pick(&all, facts(None, None, &bob));
        assert_eq!((pick.profile, pick.why), ("codex", Why::Default));
    }

    #[test]
    fn a_stored_name_no_longer_configured_falls_back_and_says_so() {
        let alice = Keys::generate().public_key();
        let bob = Keys::generate().public_key();
        let all = profiles(alice);
        let pick = pick(&all, facts(Some("retired"), None, &bob));
        assert_eq!(
            (pick.profile, pick.why, pick.stale.as_deref()),
            ("claude", Why::Default, Some("retired"))
        );
    }
}
