//! Where a relay link's intake subscriptions, the mentions', the DMs' and
//! the served groups' chat, stand on the current connection, and what the
//! link does about a relay's answer (EOSE, `CLOSED`, NIP-42
//! authentication, a timeout).
//!
//! No I/O: the relay link feeds it what the relay said and acts on the
//! verdict, so the rules are tested on their own. Owns nothing of the
//! thread subscriptions, which never hold the watermark back.

use std::time::Duration;

use nostr_sdk::prelude::{Filter, MachineReadablePrefix, SubscriptionId};

use super::interest::{DM_SUBSCRIPTION_ID, GROUPS_SUBSCRIPTION_ID, SUBSCRIPTION_ID};

/// How long a subscription closed with `auth-required:` waits for the SDK
/// to authenticate (it answers the relay's challenge, NIP-42) before the
/// link gives up on it: a relay that asks but never sends a challenge, or
/// whose challenge the SDK cannot answer in time.
const AUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the link's intake subscriptions (mentions, DMs, groups) stand on
/// the current connection: events in (sent, EOSE, CLOSED, authenticated, a
/// tick), what to do out. No I/O, so that it is tested on its own. The
/// mentions' is the one the link cannot do without; a relay may refuse the
/// DMs' or the groups' and still serve the rest.
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    mentions: Stage,
    dms: Stage,
    groups: Stage,
    /// What was sent, to send again after authenticating.
    requests: Vec<(SubscriptionId, Filter)>,
    /// When the subscriptions closed `auth-required:` stop waiting for the
    /// SDK to authenticate (set by the first of them).
    pub(super) auth_deadline: Option<tokio::time::Instant>,
}

/// One intake subscription on this connection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Not sent (its kinds are not read).
    #[default]
    Off,
    /// Sent; the relay is still sending what it stores.
    Replaying,
    /// Stored events delivered (EOSE): live.
    Live,
    /// Closed `auth-required:`; sent again once authenticated.
    AwaitingAuth,
    /// Closed for good on this connection.
    Refused,
}

/// What the link does after a CLOSED or a lost authentication.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The relay asks for authentication: wait for the SDK's.
    AwaitAuth,
    /// These subscriptions (what they read: "DM", "group chat") are
    /// refused on this connection; the mentions go on (and the intake is
    /// caught up if `caught_up`).
    Refused {
        reading: Vec<&'static str>,
        caught_up: bool,
    },
    /// The mentions' subscription is gone: reconnect, with backoff.
    Reconnect,
}

impl Subscriptions {
    /// Both sent afresh (those whose kinds are read).
    pub(super) fn sent(&mut self, requests: &[(SubscriptionId, Filter)]) {
        *self = Subscriptions::default();
        for (id, _) in requests {
            if let Some(stage) = self.stage_mut(id.as_str()) {
                *stage = Stage::Replaying;
            }
        }
        self.requests = requests.to_vec();
    }

    fn stage_mut(&mut self, id: &str) -> Option<&mut Stage> {
        match id {
            SUBSCRIPTION_ID => Some(&mut self.mentions),
            DM_SUBSCRIPTION_ID => Some(&mut self.dms),
            GROUPS_SUBSCRIPTION_ID => Some(&mut self.groups),
            _ => None,
        }
    }

    fn stages(&self) -> [Stage; 3] {
        [self.mentions, self.dms, self.groups]
    }

    /// Nothing sent is still on its way or waiting for authentication:
    /// everything up to now was delivered.
    pub(super) fn caught_up(&self) -> bool {
        !self
            .stages()
            .iter()
            .any(|stage| matches!(stage, Stage::Replaying | Stage::AwaitingAuth))
    }

    /// No subscription waits for authentication: the periodic tick may
    /// move the watermark (one that does would skip what it has not got).
    pub(super) fn authenticated(&self) -> bool {
        !self.stages().contains(&Stage::AwaitingAuth)
    }

    /// EOSE of `id`: whether the intake is now caught up.
    pub(super) fn end_of_stored(&mut self, id: &str) -> bool {
        match self.stage_mut(id) {
            Some(stage @ Stage::Replaying) => *stage = Stage::Live,
            _ => return false,
        }
        self.caught_up()
    }

    /// CLOSED of `id` with `message`; `None` for other subscriptions.
    pub(super) fn closed(&mut self, id: &str, message: &str, now: tokio::time::Instant) -> Option<Verdict> {
        let is_mentions = id == SUBSCRIPTION_ID;
        let stage = self.stage_mut(id)?;
        if MachineReadablePrefix::parse(message) == Some(MachineReadablePrefix::AuthRequired) {
            *stage = Stage::AwaitingAuth;
            self.auth_deadline.get_or_insert(now + AUTH_TIMEOUT);
            return Some(Verdict::AwaitAuth);
        }
        if is_mentions {
            return Some(Verdict::Reconnect);
        }
        *stage = Stage::Refused;
        Some(Verdict::Refused {
            reading: vec![reading(id)],
            caught_up: self.caught_up(),
        })
    }

    /// The SDK authenticated: the subscriptions that waited for it, to
    /// send again.
    pub(super) fn authenticated_now(&mut self) -> Vec<(SubscriptionId, Filter)> {
        self.auth_deadline = None;
        let mut again = Vec::new();
        for (id, filter) in self.requests.clone() {
            if let Some(stage) = self.stage_mut(id.as_str())
                && *stage == Stage::AwaitingAuth
            {
                *stage = Stage::Replaying;
                again.push((id, filter));
            }
        }
        again
    }

    /// Authentication failed or timed out: the subscriptions waiting for it
    /// are refused; `None` if none was waiting.
    pub(super) fn authentication_lost(&mut self) -> Option<Verdict> {
        self.auth_deadline = None;
        if self.mentions == Stage::AwaitingAuth {
            return Some(Verdict::Reconnect);
        }
        let mut refused = Vec::new();
        for id in [DM_SUBSCRIPTION_ID, GROUPS_SUBSCRIPTION_ID] {
            if let Some(stage) = self.stage_mut(id)
                && *stage == Stage::AwaitingAuth
            {
                *stage = Stage::Refused;
                refused.push(reading(id));
            }
        }
        (!refused.is_empty()).then(|| Verdict::Refused {
            reading: refused,
            caught_up: self.caught_up(),
        })
    }
}

/// What the subscription `id` reads, for people.
fn reading(id: &str) -> &'static str {
    match id {
        DM_SUBSCRIPTION_ID => "DM",
        GROUPS_SUBSCRIPTION_ID => "group chat",
        _ => "mention",
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::{Kind, Timestamp};

    use super::*;
    use crate::intake::interest::Interest;

    const NOW: u64 = 1_000_000;

    fn subscriptions_sent(dms: bool) -> Subscriptions {
        with_groups_sent(dms, &[])
    }

    fn with_groups_sent(dms: bool, groups: &[&str]) -> Subscriptions {
        let mut subscriptions = Subscriptions::default();
        let mut kinds = vec![Kind::Custom(9)];
        kinds.extend(dms.then_some(Kind::GiftWrap));
        let interest = Interest {
            bot: nostr_sdk::prelude::Keys::generate().public_key(),
            kinds,
            follow_threads: false,
            groups: groups.iter().map(|id| (*id).to_owned()).collect(),
        };
        subscriptions.sent(&interest.intake_subscriptions(Timestamp::from_secs(NOW)));
        subscriptions
    }

    #[test]
    fn the_intake_is_caught_up_once_both_subscriptions_delivered_their_stored_events() {
        let mut subscriptions = subscriptions_sent(true);
        assert!(
            !subscriptions.end_of_stored(SUBSCRIPTION_ID),
            "the DMs still come"
        );
        assert!(subscriptions.end_of_stored(DM_SUBSCRIPTION_ID));
        assert!(
            !subscriptions.end_of_stored(DM_SUBSCRIPTION_ID),
            "a second EOSE says nothing new"
        );
        let mut mentions_only = subscriptions_sent(false);
        assert!(mentions_only.end_of_stored(SUBSCRIPTION_ID));
    }

    #[test]
    fn auth_required_waits_for_authentication_and_holds_the_watermark_back_meanwhile() {
        let now = tokio::time::Instant::now();
        let mut subscriptions = subscriptions_sent(true);
        assert!(!subscriptions.end_of_stored(SUBSCRIPTION_ID));
        let verdict = subscriptions.closed(DM_SUBSCRIPTION_ID, "auth-required: you must auth", now);
        assert_eq!(verdict, Some(Verdict::AwaitAuth), "no reconnect");
        assert!(
            !subscriptions.authenticated(),
            "the tick must not move the watermark"
        );
        assert_eq!(subscriptions.auth_deadline, Some(now + AUTH_TIMEOUT));
        let again = subscriptions.authenticated_now();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].0.as_str(), DM_SUBSCRIPTION_ID, "the DMs are sent again");
        assert!(subscriptions.authenticated());
        assert!(subscriptions.end_of_stored(DM_SUBSCRIPTION_ID));
        assert!(
            subscriptions.authenticated_now().is_empty(),
            "nothing was waiting"
        );
    }

    #[test]
    fn a_refused_dm_subscription_leaves_the_mentions_alone_and_a_refused_mention_one_reconnects() {
        let now = tokio::time::Instant::now();
        let mut subscriptions = subscriptions_sent(true);
        assert!(!subscriptions.end_of_stored(SUBSCRIPTION_ID));
        assert_eq!(
            subscriptions.closed(DM_SUBSCRIPTION_ID, "restricted: not yours", now),
            Some(Verdict::Refused {
                reading: vec!["DM"],
                caught_up: true
            })
        );
        assert_eq!(subscriptions.closed("acp-bridge-threads", "error: x", now), None);
        assert_eq!(
            subscriptions.closed(SUBSCRIPTION_ID, "error: shutting down", now),
            Some(Verdict::Reconnect)
        );
    }

    #[test]
    fn a_failed_authentication_refuses_the_dms_and_reconnects_for_the_mentions() {
        let now = tokio::time::Instant::now();
        let mut dms_waiting = subscriptions_sent(true);
        dms_waiting.closed(DM_SUBSCRIPTION_ID, "auth-required: who are you", now);
        assert_eq!(
            dms_waiting.authentication_lost(),
            Some(Verdict::Refused {
                reading: vec!["DM"],
                caught_up: false
            }),
            "the mentions' stored events still come"
        );
        assert_eq!(dms_waiting.authentication_lost(), None);
        let mut mentions_waiting = subscriptions_sent(true);
        mentions_waiting.closed(SUBSCRIPTION_ID, "auth-required: who are you", now);
        assert_eq!(mentions_waiting.authentication_lost(), Some(Verdict::Reconnect));
    }

    #[test]
    fn the_served_groups_chat_holds_the_watermark_and_its_refusal_leaves_the_rest() {
        let now = tokio::time::Instant::now();
        let mut subscriptions = with_groups_sent(true, &["pizza"]);
        assert!(!subscriptions.end_of_stored(SUBSCRIPTION_ID));
        assert!(
            !subscriptions.end_of_stored(DM_SUBSCRIPTION_ID),
            "the group chat still comes"
        );
        assert!(subscriptions.end_of_stored(GROUPS_SUBSCRIPTION_ID));

        let mut refused = with_groups_sent(true, &["pizza"]);
        assert_eq!(
            refused.closed(GROUPS_SUBSCRIPTION_ID, "restricted: members only", now),
            Some(Verdict::Refused {
                reading: vec!["group chat"],
                caught_up: false
            })
        );
        let mut both_waiting = with_groups_sent(true, &["pizza"]);
        both_waiting.closed(DM_SUBSCRIPTION_ID, "auth-required: who are you", now);
        both_waiting.closed(GROUPS_SUBSCRIPTION_ID, "auth-required: who are you", now);
        assert!(!both_waiting.end_of_stored(SUBSCRIPTION_ID));
        assert_eq!(
            both_waiting.authentication_lost(),
            Some(Verdict::Refused {
                reading: vec!["DM", "group chat"],
                caught_up: true
            })
        );
    }
}
