//! The author gate: who is heard.
//!
//! Owns the decision from a (verified) author to "heard" or "not heard",
//! under `--respond-to`: the owner, the allowlist, and sibling bots of the
//! same owner proven by an owner attestation (NIP-OA) on the event itself or
//! on the author's kind:0 profile. DMs hear only the owner and siblings,
//! whatever the mode, since clients p-tag every DM participant.
//!
//! The gate never trusts what tags claim about authority: the author is the
//! event's signed `pubkey`, and a sibling is proven only by the owner's
//! signature. A profile fetch that fails is never cached as "not a sibling".

pub mod attestation;
pub mod sibling_cache;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nostr_sdk::prelude::{Client, Filter, Kind, PublicKey, Tag, TagKind, Timestamp};

use self::sibling_cache::{SiblingCache, SiblingVerdict};
use crate::config::RespondTo;
use crate::rate_limit::{Admission, RateLimiter};

/// How long one profile lookup may take.
const PROFILE_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Profile lookups allowed in a burst, and the refill interval after it:
/// a flood of strangers must not turn into a flood of relay queries.
const PROFILE_FETCH_BURST: u32 = 30;
const PROFILE_FETCH_REFILL: Duration = Duration::from_secs(2);

/// Where an author stands with this bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Owner,
    Sibling,
    Allowlisted,
    Stranger,
}

/// What the gate needs to know about an event.
#[derive(Debug, Clone, Copy)]
pub struct AuthorFacts<'a> {
    pub author: PublicKey,
    pub kind: Kind,
    pub created_at: Timestamp,
    pub tags: &'a [Tag],
    pub direct_message: bool,
}

/// Why the gate refused an author (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `--respond-to nobody`.
    NobodyHeard,
    /// Not the owner, not a sibling, not allowlisted (as the mode requires).
    NotHeard,
    /// A DM from someone other than the owner or a sibling.
    DirectMessageFromStranger,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NobodyHeard => "nobody_heard",
            Refusal::NotHeard => "not_heard",
            Refusal::DirectMessageFromStranger => "dm_from_stranger",
        }
    }
}

#[derive(Debug)]
pub struct AuthorGate {
    owner: Option<PublicKey>,
    respond_to: RespondTo,
    allowlist: BTreeSet<PublicKey>,
    siblings: Mutex<SiblingCache>,
    profile_budget: Mutex<RateLimiter<()>>,
    client: Client,
}

impl AuthorGate {
    pub fn new(
        owner: Option<PublicKey>,
        respond_to: RespondTo,
        allowlist: BTreeSet<PublicKey>,
        client: Client,
    ) -> Self {
        AuthorGate {
            owner,
            respond_to,
            allowlist,
            siblings: Mutex::new(SiblingCache::new(
                sibling_cache::DEFAULT_POSITIVE_TTL,
                sibling_cache::DEFAULT_NEGATIVE_TTL,
                sibling_cache::DEFAULT_CAPACITY,
            )),
            profile_budget: Mutex::new(RateLimiter::new(PROFILE_FETCH_BURST, PROFILE_FETCH_REFILL, 1)),
            client,
        }
    }

    pub fn owner(&self) -> Option<PublicKey> {
        self.owner
    }

    /// Decides whether `facts.author` is heard, and how they stand.
    pub async fn admit(&self, facts: AuthorFacts<'_>) -> Result<Standing, Refusal> {
        if self.respond_to == RespondTo::Nobody {
            return Err(Refusal::NobodyHeard);
        }
        if Some(facts.author) == self.owner {
            return Ok(Standing::Owner);
        }
        let allowlisted = self.respond_to == RespondTo::Allowlist && self.allowlist.contains(&facts.author);
        if allowlisted && !facts.direct_message {
            return Ok(Standing::Allowlisted);
        }
        if self.is_sibling(&facts).await {
            return Ok(Standing::Sibling);
        }
        match (self.respond_to, facts.direct_message) {
            (_, true) => Err(Refusal::DirectMessageFromStranger),
            (RespondTo::Anyone, false) => Ok(Standing::Stranger),
            _ => Err(Refusal::NotHeard),
        }
    }

    /// A sibling: attested by the owner, on the event or on its profile.
    async fn is_sibling(&self, facts: &AuthorFacts<'_>) -> bool {
        let Some(owner) = self.owner else {
            return false;
        };
        match attestation::verify_tags(facts.tags, &facts.author, &owner, facts.kind, facts.created_at) {
            Some(Ok(())) => return true,
            Some(Err(error)) => {
                tracing::debug!(author = %facts.author, %error, "attestation on the event refused");
            }
            None => {}
        }
        let now = Instant::now();
        let cached = self.lock_siblings().get(&facts.author, now);
        let verdict = match cached {
            Some(verdict) => verdict,
            None => match self.fetch_profile_attestations(&facts.author, now).await {
                Some(verdict) => verdict,
                None => return false,
            },
        };
        // Conditions depend on the event: checked every time.
        match verdict {
            SiblingVerdict::Sibling(tags) => matches!(
                attestation::verify_tags(tags.iter(), &facts.author, &owner, facts.kind, facts.created_at),
                Some(Ok(()))
            ),
            SiblingVerdict::NotSibling => false,
        }
    }

    /// The owner attestations on the author's signed kind:0 profile, cached.
    /// `None` when the lookup could not be made (budget spent, relay error):
    /// nothing is cached then.
    async fn fetch_profile_attestations(&self, author: &PublicKey, now: Instant) -> Option<SiblingVerdict> {
        let within_budget = matches!(
            self.profile_budget
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .admit(&(), now),
            Admission::Admitted
        );
        if !within_budget {
            tracing::debug!(%author, "profile lookup budget spent: not treated as a sibling this time");
            return None;
        }
        let filter = Filter::new().author(*author).kind(Kind::Metadata).limit(1);
        let profile = match self.client.fetch_events(filter, PROFILE_FETCH_TIMEOUT).await {
            Ok(events) => events.first_owned(),
            Err(error) => {
                // Not cached: a relay hiccup must not turn a sibling away for minutes.
                tracing::debug!(%author, %error, "profile lookup failed");
                return None;
            }
        };
        let auth_tags: Vec<Tag> = profile
            .filter(|profile| profile.pubkey == *author && profile.verify().is_ok())
            .map(|profile| {
                profile
                    .tags
                    .iter()
                    .filter(|tag| tag.kind() == TagKind::custom("auth"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let verdict = if auth_tags.is_empty() {
            SiblingVerdict::NotSibling
        } else {
            SiblingVerdict::Sibling(auth_tags)
        };
        self.lock_siblings().put(*author, verdict.clone(), now);
        Some(verdict)
    }

    fn lock_siblings(&self) -> std::sync::MutexGuard<'_, SiblingCache> {
        self.siblings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
