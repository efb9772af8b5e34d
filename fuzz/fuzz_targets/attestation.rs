//! `attestation`: owner attestations (NIP-OA `auth` tags) as a stranger can
//! shape them, through `Attestation::from_tag`, `Attestation::verify`,
//! `verify_tags` and `Conditions::parse` / `Conditions::allow`.
//!
//! Tags are arbitrary fields, or tags minted by `Attestation::sign` with the
//! fixed keys of `Party` and then tampered with, so the signature check is
//! reached with genuine signatures too. Must hold for every input:
//! - nothing panics;
//! - conditions parse exactly when the README's grammar says they do
//!   (`&`-joined `kind=N`, `created_at<T`, `created_at>T`, at most 1 KiB),
//!   with the documented error, and `allow` means every clause holds;
//! - a tag that parses is canonical: writing it back gives the same fields;
//! - `verify` answers in its documented order (self-attestation, wrong
//!   owner, signature, conditions); a genuine attestation of the owner for
//!   this bot verifies exactly when its conditions allow the event; a
//!   minted tag altered in any way never verifies;
//! - `verify_tags` accepts an event exactly when one of its tags verifies
//!   on its own (within its budget of signature checks).

#![no_main]

use std::iter;

use acp_bridge::{Attestation, AttestationError, Conditions, verify_tags};
use acp_bridge_fuzz::{AttestationInput, AuthTag, Party, Tamper, Text};
use libfuzzer_sys::fuzz_target;
use nostr_sdk::{Kind, PublicKey, Tag, Timestamp};

/// Mirrors of the module's documented bounds.
const MAX_CONDITIONS_BYTES: usize = 1024;
const MAX_SIGNATURE_CHECKS_PER_EVENT: usize = 8;

fuzz_target!(|input: AttestationInput| {
    let kind = Kind::from(input.kind);
    let created_at = Timestamp::from_secs(input.created_at);
    check_conditions(input.conditions.as_str(), kind, created_at);

    let event = Event {
        bot: input.bot.keys().public_key(),
        owner: input.owner.keys().public_key(),
        kind,
        created_at,
    };
    let mut tags = Vec::new();
    let mut verdicts = Vec::new();
    for spec in iter::once(&input.tag).chain(&input.others.0) {
        let Some(built) = build(spec) else { continue };
        verdicts.push(check_tag(&built, &event, spec));
        tags.push(built.tag);
    }
    check_verify_tags(&tags, &verdicts, &event);
});

/// The event a tag is judged for, and the configured owner.
struct Event {
    bot: PublicKey,
    owner: PublicKey,
    kind: Kind,
    created_at: Timestamp,
}

/// A tag, and for a minted one that was not altered, who signed it for whom.
struct Built {
    tag: Tag,
    genuine: Option<(Party, Party)>,
}

fn build(spec: &AuthTag) -> Option<Built> {
    let fields: Vec<String> = match spec {
        AuthTag::Auth(fields) => iter::once("auth".to_owned())
            .chain(fields.0.iter().map(|field| field.0.clone()))
            .collect(),
        AuthTag::Other(fields) => fields.0.iter().map(|field| field.0.clone()).collect(),
        AuthTag::Minted {
            signer,
            subject,
            conditions,
            tamper,
        } => return mint(*signer, *subject, conditions, tamper),
    };
    let tag = Tag::parse(fields).ok()?;
    Some(Built { tag, genuine: None })
}

fn mint(signer: Party, subject: Party, conditions: &Text, tamper: &Tamper) -> Option<Built> {
    let minted = Attestation::sign(signer.keys(), &subject.keys().public_key(), conditions.as_str());
    assert_eq!(
        minted.is_ok(),
        Conditions::parse(conditions.as_str()).is_ok(),
        "sign refuses exactly the conditions that do not parse: {conditions:?}"
    );
    let minted = minted.ok()?.to_tag();
    let original = minted.as_slice().to_vec();
    let mut fields = original.clone();
    match tamper {
        Tamper::Untouched => {}
        Tamper::FlipByte { field, index, mask } => {
            let field = &mut fields[usize::from(*field) % original.len()];
            let mut bytes = field.clone().into_bytes();
            if !bytes.is_empty() {
                let at = usize::from(*index) % bytes.len();
                bytes[at] ^= mask;
            }
            *field = String::from_utf8_lossy(&bytes).into_owned();
        }
        Tamper::Conditions(text) => fields[2] = text.0.clone(),
        Tamper::ExtraField(text) => fields.push(text.0.clone()),
        Tamper::DropLast => {
            fields.pop();
        }
        Tamper::Uppercase { field } => {
            let field = &mut fields[usize::from(*field) % original.len()];
            *field = field.to_uppercase();
        }
    }
    let genuine = (fields == original).then_some((signer, subject));
    let tag = Tag::parse(fields).ok()?;
    Some(Built { tag, genuine })
}

/// Judges one tag on its own; returns its verdict as `verify_tags` would
/// count it (None: not an `auth` tag).
fn check_tag(built: &Built, event: &Event, spec: &AuthTag) -> Option<Result<(), AttestationError>> {
    let fields = built.tag.as_slice();
    let parsed = Attestation::from_tag(&built.tag);
    let Some(parsed) = parsed else {
        assert_ne!(fields[0], "auth", "an auth tag is recognised: {spec:?}");
        assert!(built.genuine.is_none(), "a minted tag is an auth tag: {spec:?}");
        return None;
    };
    assert_eq!(fields[0], "auth", "only auth tags are attestations: {spec:?}");
    let attestation = match parsed {
        Ok(attestation) => attestation,
        Err(error) => {
            assert!(
                built.genuine.is_none(),
                "a minted tag parses: {spec:?} gave {error}"
            );
            return Some(Err(error));
        }
    };
    assert_eq!(
        attestation.to_tag().as_slice(),
        fields,
        "parsing is strict, so a parsed tag writes back to the same fields: {spec:?}"
    );
    assert_eq!(
        Conditions::parse(&fields[2]).as_ref(),
        Ok(&attestation.conditions),
        "the tag's conditions are its third field: {spec:?}"
    );

    let verdict = attestation.verify(&event.bot, &event.owner, event.kind, event.created_at);
    let allowed = attestation.conditions.allow(event.kind, event.created_at);
    if attestation.owner == event.bot {
        assert_eq!(verdict, Err(AttestationError::SelfAttested), "{spec:?}");
    } else if attestation.owner != event.owner {
        assert_eq!(verdict, Err(AttestationError::WrongOwner), "{spec:?}");
    } else {
        match &verdict {
            Ok(()) => assert!(allowed, "verified although the conditions refuse: {spec:?}"),
            Err(AttestationError::ConditionsUnmet) => assert!(!allowed, "{spec:?}"),
            Err(AttestationError::BadSignature) => {}
            Err(other) => panic!("a parsed attestation of the owner failed with {other}: {spec:?}"),
        }
    }
    match built.genuine {
        Some((_, subject)) if attestation.owner == event.owner && attestation.owner != event.bot => {
            let expected = if subject.keys().public_key() != event.bot {
                Err(AttestationError::BadSignature)
            } else if allowed {
                Ok(())
            } else {
                Err(AttestationError::ConditionsUnmet)
            };
            assert_eq!(verdict, expected, "a genuine attestation: {spec:?}");
        }
        Some(_) => {}
        None => {
            if matches!(spec, AuthTag::Minted { .. }) {
                assert!(verdict.is_err(), "an altered attestation verified: {spec:?}");
            }
        }
    }
    Some(verdict)
}

fn check_verify_tags(tags: &[Tag], verdicts: &[Option<Result<(), AttestationError>>], event: &Event) {
    let verdict = verify_tags(tags, &event.bot, &event.owner, event.kind, event.created_at);
    let any_auth = verdicts.iter().any(Option::is_some);
    let any_valid = verdicts.iter().any(|verdict| matches!(verdict, Some(Ok(()))));
    // Tags that pass the cheap owner checks cost a signature check each.
    let naming_owner = verdicts
        .iter()
        .filter(|verdict| {
            matches!(
                verdict,
                Some(Ok(()) | Err(AttestationError::BadSignature | AttestationError::ConditionsUnmet))
            )
        })
        .count();
    match &verdict {
        None => assert!(!any_auth, "verify_tags saw no auth tag among {tags:?}"),
        Some(Ok(())) => assert!(any_valid, "verify_tags accepted, no tag verifies: {tags:?}"),
        Some(Err(error)) => {
            assert!(any_auth, "an error without an auth tag: {tags:?}");
            assert!(
                verdicts
                    .iter()
                    .any(|verdict| verdict.as_ref() == Some(&Err(error.clone()))),
                "verify_tags reported {error}, which no tag gave: {tags:?}"
            );
        }
    }
    if any_valid && naming_owner <= MAX_SIGNATURE_CHECKS_PER_EVENT {
        assert_eq!(
            verdict,
            Some(Ok(())),
            "a valid tag within budget is found: {tags:?}"
        );
    }
}

/// The README's grammar, as an independent oracle for `Conditions`.
fn check_conditions(raw: &str, kind: Kind, created_at: Timestamp) {
    let expected = expected_conditions(raw);
    let parsed = Conditions::parse(raw);
    match (&parsed, &expected) {
        (Ok(conditions), Ok(clauses)) => {
            assert_eq!(
                conditions.as_str(),
                raw,
                "conditions keep their text byte for byte"
            );
            let holds = clauses.iter().all(|clause| match *clause {
                Clause::Kind(expected) => kind.as_u16() == expected,
                Clause::Before(limit) => created_at.as_secs() < limit,
                Clause::After(limit) => created_at.as_secs() > limit,
            });
            assert_eq!(
                conditions.allow(kind, created_at),
                holds,
                "allow means every clause holds: {raw:?} for kind {kind} at {created_at}"
            );
        }
        (Err(error), Err(expected)) => assert!(
            same_error(error, expected),
            "Conditions::parse({raw:?}) gave {error:?}, the grammar says {expected:?}"
        ),
        _ => panic!("Conditions::parse({raw:?}) gave {parsed:?}, the grammar says {expected:?}"),
    }
}

/// Equal errors; `Malformed` ones match whatever their wording.
fn same_error(error: &AttestationError, expected: &AttestationError) -> bool {
    match (error, expected) {
        (AttestationError::Malformed(_), AttestationError::Malformed(_)) => true,
        (error, expected) => error == expected,
    }
}

#[derive(Debug, Clone, Copy)]
enum Clause {
    Kind(u16),
    Before(u64),
    After(u64),
}

fn expected_conditions(raw: &str) -> Result<Vec<Clause>, AttestationError> {
    if raw.len() > MAX_CONDITIONS_BYTES {
        return Err(AttestationError::Malformed("too long"));
    }
    if raw.is_empty() {
        return Ok(Vec::new());
    }
    raw.split('&')
        .map(|clause| {
            if clause.is_empty() {
                Err(AttestationError::Malformed("empty clause"))
            } else if let Some(number) = clause.strip_prefix("kind=") {
                digits(number)
                    .map(Clause::Kind)
                    .ok_or(AttestationError::Malformed("kind"))
            } else if let Some(number) = clause.strip_prefix("created_at<") {
                digits(number)
                    .map(Clause::Before)
                    .ok_or(AttestationError::Malformed("created_at"))
            } else if let Some(number) = clause.strip_prefix("created_at>") {
                digits(number)
                    .map(Clause::After)
                    .ok_or(AttestationError::Malformed("created_at"))
            } else {
                Err(AttestationError::UnknownClause(clause.to_owned()))
            }
        })
        .collect()
}

/// Plain ASCII decimal digits (leading zeros allowed), in range.
fn digits<T: TryFrom<u128>>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let trimmed = text.trim_start_matches('0');
    if trimmed.len() > 39 {
        return None;
    }
    let value = if trimmed.is_empty() {
        0
    } else {
        trimmed.parse::<u128>().ok()?
    };
    T::try_from(value).ok()
}
