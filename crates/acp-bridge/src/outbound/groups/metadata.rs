//! What a NIP-29 relay says of a group: its metadata (kind 39000) and its
//! members (kind 39002), read into plain values.
//!
//! Both events are addressable, with the group id in their `d` tag, and
//! the NIP has the hosting relay sign them with its own key (the NIP-11
//! `self` pubkey, see `relay_key`): only events by that key are read when
//! the document names it. When it cannot be had, they are read only from
//! the group's own relay, over the bot's own connection, and a NIP-29
//! relay refuses a 39000 or 39002 signed by anyone else. Among several
//! copies the newest wins, as NIP-01 keeps it, of those whose id and
//! signature we verified ourselves and, the key known, that it signed
//! (checked here too: a relay may ignore a filter's `authors`, and the
//! SDK's verification cache is keyed by id alone).
//!
//! Without the key we warn loudly (`membership::relay_signer`) rather
//! than fail closed: the group's relay is one the operator configured and
//! is read over the bot's own connection, many NIP-29 relays publish no
//! `self` key, and what the metadata decides (whether to send a join
//! request, the group's name in prompts) gives no one more than they could
//! post in the group anyway; refusing would leave such groups unusable.

use nostr_sdk::prelude::{Event, Kind, PublicKey, TagKind};

/// Kind 39000, group metadata.
pub(super) const GROUP_METADATA: u16 = 39000;
/// Kind 39002, group members.
pub(super) const GROUP_MEMBERS: u16 = 39002;
/// Kind 9021, a join request.
pub(super) const JOIN_REQUEST: u16 = 9021;
/// Kind 9022, a leave request.
pub(super) const LEAVE_REQUEST: u16 = 9022;

/// A group as its metadata describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupMetadata {
    pub name: Option<String>,
    pub about: Option<String>,
    /// `closed`: the relay ignores join requests (an admin adds members).
    pub closed: bool,
    /// `private`: only members read the group.
    pub private: bool,
    /// `restricted`: only members write to the group.
    pub restricted: bool,
}

impl GroupMetadata {
    /// Reads a kind 39000 event; fields it lacks are left unset.
    pub fn from_event(event: &Event) -> Self {
        let text = |name: &str| {
            event
                .tags
                .iter()
                .find(|tag| tag.kind() == TagKind::custom(name))
                .and_then(|tag| tag.content())
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
        };
        let flag = |name: &str| event.tags.iter().any(|tag| tag.kind() == TagKind::custom(name));
        GroupMetadata {
            name: text("name"),
            about: text("about"),
            closed: flag("closed"),
            private: flag("private"),
            restricted: flag("restricted"),
        }
    }

    /// Whether the bot has to be a member to take part: to read a private
    /// group, to write to a restricted one; and a closed group is one whose
    /// relay has said that membership is its to give.
    pub fn needs_membership(&self) -> bool {
        self.closed || self.private || self.restricted
    }
}

/// The newest event of `kind` among `events` (the later `created_at`, on a
/// tie the lower id) that verifies and, when `signer` is known, is by it.
pub(super) fn newest(events: &[Event], kind: u16, signer: Option<PublicKey>) -> Option<&Event> {
    events
        .iter()
        .filter(|event| event.kind == Kind::from(kind))
        .filter(|event| signer.is_none_or(|signer| event.pubkey == signer) && event.verify().is_ok())
        .max_by_key(|event| (event.created_at, std::cmp::Reverse(event.id)))
}

/// Whether a kind 39002 event lists `member`.
pub(super) fn lists_member(members: &Event, member: &PublicKey) -> bool {
    let hex = member.to_hex();
    members
        .tags
        .iter()
        .any(|tag| tag.kind() == TagKind::p() && tag.content() == Some(hex.as_str()))
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::{EventBuilder, Keys, Tag, Timestamp};

    use super::*;

    fn event(kind: u16, tags: &[&[&str]], at: u64) -> Event {
        signed_by(&Keys::generate(), kind, tags, at)
    }

    fn signed_by(keys: &Keys, kind: u16, tags: &[&[&str]], at: u64) -> Event {
        EventBuilder::new(Kind::from(kind), "")
            .tags(tags.iter().map(|tag| Tag::parse(tag.iter().copied()).unwrap()))
            .custom_created_at(Timestamp::from(at))
            .sign_with_keys(keys)
            .unwrap()
    }

    #[test]
    fn metadata_reads_name_about_and_flags() {
        let metadata = GroupMetadata::from_event(&event(
            GROUP_METADATA,
            &[
                &["d", "pizza"],
                &["name", "Pizza Lovers"],
                &["about", "a group for people who love pizza"],
                &["closed"],
            ],
            1,
        ));
        assert_eq!(
            metadata,
            GroupMetadata {
                name: Some("Pizza Lovers".to_owned()),
                about: Some("a group for people who love pizza".to_owned()),
                closed: true,
                private: false,
                restricted: false,
            }
        );
        assert!(metadata.needs_membership());
    }

    #[test]
    fn an_open_group_needs_no_membership_and_blank_fields_are_unset() {
        let metadata = GroupMetadata::from_event(&event(GROUP_METADATA, &[&["d", "x"], &["name", "  "]], 1));
        assert_eq!(metadata, GroupMetadata::default());
        assert!(!metadata.needs_membership());
    }

    #[test]
    fn the_newest_members_list_decides() {
        let bot = Keys::generate().public_key();
        let older = event(GROUP_MEMBERS, &[&["d", "x"]], 1);
        let newer = event(GROUP_MEMBERS, &[&["d", "x"], &["p", &bot.to_hex()]], 2);
        let metadata = event(GROUP_METADATA, &[&["d", "x"]], 3);
        let events = [newer.clone(), metadata, older];
        let members = newest(&events, GROUP_MEMBERS, None).unwrap();
        assert_eq!(members.id, newer.id);
        assert!(lists_member(members, &bot));
        assert!(!lists_member(&events[2], &bot));
    }

    /// A members list the relay did not sign, or one resent under a known
    /// id with the bot added, does not make the bot a member.
    #[test]
    fn only_verified_lists_by_the_relays_key_count() {
        let (relay, someone) = (Keys::generate(), Keys::generate());
        let bot = Keys::generate().public_key();
        let genuine = signed_by(&relay, GROUP_MEMBERS, &[&["d", "x"]], 1);
        let by_another = signed_by(&someone, GROUP_MEMBERS, &[&["d", "x"], &["p", &bot.to_hex()]], 2);
        let resent = Event::new(
            genuine.id,
            genuine.pubkey,
            Timestamp::from(3),
            genuine.kind,
            [
                Tag::parse(["d", "x"]).unwrap(),
                Tag::parse(["p", &bot.to_hex()]).unwrap(),
            ],
            "",
            genuine.sig,
        );
        let events = [genuine.clone(), by_another, resent];
        let members = newest(&events, GROUP_MEMBERS, Some(relay.public_key())).unwrap();
        assert_eq!(members.id, genuine.id);
        assert!(!lists_member(members, &bot));
        let unkeyed = newest(&events, GROUP_MEMBERS, None).unwrap();
        assert_eq!(unkeyed.pubkey, someone.public_key(), "the newest that verifies");
    }
}
