//! `[[schedule]]` arrays of the config file: the prompts the bot runs on a
//! schedule (see `crate::heart::schedule`).
//!
//! Owns reading and checking the entries; a refusal is one line naming the
//! entry (its id, else its place) and the key at fault.
//!
//! ```toml
//! [[schedule]]
//! id = "standup"
//! cron = "0 9 * * 1-5"      # 5 fields, or 6 with seconds first
//! timezone = "Europe/Paris" # IANA name; UTC when left out
//! target = "dm"             # or "group:<relay>'<group id>", "note:<event id>"
//! prompt = "Summarise yesterday's commits."
//! agent = "reviewer"        # an agent profile; the default agent when left out
//! ```

use acp_bridge_core::mention::is_plausible_group_id;

use crate::heart::schedule::target::Target;
use crate::heart::schedule::when::{CronTime, When};
use crate::heart::schedule::{Origin, Schedule, chat};

/// The top-level name of the schedule array.
pub(super) const SCHEDULE_TABLE: &str = "schedule";
/// The keys an entry takes.
const KEYS: [&str; 6] = ["id", "cron", "timezone", "target", "prompt", "agent"];
/// A schedule's zone when it names none.
const DEFAULT_ZONE: &str = "UTC";

/// Why an entry was refused: (the entry as named in the refusal, the key,
/// what is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub entry: String,
    pub key: String,
    pub reason: String,
}

/// The schedules of `value`, the file's `schedule` entry.
pub(super) fn parse(value: &toml::Value) -> Result<Vec<Schedule>, Refusal> {
    let refuse = |entry: String, key: &str, reason: String| Refusal {
        entry,
        key: key.to_owned(),
        reason,
    };
    let toml::Value::Array(entries) = value else {
        return Err(refuse(
            "schedule".into(),
            "schedule",
            "must be an array of tables: write each as [[schedule]]".into(),
        ));
    };
    let mut schedules: Vec<Schedule> = Vec::new();
    for (place, entry) in entries.iter().enumerate() {
        let mut name = format!("#{}", place + 1);
        let toml::Value::Table(entry) = entry else {
            return Err(refuse(name, "schedule", "must be a table".into()));
        };
        if let Some(toml::Value::String(id)) = entry.get("id") {
            name = format!("`{id}`");
        }
        if let Some(unknown) = entry.keys().find(|key| !KEYS.contains(&key.as_str())) {
            return Err(refuse(
                name,
                unknown,
                format!("is not a schedule key (the keys: {})", KEYS.join(", ")),
            ));
        }
        let text = |key: &str| -> Result<Option<String>, Refusal> {
            match entry.get(key) {
                None => Ok(None),
                Some(toml::Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(refuse(name.clone(), key, "must be a string".into())),
            }
        };
        let required = |key: &str| -> Result<String, Refusal> {
            text(key)?
                .filter(|text| !text.trim().is_empty())
                .ok_or_else(|| refuse(name.clone(), key, "is required".into()))
        };
        let id = required("id")?;
        if !is_plausible_group_id(&id) {
            return Err(refuse(
                name,
                "id",
                "must be letters, digits, - and _ (it names the schedule in logs and commands)".into(),
            ));
        }
        if chat::is_chat_id(&id) {
            return Err(refuse(
                name,
                "id",
                "has the form of the ids the chat's `!every`/`!at` give (c1, c2, …); pick another".into(),
            ));
        }
        if schedules.iter().any(|schedule| schedule.id == id) {
            return Err(refuse(
                name,
                "id",
                "is the id of an earlier schedule; ids are unique".into(),
            ));
        }
        let zone = text("timezone")?.unwrap_or_else(|| DEFAULT_ZONE.to_owned());
        let when = CronTime::parse(&required("cron")?, &zone).map_err(|reason| {
            let key = if reason.contains("time zone") {
                "timezone"
            } else {
                "cron"
            };
            refuse(name.clone(), key, reason)
        })?;
        let target =
            Target::parse(&required("target")?).map_err(|reason| refuse(name.clone(), "target", reason))?;
        let schedule = Schedule {
            prompt: required("prompt")?,
            agent: text("agent")?,
            id,
            when: When::Cron(Box::new(when)),
            origin: Origin::File,
            target,
        };
        schedules.push(schedule);
    }
    Ok(schedules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Vec<Schedule>, Refusal> {
        let table: toml::Table = text.parse().expect("toml");
        parse(&table[SCHEDULE_TABLE])
    }

    #[test]
    fn entries_read_with_their_defaults() {
        let schedules = parse_text(
            "[[schedule]]\nid = \"standup\"\ncron = \"0 9 * * 1-5\"\ntarget = \"dm\"\nprompt = \"Summarise.\"\n\
             [[schedule]]\nid = \"tick\"\ncron = \"*/5 * * * * *\"\ntimezone = \"Europe/Paris\"\n\
             target = \"dm\"\nprompt = \"Tick.\"\nagent = \"reviewer\"\n",
        )
        .expect("schedules");
        assert_eq!(schedules.len(), 2);
        assert_eq!(
            (schedules[0].id.as_str(), schedules[0].agent.as_deref()),
            ("standup", None)
        );
        assert_eq!(schedules[0].target, Target::Dm);
        assert_eq!(schedules[1].agent.as_deref(), Some("reviewer"));
    }

    /// The commented example in `deploy/config/acp-bridge.toml.example`,
    /// uncommented, is a schedule the daemon takes.
    #[test]
    fn the_example_files_schedule_parses() {
        let block = super::super::example_block("# [[schedule]]");
        let schedules = parse_text(&block).unwrap_or_else(|refusal| panic!("{refusal:?}"));
        assert_eq!(schedules[0].id, "standup");
    }

    #[test]
    fn a_refusal_names_the_entry_and_the_key() {
        let good = "cron = \"* * * * *\"\ntarget = \"dm\"\nprompt = \"p\"\n";
        for (text, entry, key) in [
            (format!("[[schedule]]\n{good}"), "#1", "id"),
            (
                format!("[[schedule]]\nid = \"a\"\n{good}[[schedule]]\nid = \"a\"\n{good}"),
                "`a`",
                "id",
            ),
            (
                format!("[[schedule]]\nid = \"a\"\n{good}colour = \"red\"\n"),
                "`a`",
                "colour",
            ),
            (
                "[[schedule]]\nid = \"a\"\ncron = \"nope\"\ntarget = \"dm\"\nprompt = \"p\"\n".into(),
                "`a`",
                "cron",
            ),
            (
                format!("[[schedule]]\nid = \"a\"\n{good}timezone = \"Nowhere/Else\"\n"),
                "`a`",
                "timezone",
            ),
            (
                "[[schedule]]\nid = \"a\"\ncron = \"* * * * *\"\ntarget = \"owner\"\nprompt = \"p\"\n".into(),
                "`a`",
                "target",
            ),
            (
                "[[schedule]]\nid = \"a\"\ncron = \"* * * * *\"\ntarget = \"dm\"\n".into(),
                "`a`",
                "prompt",
            ),
            (
                "[[schedule]]\nid = \"a\"\ncron = 5\ntarget = \"dm\"\nprompt = \"p\"\n".into(),
                "`a`",
                "cron",
            ),
            ("schedule = 3\n".into(), "schedule", "schedule"),
        ] {
            let refusal = parse_text(&text)
                .err()
                .unwrap_or_else(|| panic!("refused: {text}"));
            assert_eq!(
                (refusal.entry.as_str(), refusal.key.as_str()),
                (entry, key),
                "{text}: {}",
                refusal.reason
            );
        }
    }
}
