//! `acp-bridge check`: is this configuration going to work?
//!
//! Validates the flags (the caller already did, with the daemon's own
//! rules), starts the agent once: `initialize`, authentication as the
//! daemon would do it, and one `session/new`; connects to every relay, and
//! sends it the daemon's own subscriptions (authenticating with the bot's
//! keys when the relay asks, NIP-42): a relay that refuses them leaves the
//! daemon deaf there however well it connects. Shows what the relays hold
//! of the bot's identity (profile, relay list, DM inbox) and what the
//! daemon would publish, and what each `--group`'s relay says of the group
//! (see `check_groups`). Prints one line per check
//! and a verdict. Nothing is published and no state is written.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use acp_bridge_core::choice::Choice;
use acp_bridge_core::mention::npub;
use acp_client::{AcpError, AgentClient, ClientConfig, ControlKind};
use nostr_sdk::prelude::{
    Client, Filter, Kind, MachineReadablePrefix, PublicKey, Relay, RelayMessage, RelayNotification, RelayUrl,
    SubscribeOptions, SubscriptionId, Timestamp,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::agents::pool::{
    AgentSettings, AuthChoice, AuthPolicy, PermissionPolicyArg, agent_command, policy_mode,
};
use crate::base::flags::flag_spelling;
use crate::config::Settings;
use crate::edge::embedded_relay::RelaySpec;
use crate::edge::signer::{BotSigner, SignerSource};
use crate::heart::profiles::DEFAULT_PROFILE;
use crate::intake::interest::Interest;
use crate::outbound::identity::{self, Held, Wanted};

use super::{added_relay, authenticating_client};

/// A relay that does not answer within this is reported unreachable.
const RELAY_CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// A relay that neither accepts (EOSE) nor refuses (CLOSED) the daemon's
/// subscriptions within this, authentication included, is reported silent.
const SUBSCRIPTION_CHECK_TIMEOUT: Duration = Duration::from_secs(15);
/// Agents may resolve providers and start extensions before answering.
const AGENT_CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// A failed agent gets this long to finish writing its stderr.
const AGENT_STDERR_GRACE: Duration = Duration::from_secs(2);
/// An agent whose stdin closed gets this long to exit before it is killed.
const AGENT_STOP_GRACE: Duration = Duration::from_secs(2);

/// A remote signer that does not answer within this is reported silent.
const SIGNER_CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs every check, printing as it goes; true when all passed.
pub async fn run(settings: &Settings) -> bool {
    let Some(signer) = open_signer(settings).await else {
        println!("verdict: NOT ready (see above)");
        return false;
    };
    println!(
        "config: ok (bot {}, owner {}, respond-to {}, multiple-event-handling {}, dedup {})",
        npub(&signer.public_key()),
        settings
            .gate
            .owner
            .as_ref()
            .map_or_else(|| "none".to_owned(), npub),
        flag_spelling(&settings.gate.respond_to),
        settings.turns.multiple_event_handling.word(),
        settings.turns.dedup.word(),
    );
    let secrets_ok = check_secret_files(settings);
    let mut agent_ok = true;
    for profile in settings.agent_profiles.all() {
        agent_ok &= check_agent(&profile.name, &profile.agent, settings.turns.permission_policy).await;
    }
    let mut relays_ok = true;
    let mut reachable = Vec::new();
    for relay in &settings.relays.bot {
        let connected = check_relay(relay).await;
        relays_ok &= connected;
        if connected && let RelaySpec::Url(url) = relay {
            reachable.push(url.clone());
            relays_ok &= check_subscriptions(settings, &signer, url).await;
        }
    }
    check_identity(settings, signer.public_key(), &reachable).await;
    super::check_groups::check_groups(settings, &signer).await;
    let ok = secrets_ok && agent_ok && relays_ok;
    println!(
        "verdict: {}",
        if ok {
            "ready to run"
        } else {
            "NOT ready (see above)"
        }
    );
    ok
}

/// The bot's signer; for a remote one, whether it answers (printed).
async fn open_signer(settings: &Settings) -> Option<BotSigner> {
    let stop = CancellationToken::new();
    let opened = tokio::time::timeout(
        SIGNER_CHECK_TIMEOUT,
        BotSigner::open(
            &settings.signer.source,
            &settings.state_dir,
            settings.signer.timeout,
            &stop,
        ),
    )
    .await;
    stop.cancel();
    match (opened, &settings.signer.source) {
        (Ok(Ok(signer)), SignerSource::Bunker(uri)) => {
            println!("signer: ok (remote signer {} answered)", uri.redacted());
            Some(signer)
        }
        (Ok(Ok(signer)), SignerSource::Keys(_)) => Some(signer),
        (Ok(Err(error)), _) => {
            println!("signer: {error}");
            None
        }
        (Err(_), _) => {
            println!(
                "signer: the remote signer did not answer within {}s (is it running, on the URI's relay, and has it approved this app?)",
                SIGNER_CHECK_TIMEOUT.as_secs()
            );
            None
        }
    }
}

/// A secret file other users can read is a leak waiting to happen: the
/// daemon only warns (see `SignerSettings::exposed_files`), `check` says
/// not ready.
fn check_secret_files(settings: &Settings) -> bool {
    for path in &settings.signer.exposed_files {
        println!(
            "secret file: FAILED `{}` can be read by other users",
            path.display()
        );
        println!("  hint: chmod 600 {}", path.display());
    }
    settings.signer.exposed_files.is_empty()
}

/// Starts agent profile `profile`'s agent once (the flags' one profile,
/// `default`, is not named).
async fn check_agent(profile: &str, agent: &AgentSettings, policy: PermissionPolicyArg) -> bool {
    let command = agent_command(agent, "check");
    let program = format!("`{} {}`", agent.command, agent.args.join(" "));
    let shown = if profile == DEFAULT_PROFILE {
        program
    } else {
        format!("profile {profile} {program}")
    };
    let config = ClientConfig {
        initialize_timeout: AGENT_CHECK_TIMEOUT,
        ..ClientConfig::default()
    };
    let client = match AgentClient::spawn(&command, config) {
        Ok(client) => client,
        Err(error) => {
            println!("agent: FAILED to start {shown}: {error}");
            println!("  hint: install the agent or point --agent-command at it (PATH is the daemon's PATH)");
            return false;
        }
    };
    let started = Instant::now();
    let verdict = match client.initialize().await {
        Ok(info) => {
            println!(
                "agent: ok {shown} answers ACP v{} as {} {} in {} ms (steering: {})",
                info.protocol_version,
                info.name.as_deref().unwrap_or("(unnamed)"),
                info.version.as_deref().unwrap_or(""),
                started.elapsed().as_millis(),
                if info.session_steering {
                    "`_session/steering`"
                } else {
                    "goose's steer is tried, cancel + merge otherwise"
                }
            );
            check_auth(agent, &client, &info, policy).await
        }
        Err(error) => {
            println!("agent: FAILED {shown}: {error}");
            let said = client.stderr_tail(AGENT_STDERR_GRACE).await;
            let said: Vec<&String> = said.iter().filter(|line| !line.trim().is_empty()).collect();
            if !said.is_empty() {
                println!("  the agent's stderr ended with:");
            }
            for line in said {
                println!("  | {line}");
            }
            false
        }
    };
    // Stopped before the verdict, the way the daemon stops an agent: its
    // end is no news to report after it.
    client.stop(AGENT_STOP_GRACE).await;
    verdict
}

/// Lists the agent's auth methods, authenticates as the daemon would, and
/// opens a session to prove the agent takes work; says the mode its
/// sessions run in under `policy`.
async fn check_auth(
    agent: &AgentSettings,
    client: &AgentClient,
    info: &acp_client::AgentInfo,
    policy: PermissionPolicyArg,
) -> bool {
    let offered: Vec<String> = info.auth_methods.iter().map(|method| method.describe()).collect();
    println!(
        "auth: the agent offers {}",
        if offered.is_empty() {
            "no method".to_owned()
        } else {
            offered.join(", ")
        }
    );
    let choice = AuthPolicy::new(agent).choose(info);
    if let AuthChoice::Method(method) = &choice {
        match client.authenticate(method).await {
            Ok(()) => println!("auth: ok, authenticated with `{method}`"),
            Err(error) => {
                println!("auth: FAILED with `{method}`: {error}");
                return false;
            }
        }
    }
    match client.new_session(&agent.cwd, Vec::new()).await {
        Ok(session) => {
            println!(
                "agent: ok, a session opens{}",
                session_mode(client, &session, policy)
            );
            true
        }
        Err(AcpError::Rpc { error, .. }) if error.code == acp_client::codes::AUTH_REQUIRED => {
            match choice {
                AuthChoice::Unresolved(why) => println!("auth: FAILED: {why}"),
                _ => println!("auth: FAILED: the agent still asks for authentication: {error}"),
            }
            false
        }
        Err(error) => {
            println!("agent: FAILED to open a session: {error}");
            false
        }
    }
}

/// The mode the daemon's sessions run in under `policy` (see
/// `pool::policy_mode`), as ` (mode …)`; empty when the agent offers no
/// modes.
fn session_mode(
    client: &AgentClient,
    session: &acp_client::SessionId,
    policy: PermissionPolicyArg,
) -> String {
    let Some(mode) = client.session_controls(session).control(ControlKind::Mode) else {
        return String::new();
    };
    let own = mode.current.clone().unwrap_or_else(|| "unsaid".to_owned());
    let flag = format!("--permission-policy {}", flag_spelling(&policy));
    match (policy_mode(policy.into(), &mode), policy) {
        (Some(wanted), _) => {
            format!(
                " (mode {wanted}: {flag} starts each session in it unless the owner chooses with !mode; the agent's own is {own})"
            )
        }
        (None, PermissionPolicyArg::Allow) => format!(" (mode {own}, the agent's own under {flag})"),
        (None, _) => format!(
            " (mode {own}, the agent's own: it offers no mode that asks every time, so {flag} answers only what it asks)"
        ),
    }
}

async fn check_relay(relay: &RelaySpec) -> bool {
    let url = match relay {
        RelaySpec::Embedded => {
            println!("relay embedded: ok (started in-process when the daemon runs)");
            return true;
        }
        RelaySpec::Url(url) => url.clone(),
    };
    let client = Client::default();
    let started = Instant::now();
    let connected = async {
        added_relay(&client, &url)
            .await?
            .try_connect(RELAY_CHECK_TIMEOUT)
            .await
            .map_err(|error| error.to_string())
    };
    let verdict = match connected.await {
        Ok(()) => {
            println!(
                "relay {url}: ok (connected in {} ms)",
                started.elapsed().as_millis()
            );
            true
        }
        Err(error) => {
            println!("relay {url}: FAILED to connect: {error}");
            false
        }
    };
    client.shutdown().await;
    verdict
}

/// How a relay answered one of the daemon's subscriptions.
#[derive(Debug)]
enum Acceptance {
    Accepted { after_auth: bool },
    Refused(String),
    Silent,
}

/// Sends `url` the subscriptions the daemon sends (mentions, DMs; from now,
/// so that little is stored to send back) with the bot's keys to
/// authenticate, and reports per subscription whether the relay accepted
/// it; false if it refused or ignored one.
async fn check_subscriptions(settings: &Settings, signer: &BotSigner, url: &RelayUrl) -> bool {
    let interest = Interest {
        bot: signer.public_key(),
        kinds: settings.intake.kinds.clone(),
        follow_threads: false,
        groups: settings.groups.ids_on(url),
    };
    let subscriptions = interest.intake_subscriptions(Timestamp::now());
    let client = authenticating_client(signer);
    let sent = async {
        let relay = added_relay(&client, url).await?;
        let mut notifications = relay.notifications();
        relay
            .try_connect(RELAY_CHECK_TIMEOUT)
            .await
            .map_err(|error| error.to_string())?;
        let mut answers = BTreeMap::new();
        for (id, filter) in &subscriptions {
            relay
                .subscribe_with_id(id.clone(), vec![filter.clone()], SubscribeOptions::default())
                .await
                .map_err(|error| error.to_string())?;
            answers.insert(id.clone(), Acceptance::Silent);
        }
        let _ = tokio::time::timeout(
            SUBSCRIPTION_CHECK_TIMEOUT,
            await_acceptance(&relay, &subscriptions, &mut notifications, &mut answers),
        )
        .await;
        Ok::<_, String>(answers)
    };
    let verdict = match sent.await {
        Ok(answers) => report_acceptance(url, &answers),
        Err(error) => {
            println!("relay {url}: FAILED to subscribe: {error}");
            false
        }
    };
    client.shutdown().await;
    verdict
}

/// Fills in `answers` from the relay's EOSE and CLOSED messages until each
/// subscription has one. A `CLOSED auth-required:` is no answer yet: the
/// SDK authenticates, and the subscription is sent again (as the daemon's
/// relay link does).
async fn await_acceptance(
    relay: &Relay,
    subscriptions: &[(SubscriptionId, Filter)],
    notifications: &mut broadcast::Receiver<RelayNotification>,
    answers: &mut BTreeMap<SubscriptionId, Acceptance>,
) {
    let mut asked_to_authenticate = Vec::new();
    let mut awaiting_auth = Vec::new();
    while answers
        .values()
        .any(|answer| matches!(answer, Acceptance::Silent))
    {
        let Ok(notification) = notifications.recv().await else {
            return;
        };
        let (id, answer) = match notification {
            RelayNotification::Message {
                message: RelayMessage::EndOfStoredEvents(id),
            } => {
                let after_auth = asked_to_authenticate.contains(id.as_ref());
                (id.into_owned(), Acceptance::Accepted { after_auth })
            }
            RelayNotification::Message {
                message:
                    RelayMessage::Closed {
                        subscription_id,
                        message,
                    },
            } => {
                if MachineReadablePrefix::parse(&message) == Some(MachineReadablePrefix::AuthRequired) {
                    asked_to_authenticate.push(subscription_id.clone().into_owned());
                    awaiting_auth.push(subscription_id.into_owned());
                    continue;
                }
                (
                    subscription_id.into_owned(),
                    Acceptance::Refused(message.into_owned()),
                )
            }
            RelayNotification::Authenticated => {
                let again = subscriptions.iter().filter(|(id, _)| awaiting_auth.contains(id));
                for (id, filter) in again {
                    // A failure leaves the subscription unanswered.
                    let _ = relay
                        .subscribe_with_id(id.clone(), vec![filter.clone()], SubscribeOptions::default())
                        .await;
                }
                awaiting_auth.clear();
                continue;
            }
            RelayNotification::AuthenticationFailed => {
                for id in awaiting_auth.drain(..) {
                    answers.insert(
                        id,
                        Acceptance::Refused("authentication (NIP-42) failed".to_owned()),
                    );
                }
                continue;
            }
            _ => continue,
        };
        if let Some(slot) = answers.get_mut(&id)
            && matches!(slot, Acceptance::Silent)
        {
            *slot = answer;
        }
    }
}

/// One line per subscription; true when the relay accepted them all.
fn report_acceptance(url: &RelayUrl, answers: &BTreeMap<SubscriptionId, Acceptance>) -> bool {
    let mut all_accepted = true;
    for (id, answer) in answers {
        match answer {
            Acceptance::Accepted { after_auth: false } => {
                println!("relay {url}: ok, subscription `{id}` accepted")
            }
            Acceptance::Accepted { after_auth: true } => {
                println!("relay {url}: ok, subscription `{id}` accepted after authenticating (NIP-42)")
            }
            Acceptance::Refused(why) => {
                all_accepted = false;
                println!("relay {url}: FAILED, subscription `{id}` refused: {why}");
                println!("  hint: the daemon hears nothing this subscription asks for on this relay");
            }
            Acceptance::Silent => {
                all_accepted = false;
                println!(
                    "relay {url}: FAILED, subscription `{id}` not answered in {} s",
                    SUBSCRIPTION_CHECK_TIMEOUT.as_secs()
                );
            }
        }
    }
    all_accepted
}

/// Prints, for each identity event of the bot, what the relays hold and
/// what the daemon would publish at start. Informational: the relay checks
/// above say whether the relays can be reached. Only the relays that
/// connected (`reachable`) are asked: with none, what they hold is unknown,
/// and said so (never "nothing", which would send the operator looking for
/// a missing profile), without waiting for an answer no relay can give.
async fn check_identity(settings: &Settings, bot: PublicKey, reachable: &[RelayUrl]) {
    let urls: Vec<RelayUrl> = settings
        .relays
        .bot
        .iter()
        .filter_map(|relay| match relay {
            RelaySpec::Url(url) => Some(url.clone()),
            RelaySpec::Embedded => None,
        })
        .collect();
    if urls.len() < settings.relays.bot.len() {
        println!(
            "identity: the embedded relay starts empty; its URL is added to the relay lists when it runs"
        );
    }
    let unknown = reachable.is_empty() && !urls.is_empty();
    let held = read_identity(reachable, bot).await;
    let wanted = Wanted::new(settings.profile.clone(), urls, settings.relays.dm_inbox.clone());
    for planned in wanted.plan(&held) {
        let holds = match held.of(planned.kind) {
            _ if unknown => "not read, no relay could be reached".to_owned(),
            Some(event) => format!(
                "the relays hold {}",
                identity::describe(event.kind, &event.content, event.tags.as_slice())
            ),
            None => "the relays hold nothing".to_owned(),
        };
        let publishes = if planned.up_to_date {
            "up to date, nothing to publish".to_owned()
        } else {
            format!("would publish {}", planned.describe())
        };
        println!(
            "identity {} (kind {}): {holds}; {publishes}",
            identity_label(planned.kind),
            planned.kind.as_u16()
        );
    }
}

/// What the relays at `urls` hold of the bot's identity (nothing when none
/// answers: said so).
async fn read_identity(urls: &[RelayUrl], bot: PublicKey) -> Held {
    if urls.is_empty() {
        return Held::default();
    }
    let client = Client::default();
    for url in urls {
        if let Ok(relay) = added_relay(&client, url).await {
            let _ = relay.try_connect(RELAY_CHECK_TIMEOUT).await;
        }
    }
    let held = match identity::read_held(&client, bot).await {
        Ok(held) => held,
        Err(error) => {
            println!("identity: {error}");
            Held::default()
        }
    };
    client.shutdown().await;
    held
}

fn identity_label(kind: Kind) -> &'static str {
    match kind {
        Kind::Metadata => "profile",
        Kind::RelayList => "relay list",
        _ => "DM inbox",
    }
}
