//! The `send_file` tool (issue 24 §1), end to end: the scripted agent
//! calls it over the bridge's MCP server, the bridge reads the file from
//! the agent's working directory, uploads it to a loopback Blossom server
//! (which checks the kind 24242 authorization) and posts the link in the
//! thread with a NIP-92 `imeta` tag; paths outside the working directory,
//! files past `--max-file-bytes` and a bridge without `--blossom` are
//! refused as tool errors the model reads.

use std::path::Path;

use nostr_sdk::hashes::{Hash as _, sha256};
use nostr_sdk::prelude::*;

use crate::support::*;
use test_support::blossom::BlossomServer;

/// A small PNG as far as magic numbers go.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really an image, but typed as one";

/// The `imeta` tag's fields of `event`, by name.
fn imeta(event: &Event) -> Option<std::collections::BTreeMap<String, String>> {
    let tag = event
        .tags
        .iter()
        .find(|tag| tag.as_slice().first().map(String::as_str) == Some("imeta"))?;
    Some(
        tag.as_slice()[1..]
            .iter()
            .filter_map(|field| field.split_once(' '))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect(),
    )
}

/// Flags for a bridge whose agents work in `cwd` and upload to `blossom`.
fn flags<'a>(cwd: &'a Path, blossom: &'a str) -> Vec<&'a str> {
    vec![
        "--cwd",
        cwd.to_str().expect("utf-8 path"),
        "--blossom",
        blossom,
        // The test's Blossom server is on loopback.
        "--fetch-private-addresses",
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_is_uploaded_and_posted_with_its_imeta_tag() {
    let blossom = BlossomServer::start().expect("blossom server");
    let cwd = temp_dir("send-file-cwd");
    std::fs::create_dir(cwd.join("out")).expect("out dir");
    std::fs::write(cwd.join("out/chart.png"), PNG).expect("file");
    let base = blossom.base_url();
    let scene = Scene::builder()
        .flags(&flags(&cwd, &base))
        .metrics()
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene
        .mention("room", "plot it [mcp-send-file=out/chart.png|the chart]")
        .await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    let hash = sha256::Hash::hash(PNG).to_string();
    let url = format!("{base}{hash}");
    assert!(
        answer
            .content
            .contains(&format!("mcp send_file: ok: sent: {url}")),
        "{}",
        answer.content
    );
    assert_eq!(
        blossom.blob(&hash).as_deref(),
        Some(PNG),
        "the server holds the file's bytes"
    );

    scene.settle("room").await;
    let said = owner.events_referencing(&bot, &mention.id).await;
    let posted: Vec<&Event> = said.iter().filter(|event| imeta(event).is_some()).collect();
    assert_eq!(posted.len(), 1, "one file message: {said:#?}");
    let posted = posted[0];
    assert_eq!(posted.content, format!("the chart\n{url}"));
    let fields = imeta(posted).expect("imeta");
    assert_eq!(fields["url"], url);
    assert_eq!(fields["m"], "image/png");
    assert_eq!(fields["x"], hash);
    assert_eq!(fields["size"], PNG.len().to_string());
    assert!(
        posted.created_at <= answer.created_at,
        "posted mid-turn, before the answer"
    );

    let port = scene.metrics_port();
    let calls = metric(
        port,
        "acp_bridge_mcp_tool_calls_total{tool=\"send_file\",outcome=\"ok\"}",
    )
    .await;
    assert_eq!(calls, 1.0, "the call is counted");
    let uploads = metric(port, "acp_bridge_blossom_uploads_total{outcome=\"ok\"}").await;
    assert_eq!(uploads, 1.0, "the upload is counted");
    let bytes = metric(port, "acp_bridge_blossom_upload_bytes_total").await;
    assert_eq!(bytes, PNG.len() as f64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_outside_the_workspace_and_large_files_are_refused() {
    let blossom = BlossomServer::start().expect("blossom server");
    let base_dir = temp_dir("send-file-escape");
    let cwd = base_dir.join("work");
    std::fs::create_dir(&cwd).expect("cwd");
    let secret = base_dir.join("secret.txt");
    std::fs::write(&secret, "the key").expect("secret");
    std::os::unix::fs::symlink(&secret, cwd.join("link.txt")).expect("symlink");
    std::fs::write(cwd.join("big.txt"), "x".repeat(17)).expect("big file");
    std::fs::write(cwd.join("tool.sh"), "#!/bin/sh\n").expect("script");
    let base = blossom.base_url();
    let mut daemon_flags = flags(&cwd, &base);
    daemon_flags.extend(["--max-file-bytes", "16"]);
    let scene = Scene::builder().flags(&daemon_flags).start().await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let secret = secret.to_str().expect("utf-8 path");
    let cases = [
        ("../secret.txt", "is outside your working directory".to_owned()),
        (secret, "is outside your working directory".to_owned()),
        ("link.txt", "is outside your working directory".to_owned()),
        ("big.txt", "is 17 bytes; at most 16 bytes are sent".to_owned()),
        ("tool.sh", "is not a type that is sent".to_owned()),
    ];
    for (path, refusal) in cases {
        let mention = scene
            .mention("room", &format!("[mcp-send-file={path}|look]"))
            .await;
        let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
        assert!(
            answer.content.contains("mcp send_file: error: ") && answer.content.contains(&refusal),
            "{path}: {}",
            answer.content
        );
        // The budget of posts refills: one turn at a time stays in it.
        scene.settle("room").await;
        let said = owner.events_referencing(&bot, &mention.id).await;
        assert_eq!(said.len(), 1, "{path}: only the answer: {said:#?}");
    }
    assert_eq!(blossom.blob_count(), 0, "nothing was uploaded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_blossom_server_send_file_refuses() {
    let cwd = temp_dir("send-file-none");
    std::fs::write(cwd.join("chart.png"), PNG).expect("file");
    let scene = Scene::builder()
        .flags(&["--cwd", cwd.to_str().expect("utf-8 path")])
        .start()
        .await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let mention = scene.mention("room", "[mcp-send-file=chart.png|x]").await;
    let answer = owner.reply_containing(&bot, &mention.id, "done: ").await;
    assert!(
        answer
            .content
            .contains("mcp send_file: error: no Blossom server is configured (--blossom)"),
        "{}",
        answer.content
    );
}
