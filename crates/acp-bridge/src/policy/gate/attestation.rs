//! Owner attestations of sibling bots (NIP-OA).
//!
//! Owns the `auth` tag: `["auth", <owner pubkey hex>, <conditions>, <signature hex>]`,
//! by which an owner vouches that a bot key is one of theirs. The owner's BIP-340
//! Schnorr signature covers SHA-256 of `nostr:agent-auth:<bot pubkey hex>:<conditions>`,
//! where the bot is the author of the event being judged. This module parses such
//! tags, verifies them against the configured owner, checks their conditions, and
//! mints them for the owner.
//!
//! It does not decide who is heard (that is the gate's job) and it does not fetch
//! profiles. Everything here judges input from the network: nothing panics on it,
//! and anything it does not understand (an unknown clause, odd hex, extra fields)
//! makes the attestation invalid rather than being skipped, since an ignored clause
//! could be a restriction the owner meant.

use nostr_sdk::hashes::{Hash, sha256};
use nostr_sdk::secp256k1::Message;
use nostr_sdk::secp256k1::schnorr::Signature;
use nostr_sdk::{Keys, Kind, PublicKey, SECP256K1, Tag, TagKind, Timestamp};

/// The first field of an attestation tag.
const AUTH_TAG_NAME: &str = "auth";
/// The signed text is `<prefix><bot pubkey hex>:<conditions>`.
const SIGNED_TEXT_PREFIX: &str = "nostr:agent-auth:";
/// Conditions longer than this are refused unparsed: no owner needs more, and a
/// stranger's tag must not cost us more than a glance.
const MAX_CONDITIONS_BYTES: usize = 1024;
/// Signature checks spent on one event's `auth` tags; each costs a Schnorr
/// verification, so a stranger stuffing an event with tags naming the owner
/// gets this many and no more.
const MAX_SIGNATURE_CHECKS_PER_EVENT: usize = 8;
/// Bytes in an x-only public key and in a BIP-340 signature.
const PUBLIC_KEY_BYTES: usize = 32;
const SIGNATURE_BYTES: usize = 64;

/// Why an attestation does not prove a sibling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttestationError {
    /// The tag is an `auth` tag but not a well-formed one.
    #[error("malformed attestation: {0}")]
    Malformed(&'static str),
    /// A conditions clause this module does not understand.
    #[error("unknown attestation clause {0:?}")]
    UnknownClause(String),
    /// The attestation names the bot itself as its owner.
    #[error("attestation is self-signed by the bot")]
    SelfAttested,
    /// The attestation names an owner other than ours.
    #[error("attestation names another owner")]
    WrongOwner,
    /// The signature does not cover this bot and these conditions under the owner key.
    #[error("attestation signature does not verify")]
    BadSignature,
    /// The attestation is genuine but does not cover this event.
    #[error("attestation conditions do not cover this event")]
    ConditionsUnmet,
}

/// One clause of the conditions; all clauses must hold (they are ANDed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clause {
    /// `kind=N`: the event's kind is N.
    KindIs(u16),
    /// `created_at<T`: the event was created strictly before T (unix seconds).
    CreatedBefore(u64),
    /// `created_at>T`: the event was created strictly after T (unix seconds).
    CreatedAfter(u64),
}

impl Clause {
    fn parse(text: &str) -> Result<Self, AttestationError> {
        if let Some(kind) = text.strip_prefix("kind=") {
            let kind = parse_decimal(kind).ok_or(AttestationError::Malformed("kind clause needs a u16"))?;
            return Ok(Clause::KindIs(kind));
        }
        if let Some(limit) = text.strip_prefix("created_at<") {
            let limit =
                parse_decimal(limit).ok_or(AttestationError::Malformed("created_at clause needs seconds"))?;
            return Ok(Clause::CreatedBefore(limit));
        }
        if let Some(limit) = text.strip_prefix("created_at>") {
            let limit =
                parse_decimal(limit).ok_or(AttestationError::Malformed("created_at clause needs seconds"))?;
            return Ok(Clause::CreatedAfter(limit));
        }
        Err(AttestationError::UnknownClause(text.to_owned()))
    }

    fn holds(self, kind: Kind, created_at: Timestamp) -> bool {
        match self {
            Clause::KindIs(expected) => kind.as_u16() == expected,
            Clause::CreatedBefore(limit) => created_at.as_secs() < limit,
            Clause::CreatedAfter(limit) => created_at.as_secs() > limit,
        }
    }
}

/// The conditions of an attestation: the raw text, which the signature covers
/// byte for byte, and its parsed clauses. Empty text means no restriction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditions {
    raw: String,
    clauses: Vec<Clause>,
}

impl Conditions {
    /// Parses `&`-joined clauses: `kind=N`, `created_at<T`, `created_at>T`.
    /// An unknown clause is an error, never skipped; so is an empty clause
    /// (`kind=1&`) or a number that is not plain decimal digits in range.
    pub fn parse(raw: &str) -> Result<Self, AttestationError> {
        if raw.len() > MAX_CONDITIONS_BYTES {
            return Err(AttestationError::Malformed("conditions too long"));
        }
        let clauses = if raw.is_empty() {
            Vec::new()
        } else {
            raw.split('&').map(parse_clause).collect::<Result<_, _>>()?
        };
        Ok(Conditions {
            raw: raw.to_owned(),
            clauses,
        })
    }

    /// The text exactly as signed.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Whether an event of `kind` created at `created_at` meets every clause.
    pub fn allow(&self, kind: Kind, created_at: Timestamp) -> bool {
        self.clauses.iter().all(|clause| clause.holds(kind, created_at))
    }
}

fn parse_clause(text: &str) -> Result<Clause, AttestationError> {
    if text.is_empty() {
        return Err(AttestationError::Malformed("empty clause"));
    }
    Clause::parse(text)
}

/// Plain ASCII decimal digits only (no sign, no spaces), in range of `T`.
fn parse_decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// An owner's attestation that a bot key is theirs, as carried by an `auth` tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    pub owner: PublicKey,
    pub conditions: Conditions,
    pub signature: Signature,
}

impl Attestation {
    /// Parses an `auth` tag; None when the tag is not an `auth` tag at all.
    ///
    /// Exactly four fields, lowercase hex for the owner (a valid curve point)
    /// and the signature, and conditions that parse; anything else is an error.
    pub fn from_tag(tag: &Tag) -> Option<Result<Attestation, AttestationError>> {
        match tag.as_slice() {
            [name, rest @ ..] if name == AUTH_TAG_NAME => Some(Self::from_fields(rest)),
            _ => None,
        }
    }

    fn from_fields(fields: &[String]) -> Result<Attestation, AttestationError> {
        let [owner, conditions, signature] = fields else {
            return Err(AttestationError::Malformed(
                "auth tag needs exactly owner, conditions, signature",
            ));
        };
        let owner = parse_owner(owner)?;
        let signature = decode_lower_hex::<SIGNATURE_BYTES>(signature)
            .and_then(|bytes| Signature::from_slice(&bytes).ok())
            .ok_or(AttestationError::Malformed(
                "signature is not 64 bytes of lowercase hex",
            ))?;
        let conditions = Conditions::parse(conditions)?;
        Ok(Attestation {
            owner,
            conditions,
            signature,
        })
    }

    /// Checks the attestation for `bot`'s event of `kind` at `created_at`,
    /// against the configured owner, in this order: self-attestation,
    /// wrong owner, signature, conditions.
    pub fn verify(
        &self,
        bot: &PublicKey,
        expected_owner: &PublicKey,
        kind: Kind,
        created_at: Timestamp,
    ) -> Result<(), AttestationError> {
        self.check_owner(bot, expected_owner)?;
        self.check_signature(bot)?;
        self.check_conditions(kind, created_at)
    }

    /// Signs an attestation for `bot` with the owner's keys. Refuses
    /// conditions that would not parse, so we never mint a tag we would reject.
    pub fn sign(owner: &Keys, bot: &PublicKey, conditions: &str) -> Result<Attestation, AttestationError> {
        let conditions = Conditions::parse(conditions)?;
        let signature = owner.sign_schnorr(&signed_message(bot, &conditions));
        Ok(Attestation {
            owner: owner.public_key(),
            conditions,
            signature,
        })
    }

    /// `["auth", owner hex, conditions raw, signature hex]`.
    pub fn to_tag(&self) -> Tag {
        Tag::custom(
            TagKind::custom(AUTH_TAG_NAME),
            [
                self.owner.to_hex(),
                self.conditions.as_str().to_owned(),
                encode_lower_hex(&self.signature.serialize()),
            ],
        )
    }

    /// The cheap checks, made before any signature work.
    fn check_owner(&self, bot: &PublicKey, expected_owner: &PublicKey) -> Result<(), AttestationError> {
        if self.owner == *bot {
            return Err(AttestationError::SelfAttested);
        }
        if self.owner != *expected_owner {
            return Err(AttestationError::WrongOwner);
        }
        Ok(())
    }

    fn check_signature(&self, bot: &PublicKey) -> Result<(), AttestationError> {
        let owner = self.owner.xonly().map_err(|_| AttestationError::BadSignature)?;
        SECP256K1
            .verify_schnorr(&self.signature, &signed_message(bot, &self.conditions), &owner)
            .map_err(|_| AttestationError::BadSignature)
    }

    fn check_conditions(&self, kind: Kind, created_at: Timestamp) -> Result<(), AttestationError> {
        if self.conditions.allow(kind, created_at) {
            Ok(())
        } else {
            Err(AttestationError::ConditionsUnmet)
        }
    }
}

/// The verdict for one event: Ok when any `auth` tag among `tags` verifies for
/// (author, kind, created_at); otherwise the most telling error, or None when
/// there is no `auth` tag at all.
///
/// At most [`MAX_SIGNATURE_CHECKS_PER_EVENT`] signatures are checked per event;
/// tags past that budget are not considered.
pub fn verify_tags<'a>(
    tags: impl IntoIterator<Item = &'a Tag>,
    author: &PublicKey,
    owner: &PublicKey,
    kind: Kind,
    created_at: Timestamp,
) -> Option<Result<(), AttestationError>> {
    let mut worst: Option<AttestationError> = None;
    let mut signature_checks = 0;
    for tag in tags {
        let attestation = match Attestation::from_tag(tag) {
            None => continue,
            Some(Ok(attestation)) => attestation,
            Some(Err(error)) => {
                keep_most_telling(&mut worst, error);
                continue;
            }
        };
        if let Err(error) = attestation.check_owner(author, owner) {
            keep_most_telling(&mut worst, error);
            continue;
        }
        if signature_checks == MAX_SIGNATURE_CHECKS_PER_EVENT {
            tracing::debug!(%author, "too many auth tags naming the owner: the rest are not checked");
            break;
        }
        signature_checks += 1;
        match attestation
            .check_signature(author)
            .and_then(|()| attestation.check_conditions(kind, created_at))
        {
            Ok(()) => return Some(Ok(())),
            Err(error) => keep_most_telling(&mut worst, error),
        }
    }
    worst.map(Err)
}

/// Keeps the error that says most about why no tag verified; the first wins a tie.
fn keep_most_telling(worst: &mut Option<AttestationError>, error: AttestationError) {
    if worst
        .as_ref()
        .is_none_or(|kept| how_telling(&error) > how_telling(kept))
    {
        *worst = Some(error);
    }
}

/// A genuine owner signature out of scope says most; a tag that does not parse, least.
fn how_telling(error: &AttestationError) -> u8 {
    match error {
        AttestationError::ConditionsUnmet => 5,
        AttestationError::BadSignature => 4,
        AttestationError::WrongOwner => 3,
        AttestationError::SelfAttested => 2,
        AttestationError::UnknownClause(_) => 1,
        AttestationError::Malformed(_) => 0,
    }
}

fn parse_owner(hex: &str) -> Result<PublicKey, AttestationError> {
    let bytes = decode_lower_hex::<PUBLIC_KEY_BYTES>(hex).ok_or(AttestationError::Malformed(
        "owner is not 32 bytes of lowercase hex",
    ))?;
    let owner = PublicKey::from_byte_array(bytes);
    owner
        .xonly()
        .map_err(|_| AttestationError::Malformed("owner is not a valid public key"))?;
    Ok(owner)
}

/// The message the owner signs: SHA-256 of `nostr:agent-auth:<bot hex>:<conditions>`.
fn signed_message(bot: &PublicKey, conditions: &Conditions) -> Message {
    let text = format!("{SIGNED_TEXT_PREFIX}{}:{}", bot.to_hex(), conditions.as_str());
    Message::from_digest(sha256::Hash::hash(text.as_bytes()).to_byte_array())
}

/// Decodes exactly `N` bytes of lowercase hex; None for anything else.
fn decode_lower_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != N * 2 {
        return None;
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        let [high, low] = pair else {
            return None;
        };
        *byte = (lower_hex_digit(*high)? << 4) | lower_hex_digit(*low)?;
    }
    Some(bytes)
}

fn lower_hex_digit(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

fn encode_lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000;

    struct Family {
        owner: Keys,
        bot: Keys,
        stranger: Keys,
    }

    fn family() -> Family {
        Family {
            owner: Keys::generate(),
            bot: Keys::generate(),
            stranger: Keys::generate(),
        }
    }

    fn at(seconds: u64) -> Timestamp {
        Timestamp::from(seconds)
    }

    fn auth_tag(owner: &str, conditions: &str, signature: &str) -> Tag {
        Tag::parse(["auth", owner, conditions, signature]).expect("non-empty tag")
    }

    fn verify_tag(tag: &Tag, f: &Family, kind: Kind, created_at: Timestamp) -> Result<(), AttestationError> {
        let attestation = Attestation::from_tag(tag).expect("an auth tag")?;
        attestation.verify(&f.bot.public_key(), &f.owner.public_key(), kind, created_at)
    }

    #[test]
    fn valid_attestation_verifies_and_round_trips_through_its_tag() {
        let f = family();
        let attestation = Attestation::sign(&f.owner, &f.bot.public_key(), "kind=1&created_at<1800000000")
            .expect("signable");
        let tag = attestation.to_tag();
        assert_eq!(tag.as_slice()[0], "auth");
        assert_eq!(tag.as_slice()[1], f.owner.public_key().to_hex());
        assert_eq!(tag.as_slice()[2], "kind=1&created_at<1800000000");
        assert_eq!(tag.as_slice()[3], attestation.signature.to_string());
        let parsed = Attestation::from_tag(&tag)
            .expect("an auth tag")
            .expect("well formed");
        assert_eq!(parsed, attestation);
        assert_eq!(verify_tag(&tag, &f, Kind::TextNote, at(T)), Ok(()));
    }

    #[test]
    fn empty_conditions_mean_no_restriction() {
        let f = family();
        let tag = Attestation::sign(&f.owner, &f.bot.public_key(), "")
            .expect("signable")
            .to_tag();
        assert_eq!(verify_tag(&tag, &f, Kind::TextNote, at(T)), Ok(()));
        assert_eq!(verify_tag(&tag, &f, Kind::from(9), at(0)), Ok(()));
        assert_eq!(verify_tag(&tag, &f, Kind::Metadata, at(u64::MAX)), Ok(()));
    }

    #[test]
    fn signed_by_another_key_naming_that_key_is_wrong_owner() {
        let f = family();
        let tag = Attestation::sign(&f.stranger, &f.bot.public_key(), "")
            .expect("signable")
            .to_tag();
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::WrongOwner)
        );
    }

    #[test]
    fn signed_by_another_key_naming_the_owner_is_bad_signature() {
        let f = family();
        let forged = Attestation::sign(&f.stranger, &f.bot.public_key(), "").expect("signable");
        let tag = Attestation {
            owner: f.owner.public_key(),
            ..forged
        }
        .to_tag();
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::BadSignature)
        );
    }

    #[test]
    fn attestation_minted_for_another_bot_is_bad_signature() {
        let f = family();
        let tag = Attestation::sign(&f.owner, &f.stranger.public_key(), "")
            .expect("signable")
            .to_tag();
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::BadSignature)
        );
    }

    #[test]
    fn expired_attestation_is_conditions_unmet() {
        let f = family();
        let tag = Attestation::sign(&f.owner, &f.bot.public_key(), &format!("created_at<{T}"))
            .expect("signable")
            .to_tag();
        assert_eq!(verify_tag(&tag, &f, Kind::TextNote, at(T - 1)), Ok(()));
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::ConditionsUnmet)
        );
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T + 1)),
            Err(AttestationError::ConditionsUnmet)
        );
    }

    #[test]
    fn not_yet_valid_attestation_is_conditions_unmet() {
        let f = family();
        let tag = Attestation::sign(&f.owner, &f.bot.public_key(), &format!("created_at>{T}"))
            .expect("signable")
            .to_tag();
        assert_eq!(verify_tag(&tag, &f, Kind::TextNote, at(T + 1)), Ok(()));
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::ConditionsUnmet)
        );
    }

    #[test]
    fn kind_clause_refuses_other_kinds() {
        let f = family();
        let tag = Attestation::sign(&f.owner, &f.bot.public_key(), "kind=9")
            .expect("signable")
            .to_tag();
        assert_eq!(verify_tag(&tag, &f, Kind::from(9), at(T)), Ok(()));
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::ConditionsUnmet)
        );
    }

    #[test]
    fn several_kind_clauses_are_all_required() {
        let conditions = Conditions::parse("kind=1&kind=9").expect("parses");
        assert!(!conditions.allow(Kind::TextNote, at(T)));
        assert!(!conditions.allow(Kind::from(9), at(T)));
        let conditions = Conditions::parse("kind=1&kind=1").expect("parses");
        assert!(conditions.allow(Kind::TextNote, at(T)));
    }

    #[test]
    fn self_attestation_is_refused() {
        let f = family();
        let tag = Attestation::sign(&f.bot, &f.bot.public_key(), "")
            .expect("signable")
            .to_tag();
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::SelfAttested)
        );
    }

    #[test]
    fn tampered_conditions_are_bad_signature() {
        let f = family();
        let genuine = Attestation::sign(&f.owner, &f.bot.public_key(), "kind=9").expect("signable");
        let signature = genuine.signature.to_string();
        let tag = auth_tag(&f.owner.public_key().to_hex(), "kind=1", &signature);
        assert_eq!(
            verify_tag(&tag, &f, Kind::TextNote, at(T)),
            Err(AttestationError::BadSignature)
        );
        let widened = auth_tag(&f.owner.public_key().to_hex(), "", &signature);
        assert_eq!(
            verify_tag(&widened, &f, Kind::TextNote, at(T)),
            Err(AttestationError::BadSignature)
        );
    }

    #[test]
    fn unknown_clause_invalidates_the_attestation() {
        let f = family();
        let signature = "00".repeat(SIGNATURE_BYTES);
        let tag = auth_tag(&f.owner.public_key().to_hex(), "kind=1&relay=wss://x", &signature);
        assert_eq!(
            Attestation::from_tag(&tag),
            Some(Err(AttestationError::UnknownClause("relay=wss://x".to_owned())))
        );
        assert_eq!(
            Attestation::sign(&f.owner, &f.bot.public_key(), "expires=1"),
            Err(AttestationError::UnknownClause("expires=1".to_owned()))
        );
    }

    #[test]
    fn malformed_fields_are_refused() {
        let f = family();
        let owner = f.owner.public_key().to_hex();
        let signature = Attestation::sign(&f.owner, &f.bot.public_key(), "")
            .expect("signable")
            .signature
            .to_string();
        let malformed = [
            auth_tag("zz", "", &signature),
            auth_tag(&owner[..62], "", &signature),
            auth_tag(&owner.to_uppercase(), "", &signature),
            auth_tag(&owner, "", "not hex"),
            auth_tag(&owner, "", &signature[..126]),
            auth_tag(&owner, "", &format!("{signature}00")),
            auth_tag(&owner, "kind=", &signature),
            auth_tag(&owner, "kind=+1", &signature),
            auth_tag(&owner, "kind=70000", &signature),
            auth_tag(&owner, "created_at<-1", &signature),
            auth_tag(&owner, "kind=1&", &signature),
            auth_tag(&owner, &"kind=1&".repeat(MAX_CONDITIONS_BYTES), &signature),
            Tag::parse(["auth", owner.as_str(), ""]).expect("non-empty tag"),
            Tag::parse(["auth", owner.as_str(), "", signature.as_str(), "extra"]).expect("non-empty tag"),
            Tag::parse(["auth"]).expect("non-empty tag"),
        ];
        for tag in &malformed {
            assert!(
                matches!(
                    Attestation::from_tag(tag),
                    Some(Err(AttestationError::Malformed(_)))
                ),
                "{tag:?} should be malformed"
            );
        }
    }

    #[test]
    fn owner_that_is_not_a_curve_point_is_malformed() {
        // x = 5 has no point on secp256k1.
        let not_a_point = format!("{}05", "00".repeat(PUBLIC_KEY_BYTES - 1));
        let tag = auth_tag(&not_a_point, "", &"00".repeat(SIGNATURE_BYTES));
        assert!(matches!(
            Attestation::from_tag(&tag),
            Some(Err(AttestationError::Malformed(_)))
        ));
    }

    #[test]
    fn other_tags_are_not_attestations() {
        let f = family();
        assert_eq!(
            Attestation::from_tag(&Tag::public_key(f.owner.public_key())),
            None
        );
        let tags = [
            Tag::public_key(f.owner.public_key()),
            Tag::parse(["t", "auth"]).expect("tag"),
        ];
        assert_eq!(
            verify_tags(
                &tags,
                &f.bot.public_key(),
                &f.owner.public_key(),
                Kind::TextNote,
                at(T)
            ),
            None
        );
    }

    #[test]
    fn verify_tags_finds_the_one_good_tag_among_bad_ones() {
        let f = family();
        let bot = f.bot.public_key();
        let good = Attestation::sign(&f.owner, &bot, "kind=1")
            .expect("signable")
            .to_tag();
        let tags = [
            Tag::public_key(f.owner.public_key()),
            auth_tag("zz", "", "zz"),
            Attestation::sign(&f.stranger, &bot, "")
                .expect("signable")
                .to_tag(),
            Attestation::sign(&f.owner, &bot, "kind=9")
                .expect("signable")
                .to_tag(),
            good,
            Attestation::sign(&f.bot, &bot, "").expect("signable").to_tag(),
        ];
        let verdict = verify_tags(&tags, &bot, &f.owner.public_key(), Kind::TextNote, at(T));
        assert_eq!(verdict, Some(Ok(())));
    }

    #[test]
    fn verify_tags_reports_the_most_telling_error() {
        let f = family();
        let bot = f.bot.public_key();
        let owner = f.owner.public_key();
        let malformed = auth_tag("zz", "", "zz");
        let wrong_owner = Attestation::sign(&f.stranger, &bot, "")
            .expect("signable")
            .to_tag();
        let unmet = Attestation::sign(&f.owner, &bot, "kind=9")
            .expect("signable")
            .to_tag();
        let tags = [malformed.clone(), wrong_owner.clone(), unmet];
        assert_eq!(
            verify_tags(&tags, &bot, &owner, Kind::TextNote, at(T)),
            Some(Err(AttestationError::ConditionsUnmet))
        );
        let tags = [wrong_owner, malformed.clone()];
        assert_eq!(
            verify_tags(&tags, &bot, &owner, Kind::TextNote, at(T)),
            Some(Err(AttestationError::WrongOwner))
        );
        assert!(matches!(
            verify_tags([&malformed], &bot, &owner, Kind::TextNote, at(T)),
            Some(Err(AttestationError::Malformed(_)))
        ));
    }

    #[test]
    fn verify_tags_bounds_signature_work_per_event() {
        let f = family();
        let bot = f.bot.public_key();
        let forged = Attestation::sign(&f.stranger, &bot, "").expect("signable");
        let forged = Attestation {
            owner: f.owner.public_key(),
            ..forged
        }
        .to_tag();
        let good = Attestation::sign(&f.owner, &bot, "").expect("signable").to_tag();
        let mut tags = vec![forged; MAX_SIGNATURE_CHECKS_PER_EVENT];
        tags.push(good);
        assert_eq!(
            verify_tags(&tags, &bot, &f.owner.public_key(), Kind::TextNote, at(T)),
            Some(Err(AttestationError::BadSignature))
        );
    }
}
