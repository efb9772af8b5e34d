//! The owner's controls of a conversation's agent session: `!model`,
//! `!mode`, `!options`, `!set` and `!commands`, and the session's side of
//! `!status`.
//!
//! `!set NAME VALUE` is `!model`'s way for every config option the agent
//! offers (a reasoning effort, a boolean such as a fast mode): kept with
//! the conversation (as the choice of kind `option:ID`; an option that is
//! the session's model or mode is kept as `!model` / `!mode` keep it, so
//! the two ways agree) and applied as the choices below are.
//! `!commands` reads the agent's slash commands from the same record of
//! what the agent offered, refreshed when a turn leases the session and
//! when it lets it go.
//!
//! Owns what those commands answer and how the owner's choice reaches the
//! agent; the choice itself is kept with the conversation in the store.
//! When a choice takes effect:
//! - At the start of the conversation's next turn, right after the lease,
//!   wherever the session does not already hold it. A choice made while a
//!   turn runs waits for that: ACP would let it change mid-turn, but the
//!   turn in flight was asked of what the owner had chosen then, and only
//!   its driver speaks to the agent.
//! - Again on every session that does not hold it: a session resumed or
//!   loaded by a fresh agent process (a crash, an idle reap, a daemon
//!   restart), and the fresh session after `!rotate`. The choice belongs to
//!   the conversation, not to one session.
//! - Before a conversation's first turn no session exists: the agent's
//!   choices are known only from what it offered another conversation
//!   (said so), and a choice is kept and checked when the session starts.
//!
//! A choice the agent does not offer, or refuses, at a turn's start is
//! dropped (logged), and the owner is told once, in the turn's thread; the
//! agent's own value stays.
//!
//! Without the owner's `!mode`, a session starts in the mode the operator's
//! `--permission-policy` wants (`pool::policy_mode`: under ask-owner the
//! agent's ask-every-time mode, not a self-approving `auto`), set when the
//! lease opened the session. Only then: a mode the agent or an approved
//! question moves to later in the live session stays until it ends.

use acp_bridge_core::mention::{ConversationKey, Mention};
use acp_bridge_core::slash;
use acp_client::{
    AgentClient, AvailableCommand, Control, ControlKind, PermissionPolicy, SessionId, SessionOption,
};
use serde::{Deserialize, Serialize};

use super::notices::Notices;
use super::steer_strategy::SteerMethod;
use crate::agents::pool::{Lease, policy_mode};
use crate::outbound::reply::Replier;
use crate::state::store::Controls;

/// What the agent offered a conversation at its last turn's start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Offer {
    model: Option<Control>,
    mode: Option<Control>,
    /// How mid-turn mentions reach its turns ([`SteerMethod::as_str`]).
    steer: Option<String>,
    /// Every config option (`!options`, `!set`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    options: Vec<SessionOption>,
    /// The agent's slash commands; `None` until it advertised them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commands: Option<Vec<AvailableCommand>>,
    /// The agent profile the session runs on (`!commands` before a
    /// conversation's first turn reads the profile's latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    profile: Option<String>,
}

/// An offer found for a conversation, and whose it is.
#[derive(Debug)]
struct Found {
    offer: Offer,
    /// The conversation's own; else another's, standing in before its
    /// first turn.
    own: bool,
}

impl Offer {
    /// The conversation's own offer, else another conversation's.
    fn read(controls: &Controls, key: &ConversationKey) -> Option<Found> {
        if let Some(offer) = Self::parse(controls.offer(Some(key))) {
            return Some(Found { offer, own: true });
        }
        Self::parse(controls.offer(None)).map(|offer| Found { offer, own: false })
    }

    /// The conversation's own offer only.
    fn read_own(controls: &Controls, key: &ConversationKey) -> Option<Offer> {
        Self::read(controls, key).and_then(|found| found.own.then_some(found.offer))
    }

    fn parse(stored: crate::state::store::Result<Option<String>>) -> Option<Offer> {
        let text = stored
            .inspect_err(|error| tracing::warn!(%error, "cannot read what the agent offered"))
            .ok()??;
        serde_json::from_str(&text).ok()
    }

    /// The latest offer recorded for the agent profile `profile`.
    fn of_profile(controls: &Controls, profile: &str) -> Option<Offer> {
        Self::parse(controls.offer_of_profile(profile))
    }

    /// The option `word` names, if the agent offers it.
    fn option(&self, word: &str) -> Option<&SessionOption> {
        self.options.iter().find(|option| option.named(word))
    }

    /// The control kind (`!model`, `!mode`) `option` is, if it is one.
    fn kind_of(&self, option: &SessionOption) -> Option<ControlKind> {
        ControlKind::ALL.into_iter().find(|kind| {
            self.control(*kind)
                .is_some_and(|control| control.route == option.control.route)
        })
    }

    /// Takes in what the session now says of its options and commands
    /// (what it has not described stays as last seen).
    fn refresh(&mut self, client: &AgentClient, session: &SessionId, profile: &str) {
        let options = client.session_controls(session).options();
        if !options.is_empty() {
            self.options = options;
        }
        if let Some(commands) = client.session_commands(session) {
            self.commands = Some(commands);
        }
        self.profile = Some(profile.to_owned());
    }

    fn keep(&self, controls: &Controls, key: &ConversationKey) {
        let text = serde_json::to_string(self).expect("an offer serializes");
        if let Err(error) = controls.keep_offer(key, &text) {
            tracing::warn!(conversation = %key, %error, "cannot keep what the agent offered");
        }
    }

    fn control(&self, kind: ControlKind) -> Option<&Control> {
        self.slot(kind).as_ref()
    }

    fn slot(&self, kind: ControlKind) -> &Option<Control> {
        match kind {
            ControlKind::Model => &self.model,
            ControlKind::Mode => &self.mode,
        }
    }

    fn slot_mut(&mut self, kind: ControlKind) -> &mut Option<Control> {
        match kind {
            ControlKind::Model => &mut self.model,
            ControlKind::Mode => &mut self.mode,
        }
    }
}

/// `!model [ID]` / `!mode [ID]` in the conversation `key`: the answer.
pub(crate) fn command(
    controls: &Controls,
    key: &ConversationKey,
    kind: ControlKind,
    choice: Option<&str>,
    turn_running: bool,
) -> String {
    let found = Offer::read(controls, key);
    match choice {
        None => list(kind, found, chosen(controls, key, kind)),
        Some(value) => choose(controls, key, kind, value, found, turn_running),
    }
}

fn list(kind: ControlKind, found: Option<Found>, chosen: Option<String>) -> String {
    let name = kind.as_str();
    let pending = |current: Option<&str>| match &chosen {
        Some(chosen) if current != Some(chosen.as_str()) => {
            format!("\nChosen: {chosen}; it applies from this conversation's next turn.")
        }
        _ => String::new(),
    };
    let Some(Found { offer, own }) = found else {
        return format!(
            "The agent has not told its {name}s yet: it does when this conversation's session starts (its first turn).{}",
            pending(None)
        );
    };
    let Some(control) = offer.control(kind) else {
        return format!("This agent offers no {name} choice.");
    };
    let heading = if own {
        format!(
            "{}s of this conversation's session (current marked *):",
            capitalized(name)
        )
    } else {
        format!(
            "{}s the agent offered another conversation (this one has no session yet; current marked *):",
            capitalized(name)
        )
    };
    let lines: Vec<String> = control
        .choices
        .iter()
        .map(|choice| {
            let mark = if control.current.as_ref() == Some(&choice.id) {
                "* "
            } else {
                "- "
            };
            if choice.name == choice.id {
                format!("{mark}{}", choice.id)
            } else {
                format!("{mark}{} ({})", choice.id, choice.name)
            }
        })
        .collect();
    format!(
        "{heading}\n{}\nChoose with !{name} ID.{}",
        lines.join("\n"),
        pending(control.current.as_deref())
    )
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn choose(
    controls: &Controls,
    key: &ConversationKey,
    kind: ControlKind,
    value: &str,
    found: Option<Found>,
    turn_running: bool,
) -> String {
    let name = kind.as_str();
    if let Some(found) = &found {
        match found.offer.control(kind) {
            None => return format!("This agent offers no {name} choice, so there is nothing to set."),
            Some(control) if !control.offers(value) => {
                return format!("Unknown {name} `{value}`. Valid: {}.", valid(control));
            }
            Some(_) => {}
        }
    }
    if let Err(error) = controls.choose(key, name, value) {
        tracing::error!(conversation = %key, %error, "cannot keep the owner's choice");
        return format!("Sorry, I could not keep that {name} choice: {error}.");
    }
    tracing::info!(conversation = %key, kind = name, value, "the owner chose");
    let when = match found {
        _ if turn_running => format!("from the next turn (the turn in flight keeps its {name})"),
        Some(Found { own: true, .. }) => "from this conversation's next turn".to_owned(),
        Some(Found { own: false, .. }) => "when this conversation's session starts".to_owned(),
        None => format!(
            "when this conversation's session starts (checked then: the agent has not told its {name}s yet)"
        ),
    };
    format!("{} set to {value}; it will apply {when}.", capitalized(name))
}

fn valid(control: &Control) -> String {
    let ids: Vec<&str> = control.choices.iter().map(|choice| choice.id.as_str()).collect();
    ids.join(", ")
}

fn chosen(controls: &Controls, key: &ConversationKey, kind: ControlKind) -> Option<String> {
    controls
        .chosen(key, kind.as_str())
        .inspect_err(|error| tracing::warn!(conversation = %key, %error, "cannot read the owner's choice"))
        .ok()
        .flatten()
}

/// At a turn's start, on its leased session: [`align`]s it (in the mode
/// `policy` wants when the lease opened the session), and tells the
/// owner in the thread of `anchor` (the turn's newest mention) of each
/// choice that could not apply. Takes the store and the replier, not the
/// driver's `TurnServices`, since the driver calls it (no import loop).
pub(crate) async fn on_lease(
    controls: &Controls,
    replier: &Replier,
    key: &ConversationKey,
    leased: Leased<'_>,
    steer: SteerMethod,
    policy: PermissionPolicy,
    anchor: Option<&Mention>,
) {
    let starts = leased.lease.opened.then_some(policy);
    let notes = align(controls, key, leased, steer, starts).await;
    if let Some(anchor) = anchor {
        let notices = Notices::new(replier.clone());
        for note in notes {
            notices.inform(anchor.clone(), note);
        }
    }
}

/// Records what the agent offers the session, and applies the owner's
/// choices the session does not hold; on a session that starts under
/// `starts` (a permission policy), the policy's mode when the owner chose
/// none. Returns what the owner must be told (a choice that could not
/// apply).
async fn align(
    controls: &Controls,
    key: &ConversationKey,
    leased: Leased<'_>,
    steer: SteerMethod,
    starts: Option<PermissionPolicy>,
) -> Vec<String> {
    let (client, session) = (&leased.lease.client, &leased.lease.session);
    let described = client.session_controls(session);
    let kept = Offer::read_own(controls, key);
    let mut offer = Offer {
        model: described.control(ControlKind::Model),
        mode: described.control(ControlKind::Mode),
        steer: Some(steer.as_str().to_owned()),
        options: kept.as_ref().map(|kept| kept.options.clone()).unwrap_or_default(),
        commands: kept.as_ref().and_then(|kept| kept.commands.clone()),
        profile: None,
    };
    offer.refresh(client, session, leased.profile);
    if described.is_empty()
        && let Some(kept) = &kept
    {
        // A reopened session the agent described nothing of: what it
        // offered before still names the choices and how to set them, but
        // not what the session holds now.
        for kind in ControlKind::ALL {
            *offer.slot_mut(kind) = kept.slot(kind).clone().map(|control| Control {
                current: None,
                ..control
            });
        }
        for option in &mut offer.options {
            option.control.current = None;
        }
    }
    let mut notes = Vec::new();
    if let Some(policy) = starts
        && chosen(controls, key, ControlKind::Mode).is_none()
    {
        start_in_policy_mode(client, session, &mut offer, policy).await;
    }
    for kind in ControlKind::ALL {
        let Some(wanted) = chosen(controls, key, kind) else {
            continue;
        };
        let name = kind.as_str();
        let applied = match offer.slot_mut(kind) {
            None => Err(format!("this agent offers no {name} choice")),
            Some(control) if !control.offers(&wanted) => {
                Err(format!("the agent does not offer it (valid: {})", valid(control)))
            }
            Some(control) if control.current.as_deref() == Some(wanted.as_str()) => continue,
            Some(control) => match client.set_control(session, &control.route, &wanted).await {
                Ok(()) => {
                    control.current = Some(wanted.clone());
                    Ok(())
                }
                Err(error) => Err(format!("the agent refused it ({error})")),
            },
        };
        match applied {
            Ok(()) => {
                tracing::info!(conversation = %key, session = %session, kind = name, value = %wanted, "applied the owner's choice to the session");
            }
            Err(why) => {
                tracing::warn!(conversation = %key, session = %session, kind = name, value = %wanted, %why, "cannot apply the owner's choice; dropped it");
                // The owner may have chosen again while this one was tried:
                // that newer choice stays, and is what the next turn applies.
                match controls.drop_if_still(key, name, &wanted) {
                    Ok(true) => notes.push(format!(
                        "Your {name} choice `{wanted}` could not be applied: {why}. The agent's own {name} is used; choose again with !{name}."
                    )),
                    Ok(false) => {}
                    Err(error) => tracing::warn!(conversation = %key, %error, "cannot drop the owner's choice"),
                }
            }
        }
    }
    notes.extend(apply_options(controls, key, client, session, &offer).await);
    offer.refresh(client, session, leased.profile);
    if kept.as_ref() != Some(&offer) {
        offer.keep(controls, key);
    }
    notes
}

/// A turn's leased session, and the agent profile it runs on.
#[derive(Clone, Copy)]
pub(crate) struct Leased<'a> {
    pub lease: &'a Lease,
    pub profile: &'a str,
}

/// The kind under which `!set` keeps its choice of option `id`.
fn option_kind(id: &str) -> String {
    format!("option:{id}")
}

/// Applies the owner's `!set` choices the session does not hold (the
/// options that are its model or mode were applied as those); returns the
/// notes of those that could not apply (dropped, as `!model`'s are).
async fn apply_options(
    controls: &Controls,
    key: &ConversationKey,
    client: &AgentClient,
    session: &SessionId,
    offer: &Offer,
) -> Vec<String> {
    let mut notes = Vec::new();
    for option in offer
        .options
        .iter()
        .filter(|option| offer.kind_of(option).is_none())
    {
        let kind = option_kind(&option.id);
        let Some(wanted) = controls
            .chosen(key, &kind)
            .inspect_err(
                |error| tracing::warn!(conversation = %key, %error, "cannot read the owner's choice"),
            )
            .ok()
            .flatten()
        else {
            continue;
        };
        let control = &option.control;
        if control.current.as_deref() == Some(wanted.as_str()) {
            continue;
        }
        let why = if !control.offers(&wanted) {
            format!("the agent does not offer it (valid: {})", valid(control))
        } else {
            match client.set_control(session, &control.route, &wanted).await {
                Ok(()) => {
                    tracing::info!(conversation = %key, session = %session, option = %option.id, value = %wanted, "applied the owner's option to the session");
                    continue;
                }
                Err(error) => format!("the agent refused it ({error})"),
            }
        };
        tracing::warn!(conversation = %key, session = %session, option = %option.id, value = %wanted, %why, "cannot apply the owner's option; dropped it");
        if let Ok(true) = controls.drop_if_still(key, &kind, &wanted) {
            notes.push(format!(
                "Your choice `{wanted}` for {} could not be applied: {why}. The agent's own value is used; choose again with !set.",
                option.id
            ));
        }
    }
    notes
}

/// When a turn lets its session go: keeps what the session now says of
/// its options and commands (an agent advertises its commands after the
/// session opened, often after the lease read it), for `!options` and
/// `!commands` between turns and after a restart.
pub(crate) fn on_release(controls: &Controls, key: &ConversationKey, leased: Leased<'_>) {
    let Some(kept) = Offer::read_own(controls, key) else {
        return;
    };
    let mut offer = kept.clone();
    offer.refresh(&leased.lease.client, &leased.lease.session, leased.profile);
    if offer != kept {
        offer.keep(controls, key);
    }
}

/// `!options`: every option of the conversation's session with its value
/// and choices.
pub(crate) fn options(controls: &Controls, key: &ConversationKey) -> String {
    let Some(Found { offer, own }) = Offer::read(controls, key) else {
        return "The agent has not told its options yet: it does when this conversation's session starts (its first turn).".to_owned();
    };
    if offer.options.is_empty() {
        return "This agent offers no config options (see !model and !mode).".to_owned();
    }
    let heading = if own {
        "Options of this conversation's session (set with !set NAME VALUE):"
    } else {
        "Options the agent offered another conversation (this one has no session yet; set with !set NAME VALUE):"
    };
    let lines: Vec<String> = offer
        .options
        .iter()
        .map(|option| {
            let control = &option.control;
            let chosen = match offer.kind_of(option) {
                Some(kind) => chosen(controls, key, kind),
                None => controls.chosen(key, &option_kind(&option.id)).ok().flatten(),
            };
            let current = control.current.as_deref().unwrap_or("unknown");
            let pending = match chosen {
                Some(chosen) if control.current.as_deref() != Some(chosen.as_str()) => {
                    format!(" (chosen: {chosen}, from the next turn)")
                }
                _ => String::new(),
            };
            let about = match (&option.category, option.name == option.id) {
                (Some(category), true) => format!(" ({category})"),
                (Some(category), false) => format!(" ({}, {category})", option.name),
                (None, true) => String::new(),
                (None, false) => format!(" ({})", option.name),
            };
            format!("- {}{about}: {current}{pending} [{}]", option.id, valid(control))
        })
        .collect();
    format!("{heading}\n{}", lines.join("\n"))
}

/// `!set NAME VALUE`: keeps the owner's choice for one option; the answer.
/// `words` are NAME's then VALUE's (at least two): NAME is the first run
/// of them that names an option and leaves a value it takes (a name may
/// have spaces), else the first that names one.
pub(crate) fn set(controls: &Controls, key: &ConversationKey, words: &[&str], turn_running: bool) -> String {
    let Some(found) = Offer::read(controls, key) else {
        return "The agent has not told its options yet: it does when this conversation's session starts (its first turn); set one after it.".to_owned();
    };
    let names = || {
        let ids: Vec<&str> = found
            .offer
            .options
            .iter()
            .map(|option| option.id.as_str())
            .collect();
        ids.join(", ")
    };
    if found.offer.options.is_empty() {
        return "This agent offers no config options, so there is nothing to set.".to_owned();
    }
    let splits = || {
        (1..words.len()).filter_map(|split| {
            let option = found.offer.option(&words[..split].join(" "))?;
            Some((option, words[split..].join(" ")))
        })
    };
    let named = splits()
        .find(|(option, value)| option.choice(value).is_some())
        .or_else(|| splits().next());
    let Some((option, value)) = named else {
        return format!("Unknown option `{}`. Valid: {}.", words[0], names());
    };
    let value = value.as_str();
    let Some(choice) = option.choice(value) else {
        return format!(
            "`{value}` is not a value of {}. Valid: {}.",
            option.id,
            valid(&option.control)
        );
    };
    let choice = choice.id.clone();
    if let Some(kind) = found.offer.kind_of(option) {
        return choose(controls, key, kind, &choice, Some(found), turn_running);
    }
    if let Err(error) = controls.choose(key, &option_kind(&option.id), &choice) {
        tracing::error!(conversation = %key, %error, "cannot keep the owner's choice");
        return format!("Sorry, I could not keep that choice: {error}.");
    }
    tracing::info!(conversation = %key, option = %option.id, value = %choice, "the owner set an option");
    let when = match found.own {
        _ if turn_running => "from the next turn (the turn in flight keeps its value)",
        true => "from this conversation's next turn",
        false => "when this conversation's session starts",
    };
    format!("{} set to {choice}; it will apply {when}.", option.id)
}

/// `!commands`: the agent's slash commands, from this conversation's
/// session, else from the latest session of its agent profile.
pub(crate) fn commands(controls: &Controls, key: &ConversationKey, profile: &str) -> String {
    let own = Offer::read_own(controls, key).and_then(|offer| offer.commands);
    let (commands, heading) = match own {
        Some(commands) => (commands, "Commands of this conversation's agent session"),
        None => match Offer::of_profile(controls, profile).and_then(|offer| offer.commands) {
            Some(commands) => (
                commands,
                "Commands the agent last advertised (this conversation has no session yet)",
            ),
            None => {
                return "The agent has not told its commands yet: it does once a session starts (this conversation's first turn).".to_owned();
            }
        },
    };
    if commands.is_empty() {
        return "This agent offers no slash commands.".to_owned();
    }
    format!(
        "{heading}; send one as the whole message, /name and what it takes:\n{}",
        slash::listing(&commands)
    )
}

/// Sets the mode `policy` wants (see `pool::policy_mode`) on a session
/// that just started, when the session does not hold it already. A
/// refusal is logged and the agent's mode stays: the operator learns it
/// from the log and `!status`, and the turn runs all the same.
async fn start_in_policy_mode(
    client: &AgentClient,
    session: &SessionId,
    offer: &mut Offer,
    policy: PermissionPolicy,
) {
    let Some(control) = offer.mode.as_mut() else {
        return;
    };
    let Some(wanted) = policy_mode(policy, control) else {
        return;
    };
    if control.current.as_deref() == Some(wanted) {
        return;
    }
    let was = control.current.clone().unwrap_or_default();
    match client.set_control(session, &control.route, wanted).await {
        Ok(()) => {
            tracing::info!(session = %session, mode = wanted, was, "session started in the permission policy's mode");
            control.current = Some(wanted.to_owned());
        }
        Err(error) => {
            tracing::warn!(session = %session, mode = wanted, was, %error, "the agent refused the permission policy's mode; its own stays");
        }
    }
}

/// `!status`'s words for the conversation's model, mode and steer path.
pub(crate) fn describe(controls: &Controls, key: &ConversationKey) -> String {
    let Some(offer) = Offer::read_own(controls, key) else {
        return String::new();
    };
    let mut parts = Vec::new();
    for kind in ControlKind::ALL {
        let name = kind.as_str();
        let current = offer.control(kind).and_then(|control| control.current.clone());
        let part = match (current, chosen(controls, key, kind)) {
            (Some(current), Some(chosen)) if current != chosen => {
                format!("{name} {current} (chosen: {chosen}, from the next turn)")
            }
            (Some(current), _) => format!("{name} {current}"),
            (None, Some(chosen)) => format!("{name} {chosen} (chosen)"),
            (None, None) => continue,
        };
        parts.push(part);
    }
    if let Some(steer) = &offer.steer {
        parts.push(format!(
            "mid-turn messages steer via {steer} (cancel + merge when refused)"
        ));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(" Its session: {}.", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use acp_client::{ControlChoice, ControlRoute};

    use super::*;
    use crate::state::store::scratch::ScratchDir;

    fn models(current: &str) -> Control {
        Control {
            route: ControlRoute::ConfigOption {
                config_id: "model".into(),
            },
            current: Some(current.into()),
            choices: ["fast", "deep"]
                .map(|id| ControlChoice {
                    id: id.into(),
                    name: id.into(),
                })
                .to_vec(),
        }
    }

    fn offered(store: &Controls, key: &ConversationKey, model: Option<Control>) {
        let offer = Offer {
            model,
            mode: None,
            steer: Some("goose".into()),
            ..Offer::default()
        };
        offer.keep(store, key);
    }

    #[test]
    fn before_any_session_a_choice_is_kept_for_when_it_starts() {
        let dir = ScratchDir::new("controls-before");
        let store = Controls::new(std::sync::Arc::new(
            crate::state::store::Store::open(dir.path()).unwrap(),
        ));
        let key = ConversationKey::from_journal("dm:a");
        let listed = command(&store, &key, ControlKind::Model, None, false);
        assert!(listed.contains("has not told its models yet"), "{listed}");
        let set = command(&store, &key, ControlKind::Model, Some("deep"), false);
        assert!(
            set.contains("when this conversation's session starts (checked then"),
            "{set}"
        );
        assert_eq!(
            store
                .chosen(&ConversationKey::from_journal("dm:a"), "model")
                .unwrap()
                .as_deref(),
            Some("deep")
        );
        let listed = command(&store, &key, ControlKind::Model, None, false);
        assert!(listed.contains("Chosen: deep"), "{listed}");
    }

    #[test]
    fn another_conversations_offer_checks_a_new_one_and_says_so() {
        let dir = ScratchDir::new("controls-other");
        let store = Controls::new(std::sync::Arc::new(
            crate::state::store::Store::open(dir.path()).unwrap(),
        ));
        offered(
            &store,
            &ConversationKey::from_journal("dm:a"),
            Some(models("fast")),
        );
        let key = ConversationKey::from_journal("dm:b");
        let listed = command(&store, &key, ControlKind::Model, None, false);
        assert!(listed.contains("offered another conversation"), "{listed}");
        assert!(listed.contains("* fast\n- deep"), "{listed}");
        let unknown = command(&store, &key, ControlKind::Model, Some("huge"), false);
        assert_eq!(unknown, "Unknown model `huge`. Valid: fast, deep.");
        assert_eq!(
            store
                .chosen(&ConversationKey::from_journal("dm:b"), "model")
                .unwrap(),
            None
        );
        let no_modes = command(&store, &key, ControlKind::Mode, Some("code"), false);
        assert!(no_modes.contains("offers no mode choice"), "{no_modes}");
    }

    #[test]
    fn set_names_an_option_by_id_or_name_and_a_model_option_is_the_model_choice() {
        let dir = ScratchDir::new("controls-set");
        let store = Controls::new(std::sync::Arc::new(
            crate::state::store::Store::open(dir.path()).unwrap(),
        ));
        let key = ConversationKey::from_journal("dm:a");
        let none = set(&store, &key, &["effort", "high"], false);
        assert!(none.contains("has not told its options yet"), "{none}");
        let described = acp_client::SessionControls::from_result(&serde_json::json!({"configOptions": [
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "fast",
             "options": [{"value": "fast", "name": "Fast"}, {"value": "deep", "name": "Deep"}]},
            {"id": "effort", "name": "Effort", "category": "thought_level", "type": "select", "currentValue": "low",
             "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}]},
            {"id": "brief", "name": "Brief answers", "type": "boolean", "currentValue": false}
        ]}));
        let offer = Offer {
            model: described.control(ControlKind::Model),
            options: described.options(),
            ..Offer::default()
        };
        offer.keep(&store, &key);
        assert_eq!(
            set(&store, &key, &["speed", "1"], false),
            "Unknown option `speed`. Valid: model, effort, brief."
        );
        assert_eq!(
            set(&store, &key, &["effort", "max"], false),
            "`max` is not a value of effort. Valid: low, high."
        );
        let named = set(&store, &key, &["Brief", "answers", "TRUE"], true);
        assert!(
            named.starts_with("brief set to true; it will apply from the next turn"),
            "{named}"
        );
        assert_eq!(
            store.chosen(&key, "option:brief").unwrap().as_deref(),
            Some("true")
        );
        let model = set(&store, &key, &["model", "Deep"], false);
        assert!(model.starts_with("Model set to deep"), "{model}");
        assert_eq!(store.chosen(&key, "model").unwrap().as_deref(), Some("deep"));
        assert_eq!(store.chosen(&key, "option:model").unwrap(), None);
        let listed = options(&store, &key);
        assert!(
            listed
                .contains("- brief (Brief answers): false (chosen: true, from the next turn) [true, false]"),
            "{listed}"
        );
        assert!(
            listed.contains("- model (Model, model): fast (chosen: deep"),
            "{listed}"
        );
    }

    #[test]
    fn a_choice_during_a_turn_waits_for_the_next_and_status_says_so() {
        let dir = ScratchDir::new("controls-running");
        let store = Controls::new(std::sync::Arc::new(
            crate::state::store::Store::open(dir.path()).unwrap(),
        ));
        let key = ConversationKey::from_journal("dm:a");
        offered(&store, &key, Some(models("fast")));
        let set = command(&store, &key, ControlKind::Model, Some("deep"), true);
        assert!(set.contains("the turn in flight keeps its model"), "{set}");
        assert_eq!(
            describe(&store, &key),
            " Its session: model fast (chosen: deep, from the next turn), \
             mid-turn messages steer via goose (cancel + merge when refused)."
        );
    }
}
