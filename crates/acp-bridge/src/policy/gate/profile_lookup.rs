//! Profile lookups for the sibling check, off the intake's path.
//!
//! A sibling may carry its owner's attestation on its kind:0 profile rather
//! than on each event, and reading a profile is a relay round trip of up to
//! [`PROFILE_FETCH_TIMEOUT`]. The intake must not wait on that: it would
//! stall every other author and let the relay link fall behind. So the gate
//! only *asks* for a lookup here and answers "not decided yet"; one worker
//! task makes the lookups, one at a time within a budget (a flood of fresh
//! keys must not become a flood of relay queries), and reports each verdict
//! back, after which the intake screens the waiting events again. Those
//! events wait in the intake, bounded in count and in bytes
//! (`--max-parked-bytes`); one that does not fit is fetched again from its
//! relay later, so a stranger's flood of large events while its lookup is
//! under way costs no memory past the bound.
//!
//! Requests for the same author are coalesced by the gate. A lookup that
//! fails (relay error, timeout) is retried with backoff, never reported as
//! "not a sibling"; a spent budget delays a lookup, it never skips it.

use std::time::{Duration, Instant};

use nostr_sdk::prelude::{Client, Filter, Kind, PublicKey, Tag, TagKind};
use tokio::sync::mpsc;

use super::sibling_cache::SiblingVerdict;
use crate::base::backoff::Backoff;
use crate::policy::rate_limit::{Admission, RateLimiter};

/// How long one profile lookup may take.
const PROFILE_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Lookups allowed in a burst, and the refill interval after it.
const PROFILE_FETCH_BURST: u32 = 30;
const PROFILE_FETCH_REFILL: Duration = Duration::from_secs(2);
/// Authors waiting for a lookup at most; past it the gate says the
/// lookups are busy and the intake lets the relay deliver the event again.
pub(crate) const MAX_QUEUED_LOOKUPS: usize = 1024;
/// Retries of a failed lookup back off between these.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// A finished lookup: the author and what their profile attests.
pub(crate) type LookedUp = (PublicKey, SiblingVerdict);

/// The worker's handles: where requests go in and verdicts come out.
#[derive(Debug)]
pub(crate) struct ProfileLookups {
    pub requests: mpsc::Sender<PublicKey>,
    pub done: mpsc::Receiver<LookedUp>,
}

impl ProfileLookups {
    /// Starts the worker on the current runtime. It ends when `requests`
    /// is dropped (the gate is gone).
    pub(crate) fn start(client: Client) -> Self {
        let (requests, queue) = mpsc::channel(MAX_QUEUED_LOOKUPS);
        let (report, done) = mpsc::channel(MAX_QUEUED_LOOKUPS);
        tokio::spawn(run(client, queue, report));
        ProfileLookups { requests, done }
    }
}

async fn run(client: Client, mut queue: mpsc::Receiver<PublicKey>, report: mpsc::Sender<LookedUp>) {
    let mut budget = RateLimiter::new(PROFILE_FETCH_BURST, PROFILE_FETCH_REFILL, 1);
    while let Some(author) = queue.recv().await {
        let mut backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
        let verdict = loop {
            while budget.admit(&(), Instant::now()) != Admission::Admitted {
                tracing::debug!(%author, queued = queue.len(), "profile lookup budget spent; the lookup waits");
                tokio::time::sleep(PROFILE_FETCH_REFILL).await;
            }
            match fetch(&client, &author).await {
                Ok(verdict) => {
                    let sibling = matches!(verdict, SiblingVerdict::Sibling(_));
                    tracing::debug!(%author, sibling, "profile looked up");
                    break verdict;
                }
                Err(error) => {
                    let retry_in = backoff.next_delay();
                    tracing::debug!(%author, %error, retry_in_ms = retry_in.as_millis() as u64, "profile lookup failed; will retry");
                    tokio::time::sleep(retry_in).await;
                }
            }
        };
        if report.send((author, verdict)).await.is_err() {
            return;
        }
    }
}

/// The owner attestations on the author's signed kind:0 profile.
async fn fetch(client: &Client, author: &PublicKey) -> Result<SiblingVerdict, nostr_sdk::client::Error> {
    let filter = Filter::new().author(*author).kind(Kind::Metadata).limit(1);
    let profile = client
        .fetch_events(filter, PROFILE_FETCH_TIMEOUT)
        .await?
        .first_owned();
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
    Ok(if auth_tags.is_empty() {
        SiblingVerdict::NotSibling
    } else {
        SiblingVerdict::Sibling(auth_tags)
    })
}
