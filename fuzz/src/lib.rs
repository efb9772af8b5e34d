//! Shared pieces of the fuzz targets: their structured inputs, the fixed
//! keys they sign with, and the byte encoding of those inputs.
//!
//! The inputs derive [`Arbitrary`], built from two leaves with a plain
//! layout ([`Text`] and [`List`]) instead of `String` and `Vec` (which take
//! their lengths from the end of the input). With that layout every input
//! can be written back to bytes ([`Encode`]), so `examples/seeds.rs` can
//! write seed corpora that decode to exactly the mentions and tags it means.
//! Every byte string decodes (missing bytes read as zeros), so libFuzzer
//! never wastes a mutation on an input the decoder refuses.

use std::fmt;
use std::sync::LazyLock;

use arbitrary::{Arbitrary, Result, Unstructured};
use nostr_sdk::{Keys, SecretKey};

/// Text: a little-endian `u16` byte length, then that many bytes (fewer
/// when the input ends first), read as lossy UTF-8.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Text(pub String);

impl Text {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text(text.to_owned())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl<'a> Arbitrary<'a> for Text {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let len = usize::from(u16::arbitrary(u)?).min(u.len());
        let bytes = u.bytes(len)?;
        Ok(Text(String::from_utf8_lossy(bytes).into_owned()))
    }
}

/// A list of at most `MAX` items: a `u8` count (taken modulo `MAX + 1`),
/// then the items.
#[derive(Clone, PartialEq, Eq)]
pub struct List<T, const MAX: usize>(pub Vec<T>);

impl<T, const MAX: usize> Default for List<T, MAX> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<T: fmt::Debug, const MAX: usize> fmt::Debug for List<T, MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl<'a, T: Arbitrary<'a>, const MAX: usize> Arbitrary<'a> for List<T, MAX> {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let count = usize::from(u8::arbitrary(u)?) % (MAX + 1);
        (0..count)
            .map(|_| T::arbitrary(u))
            .collect::<Result<_>>()
            .map(List)
    }
}

/// One of the three fixed identities the targets sign with.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party {
    Owner,
    Bot,
    Stranger,
}

impl Party {
    pub const ALL: [Party; 3] = [Party::Owner, Party::Bot, Party::Stranger];

    /// Fixed keys, so an input means the same thing in every run.
    pub fn keys(self) -> &'static Keys {
        static KEYS: LazyLock<[Keys; 3]> = LazyLock::new(|| {
            [1u8, 2, 3].map(|seed| {
                let secret = SecretKey::from_slice(&[seed; 32]).expect("a valid secret key");
                Keys::new(secret)
            })
        });
        &KEYS[self as usize]
    }
}

/// The input of the `attestation` target.
#[derive(Arbitrary, Debug, Clone, PartialEq)]
pub struct AttestationInput {
    /// The tag judged on its own.
    pub tag: AuthTag,
    /// The author of the event the tag is judged for.
    pub bot: Party,
    /// The owner the daemon is configured with.
    pub owner: Party,
    pub kind: u16,
    pub created_at: u64,
    /// Free text for `Conditions::parse` and `Conditions::allow`.
    pub conditions: Text,
    /// More tags of the same event, for `verify_tags` (with `tag` first).
    pub others: List<AuthTag, 9>,
}

/// One tag of an event, as the attestation code meets it.
#[derive(Arbitrary, Debug, Clone, PartialEq)]
pub enum AuthTag {
    /// `["auth", fields…]` with arbitrary fields.
    Auth(List<Text, 5>),
    /// A tag of arbitrary fields (an `auth` tag only if the first says so).
    Other(List<Text, 5>),
    /// A tag minted by `Attestation::sign`, then altered by `tamper`.
    Minted {
        signer: Party,
        subject: Party,
        conditions: Text,
        tamper: Tamper,
    },
}

/// How a minted tag is altered before it is judged.
#[derive(Arbitrary, Debug, Clone, PartialEq)]
pub enum Tamper {
    Untouched,
    /// XOR one byte of the field at `field` (index into the tag) with `mask`.
    FlipByte {
        field: u8,
        index: u16,
        mask: u8,
    },
    /// Replace the conditions (the signature no longer covers them).
    Conditions(Text),
    /// Append one more field.
    ExtraField(Text),
    /// Drop the last field.
    DropLast,
    /// Uppercase the field at `field`.
    Uppercase {
        field: u8,
    },
}

/// The input of the `event_to_prompt` target.
#[derive(Arbitrary, Debug, Clone, PartialEq)]
pub struct PromptInput {
    /// The batch the interrupted turn was working on.
    pub working_on: List<MentionInput, 3>,
    /// Mentions that arrived while it worked.
    pub new: List<MentionInput, 3>,
    /// `Framing::Interrupt` instead of `Framing::Steer` for the merged prompt.
    pub interrupt: bool,
    /// `SessionPolicy::Thread` instead of `SessionPolicy::Conversation`.
    pub thread_sessions: bool,
}

/// One mention as a person can shape it.
#[derive(Arbitrary, Debug, Clone, PartialEq)]
pub struct MentionInput {
    pub place: Place,
    pub author: Party,
    pub content: Text,
    /// Tags after the `h` tag of a group message.
    pub tags: List<List<Text, 4>, 4>,
    pub created_at: u32,
    pub from_owner: bool,
    pub from_sibling: bool,
}

/// Where a mention was written.
#[derive(Arbitrary, Debug, Clone, PartialEq)]
pub enum Place {
    /// A NIP-29 group message (kind 9) with `["h", channel]` as first tag.
    Group { channel: Text },
    /// A public note (kind 1).
    Note,
    /// A NIP-17 direct message (the unwrapped kind 14 rumor).
    Direct,
}

/// Writes a value back in the layout its [`Arbitrary`] impl reads.
pub trait Encode {
    fn encode(&self, out: &mut Vec<u8>);

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

/// The `u32` that derived `Arbitrary` maps to variant `index` of `count`
/// (it picks `(u32 * count) >> 32`).
fn encode_variant(index: u32, count: u32, out: &mut Vec<u8>) {
    let value = (u64::from(index) << 32).div_ceil(u64::from(count));
    let value = u32::try_from(value).expect("index < count");
    out.extend_from_slice(&value.to_le_bytes());
}

macro_rules! encode_le {
    ($($ty:ty),*) => {$(
        impl Encode for $ty {
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
encode_le!(u8, u16, u32, u64);

impl Encode for bool {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

impl Encode for Text {
    fn encode(&self, out: &mut Vec<u8>) {
        let len = u16::try_from(self.0.len()).expect("text of at most u16::MAX bytes");
        len.encode(out);
        out.extend_from_slice(self.0.as_bytes());
    }
}

impl<T: Encode, const MAX: usize> Encode for List<T, MAX> {
    fn encode(&self, out: &mut Vec<u8>) {
        assert!(self.0.len() <= MAX, "list longer than {MAX}");
        u8::try_from(self.0.len()).expect("short list").encode(out);
        for item in &self.0 {
            item.encode(out);
        }
    }
}

impl Encode for Party {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_variant(*self as u32, 3, out);
    }
}

impl Encode for AttestationInput {
    fn encode(&self, out: &mut Vec<u8>) {
        self.tag.encode(out);
        self.bot.encode(out);
        self.owner.encode(out);
        self.kind.encode(out);
        self.created_at.encode(out);
        self.conditions.encode(out);
        self.others.encode(out);
    }
}

impl Encode for AuthTag {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            AuthTag::Auth(fields) => {
                encode_variant(0, 3, out);
                fields.encode(out);
            }
            AuthTag::Other(fields) => {
                encode_variant(1, 3, out);
                fields.encode(out);
            }
            AuthTag::Minted {
                signer,
                subject,
                conditions,
                tamper,
            } => {
                encode_variant(2, 3, out);
                signer.encode(out);
                subject.encode(out);
                conditions.encode(out);
                tamper.encode(out);
            }
        }
    }
}

impl Encode for Tamper {
    fn encode(&self, out: &mut Vec<u8>) {
        const COUNT: u32 = 6;
        match self {
            Tamper::Untouched => encode_variant(0, COUNT, out),
            Tamper::FlipByte { field, index, mask } => {
                encode_variant(1, COUNT, out);
                field.encode(out);
                index.encode(out);
                mask.encode(out);
            }
            Tamper::Conditions(text) => {
                encode_variant(2, COUNT, out);
                text.encode(out);
            }
            Tamper::ExtraField(text) => {
                encode_variant(3, COUNT, out);
                text.encode(out);
            }
            Tamper::DropLast => encode_variant(4, COUNT, out),
            Tamper::Uppercase { field } => {
                encode_variant(5, COUNT, out);
                field.encode(out);
            }
        }
    }
}

impl Encode for PromptInput {
    fn encode(&self, out: &mut Vec<u8>) {
        self.working_on.encode(out);
        self.new.encode(out);
        self.interrupt.encode(out);
        self.thread_sessions.encode(out);
    }
}

impl Encode for MentionInput {
    fn encode(&self, out: &mut Vec<u8>) {
        self.place.encode(out);
        self.author.encode(out);
        self.content.encode(out);
        self.tags.encode(out);
        self.created_at.encode(out);
        self.from_owner.encode(out);
        self.from_sibling.encode(out);
    }
}

impl Encode for Place {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Place::Group { channel } => {
                encode_variant(0, 3, out);
                channel.encode(out);
            }
            Place::Note => encode_variant(1, 3, out),
            Place::Direct => encode_variant(2, 3, out),
        }
    }
}

/// Decodes `bytes` the way `fuzz_target!` does.
pub fn decode<'a, T: Arbitrary<'a>>(bytes: &'a [u8]) -> Result<T> {
    T::arbitrary_take_rest(Unstructured::new(bytes))
}
