//! The agent's form questions (ACP elicitation) in chat: how a form is
//! shown to the owner, and how the owner's plain-text reply fills it in.
//!
//! Owns text only, no state and no I/O ([`super::questions`] keeps the open
//! question). A reply fills a form this way: with one field, the whole
//! reply is its value; with several, each line is `name: value` (the field's
//! name or title) or, without a known name, the value of the next field not
//! yet given, in the order the question lists them. A choice takes its
//! number or its name, a yes/no field takes yes/no (true/false), a number
//! field a number. A reply that does not fit says why, so the owner can
//! correct it.

use acp_protocol::{Choice, FieldKind, FormField};
use serde_json::{Map, Value, json};

/// How the form is listed in the question, and how to answer it.
pub(crate) fn describe(fields: &[FormField]) -> (String, &'static str) {
    if let [field] = fields {
        let listing = match &field.kind {
            FieldKind::Choice(choices) => numbered(choices),
            _ => field.description.clone().unwrap_or_default(),
        };
        let how = match &field.kind {
            FieldKind::Choice(_) => "Reply to this message with the number or the name of a choice",
            FieldKind::Text => "Reply to this message with your answer",
            FieldKind::Number | FieldKind::Integer => "Reply to this message with a number",
            FieldKind::Boolean => "Reply to this message with yes or no",
        };
        return (listing, how);
    }
    let listing = fields
        .iter()
        .map(|field| {
            let mut line = format!(
                "- {} ({}{})",
                field.label(),
                kind_label(&field.kind),
                if field.required { ", required" } else { "" }
            );
            if field.title.is_some() {
                line.push_str(&format!(" [{}]", field.name));
            }
            if let Some(description) = &field.description {
                line.push_str(&format!(": {description}"));
            }
            if let FieldKind::Choice(choices) = &field.kind {
                for choice in numbered(choices).lines() {
                    line.push_str(&format!("\n    {choice}"));
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n");
    (
        listing,
        "Reply to this message with one line per field, `name: value` (or just the values, one per line, in this order)",
    )
}

/// Fills the form from the owner's reply, or says what does not fit.
pub(crate) fn fill(fields: &[FormField], reply: &str) -> Result<Map<String, Value>, String> {
    let lines: Vec<String> = reply
        .lines()
        .map(|line| {
            line.split_whitespace()
                .filter(|word| !word.starts_with("nostr:") && !word.starts_with('@'))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|line| !line.is_empty())
        .collect();
    if lines.is_empty() {
        return Err("the reply is empty".to_owned());
    }
    let mut given: Vec<Option<String>> = vec![None; fields.len()];
    if let [_] = fields {
        given[0] = Some(lines.join("\n"));
    } else {
        for line in &lines {
            let named = line.split_once(':').and_then(|(name, value)| {
                let name = normalize(name);
                let index = fields
                    .iter()
                    .position(|field| normalize(&field.name) == name || normalize(field.label()) == name)?;
                Some((index, value.trim().to_owned()))
            });
            let (index, value) = match named {
                Some(named) => named,
                None => match given.iter().position(Option::is_none) {
                    Some(index) => (index, line.clone()),
                    None => return Err(format!("there are more lines than the {} fields", fields.len())),
                },
            };
            given[index] = Some(value);
        }
    }
    let mut content = Map::new();
    let mut problems = Vec::new();
    for (field, value) in fields.iter().zip(given) {
        match value {
            Some(value) => match parse(field, &value) {
                Ok(value) => {
                    content.insert(field.name.clone(), value);
                }
                Err(problem) => problems.push(format!("{}: {problem}", field.label())),
            },
            None if field.required => problems.push(format!("{}: required, but not given", field.label())),
            None => {}
        }
    }
    if problems.is_empty() {
        Ok(content)
    } else {
        Err(problems.join("; "))
    }
}

/// The content as the owner is told it was sent.
pub(crate) fn summarize(content: &Map<String, Value>) -> String {
    content
        .iter()
        .map(|(name, value)| match value {
            Value::String(text) => format!("{name}: {text}"),
            other => format!("{name}: {other}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse(field: &FormField, value: &str) -> Result<Value, String> {
    let value = value.trim();
    match &field.kind {
        FieldKind::Text if value.is_empty() => Err("empty".to_owned()),
        FieldKind::Text => Ok(json!(value)),
        FieldKind::Number => value
            .parse::<f64>()
            .ok()
            .filter(|number| number.is_finite())
            .map(|number| json!(number))
            .ok_or_else(|| format!("`{value}` is not a number")),
        FieldKind::Integer => value
            .parse::<i64>()
            .map(|number| json!(number))
            .map_err(|_| format!("`{value}` is not a whole number")),
        FieldKind::Boolean => match normalize(value).as_str() {
            "yes" | "y" | "true" | "on" => Ok(json!(true)),
            "no" | "n" | "false" | "off" => Ok(json!(false)),
            _ => Err(format!("`{value}` is neither yes nor no")),
        },
        FieldKind::Choice(choices) => {
            let wanted = normalize(value);
            let by_number = wanted
                .parse::<usize>()
                .ok()
                .and_then(|number| number.checked_sub(1))
                .and_then(|index| choices.get(index));
            by_number
                .or_else(|| {
                    choices.iter().find(|choice| {
                        normalize(&choice.title) == wanted || normalize(&choice.value) == wanted
                    })
                })
                .map(|choice| json!(choice.value))
                .ok_or_else(|| {
                    format!(
                        "`{value}` is none of the choices ({})",
                        numbered(choices).replace('\n', ", ")
                    )
                })
        }
    }
}

fn kind_label(kind: &FieldKind) -> &'static str {
    match kind {
        FieldKind::Text => "text",
        FieldKind::Number => "number",
        FieldKind::Integer => "whole number",
        FieldKind::Boolean => "yes/no",
        FieldKind::Choice(_) => "choose one",
    }
}

fn numbered(choices: &[Choice]) -> String {
    choices
        .iter()
        .enumerate()
        .map(|(index, choice)| format!("{}. {}", index + 1, choice.title))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Case, `_`/`-` and punctuation aside: how answers are compared to names.
pub(super) fn normalize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '_' || c == '-' {
                ' '
            } else {
                c.to_ascii_lowercase()
            }
        })
        .filter(|c| c.is_alphanumeric() || *c == ' ')
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn field(name: &str, kind: FieldKind, required: bool) -> FormField {
        FormField {
            name: name.into(),
            title: None,
            description: None,
            required,
            kind,
        }
    }

    pub(crate) fn colours() -> FormField {
        field(
            "colour",
            FieldKind::Choice(vec![
                Choice {
                    value: "r".into(),
                    title: "Red".into(),
                },
                Choice {
                    value: "b".into(),
                    title: "Deep blue".into(),
                },
            ]),
            true,
        )
    }

    #[test]
    fn one_choice_takes_a_number_or_a_name() {
        let fields = [colours()];
        assert_eq!(
            fill(&fields, "nostr:npub1bot 2"),
            Ok(Map::from_iter([("colour".into(), json!("b"))]))
        );
        assert_eq!(
            fill(&fields, "deep BLUE"),
            Ok(Map::from_iter([("colour".into(), json!("b"))]))
        );
        assert_eq!(
            fill(&fields, "r"),
            Ok(Map::from_iter([("colour".into(), json!("r"))]))
        );
        let wrong = fill(&fields, "3").expect_err("no third choice");
        assert!(wrong.contains("1. Red, 2. Deep blue"), "{wrong}");
    }

    #[test]
    fn one_text_field_takes_the_whole_reply() {
        let fields = [field("why", FieldKind::Text, true)];
        assert_eq!(
            fill(&fields, "because: it is\nlate"),
            Ok(Map::from_iter([("why".into(), json!("because: it is\nlate"))]))
        );
        assert!(fill(&fields, "@bot").is_err(), "empty once the mention is gone");
    }

    #[test]
    fn several_fields_take_named_lines_or_lines_in_order() {
        let fields = [
            colours(),
            field("count", FieldKind::Integer, false),
            field("ok", FieldKind::Boolean, true),
        ];
        let expected = Map::from_iter([
            ("colour".into(), json!("r")),
            ("count".into(), json!(3)),
            ("ok".into(), json!(true)),
        ]);
        assert_eq!(
            fill(&fields, "ok: yes\ncolour: red\ncount: 3"),
            Ok(expected.clone())
        );
        assert_eq!(fill(&fields, "1\n3\ny"), Ok(expected));
        let partial = fill(&fields, "ok: no\n2").expect("count is optional");
        assert_eq!(
            partial,
            Map::from_iter([("colour".into(), json!("b")), ("ok".into(), json!(false))])
        );
        let wrong = fill(&fields, "count: many\nok: maybe").expect_err("nothing fits");
        assert!(wrong.contains("count: `many` is not a whole number"), "{wrong}");
        assert!(wrong.contains("colour: required"), "{wrong}");
        assert!(fill(&fields, "1\n2\nyes\nextra").is_err());
    }

    #[test]
    fn the_question_lists_fields_and_numbered_choices() {
        let (listing, how) = describe(&[colours()]);
        assert_eq!(listing, "1. Red\n2. Deep blue");
        assert!(how.contains("number or the name"));
        let (listing, how) = describe(&[colours(), field("count", FieldKind::Number, false)]);
        assert_eq!(
            listing,
            "- colour (choose one, required)\n    1. Red\n    2. Deep blue\n- count (number)"
        );
        assert!(how.contains("name: value"));
    }
}
