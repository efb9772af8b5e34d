//! Media in: an image a mention carries (a NIP-92 `imeta` tag, or a bare
//! image URL) reaches an agent that advertises `promptCapabilities.image`
//! as an `image` block the daemon fetched, an audio clip one that
//! advertises `promptCapabilities.audio` as an `audio` block; a medium it
//! does not fetch (too large, a private address, an agent that takes none)
//! reaches the agent as its URL with the reason (and, when the agent does
//! not take its kind, as a `resource_link`), and the mention is still
//! answered.
//!
//! The media are served by a small HTTP server on loopback in the test;
//! the scripted agent (`--images`, `--audio`) ends its answer with a line
//! per media block it got (`[image image/png, N bytes]`, `[audio …]`,
//! `[resource_link NAME URI TYPE]`).

use std::sync::atomic::{AtomicUsize, Ordering};

use nostr_sdk::prelude::*;

use crate::support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A 1×1 PNG.
pub(crate) const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\xf8\xff\xff?\0\x05\xfe\x02\xfe\xa7\x35\x81\x84\0\0\0\0IEND\xaeB`\x82";
/// The start of an Ogg file, as `/clip.ogg` serves it.
const OGG: &[u8] = b"OggS\0\x02\0\0\0\0\0\0\0\0";
/// How many times `/once.png` (a [`PNG`]) was asked for.
static ONCE_GETS: AtomicUsize = AtomicUsize::new(0);
/// The `--max-image-bytes` of these tests; `/big.png` is larger.
const MAX_IMAGE_BYTES: usize = 1024;

/// An HTTP server on loopback serving `/small.png` and `/once.png` (each a
/// [`PNG`], the second counted in [`ONCE_GETS`]),
/// `/big.png` (a PNG past [`MAX_IMAGE_BYTES`]) and `/clip.ogg` ([`OGG`]);
/// its base URL.
pub(crate) async fn image_server() -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 2048];
                let read = stream.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..read]);
                if request.starts_with("GET /once.png ") {
                    ONCE_GETS.fetch_add(1, Ordering::SeqCst);
                }
                let (content_type, body) = if request.starts_with("GET /big.png ") {
                    ("image/png", [PNG, &vec![0u8; MAX_IMAGE_BYTES * 2]].concat())
                } else if request.starts_with("GET /clip.ogg ") {
                    ("audio/ogg", OGG.to_vec())
                } else {
                    ("image/png", PNG.to_vec())
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&body).await;
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// A NIP-92 `imeta` tag for the PNG at `url`.
fn imeta(url: &str) -> Tag {
    Tag::custom(
        TagKind::custom("imeta"),
        [
            format!("url {url}"),
            "m image/png".to_owned(),
            "dim 1x1".to_owned(),
        ],
    )
}

/// The owner mentions the bot in `channel` with `text` and `tags`; the
/// bot's answer.
async fn answer_to(scene: &Scene, channel: &str, text: &str, tags: &[Tag]) -> String {
    let mention = scene
        .owner
        .publish(group_message(&scene.bot, channel, text, tags))
        .await;
    let answer = scene.reply_to(&mention).await.content;
    println!("answer:\n{answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imeta_image_reaches_the_agent_as_an_image_block_and_an_oversize_one_as_its_url() {
    let images = image_server().await;
    let max = MAX_IMAGE_BYTES.to_string();
    let scene = Scene::builder()
        .agent(&["--round-delay-ms", "20", "--rounds", "1", "--images"])
        .flags(&["--fetch-private-addresses", "--max-image-bytes", &max])
        .metrics()
        .start()
        .await;
    let log = &scene.bridge.log;

    let mark = log.cursor();
    let small = format!("{images}/small.png");
    let answer = answer_to(
        &scene,
        "pics",
        &format!("what is this? {small}"),
        &[imeta(&small)],
    )
    .await;
    assert!(
        answer.contains(&format!("[image image/png, {} bytes]", PNG.len())),
        "the agent got the image: {answer}"
    );
    assert!(
        answer.contains(&format!("[acp-bridge] image: {small} — attached")),
        "{answer}"
    );
    let carried = log.wait(mark, Line::new("prompt carries images")).await;
    assert_eq!(carried["images_shown"], 1, "{carried}");
    assert_eq!(carried["image_bytes"], PNG.len(), "{carried}");

    let mark = log.cursor();
    let big = format!("{images}/big.png");
    let answer = answer_to(&scene, "pics", "and this?", &[imeta(&big)]).await;
    assert!(
        answer.contains(&format!("[acp-bridge] image: {big} — not shown: too large")),
        "{answer}"
    );
    assert!(!answer.contains("[image image/"), "no image block: {answer}");
    let carried = log.wait(mark, Line::new("prompt carries images")).await;
    assert_eq!(
        (
            carried["images_shown"].as_u64(),
            carried["images_as_text"].as_u64()
        ),
        (Some(0), Some(1))
    );
    let port = scene.metrics_port();
    let counted = (
        metric(port, r#"acp_bridge_prompt_images_total{outcome="shown"}"#).await,
        metric(port, r#"acp_bridge_prompt_images_total{outcome="too_large"}"#).await,
    );
    assert_eq!(counted, (1.0, 1.0), "each image's outcome is counted");
}

/// Without `--fetch-private-addresses`, a URL on the daemon's own host is
/// not fetched: the agent gets it as text and the mention is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_at_a_private_address_is_refused_and_the_mention_still_answered() {
    let images = image_server().await;
    let scene = Scene::builder()
        .agent(&["--round-delay-ms", "20", "--rounds", "1", "--images"])
        .start()
        .await;
    let small = format!("{images}/small.png");
    let answer = answer_to(&scene, "pics", &format!("look {small}"), &[]).await;
    assert!(
        answer.contains(&format!(
            "[acp-bridge] image: {small} — not shown: a private address"
        )),
        "{answer}"
    );
    assert!(!answer.contains("[image image/"), "no image block: {answer}");
    assert!(
        !answer.contains("[resource_link"),
        "a refused URL is not linked: {answer}"
    );
}

/// An `imeta` audio clip reaches an agent that takes audio (and no images)
/// as an `audio` block; the image beside it as a `resource_link`. Both
/// outcomes are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imeta_audio_clip_reaches_an_audio_agent_as_an_audio_block_and_an_image_as_a_link() {
    let media = image_server().await;
    let scene = Scene::builder()
        .agent(&["--round-delay-ms", "20", "--rounds", "1", "--audio"])
        .flags(&["--fetch-private-addresses"])
        .metrics()
        .start()
        .await;
    let log = &scene.bridge.log;
    let (clip, small) = (format!("{media}/clip.ogg"), format!("{media}/small.png"));
    let audio_tag = Tag::custom(
        TagKind::custom("imeta"),
        [format!("url {clip}"), "m audio/ogg".to_owned()],
    );
    let mark = log.cursor();
    let answer = answer_to(&scene, "sounds", "listen", &[audio_tag, imeta(&small)]).await;
    for expected in [
        format!("[acp-bridge] audio: {clip} — attached"),
        format!("[audio audio/ogg, {} bytes]", OGG.len()),
        format!("[acp-bridge] image: {small} — not shown: the agent does not take images"),
        format!("[resource_link small.png {small} image/png]"),
    ] {
        assert!(answer.contains(&expected), "`{expected}` in: {answer}");
    }
    assert!(!answer.contains("[image image/"), "no image block: {answer}");
    let carried = log.wait(mark, Line::new("prompt carries images")).await;
    assert_eq!(
        (
            carried["audio_shown"].as_u64(),
            carried["audio_bytes"].as_u64(),
            carried["linked"].as_u64()
        ),
        (Some(1), Some(OGG.len() as u64), Some(1)),
        "{carried}"
    );
    let port = scene.metrics_port();
    let counted = (
        metric(port, r#"acp_bridge_prompt_audio_total{outcome="shown"}"#).await,
        metric(
            port,
            r#"acp_bridge_prompt_images_total{outcome="agent_takes_none"}"#,
        )
        .await,
        metric(port, r#"acp_bridge_prompt_audio_total{outcome="too_large"}"#).await,
    );
    assert_eq!(counted, (1.0, 1.0, 0.0), "each medium's outcome is counted");
}

/// An agent that does not advertise `promptCapabilities.image` gets the
/// URL as text, and nothing is fetched for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_takes_no_images_gets_the_url_as_text() {
    let images = image_server().await;
    let scene = Scene::builder()
        .flags(&["--fetch-private-addresses"])
        .start()
        .await;
    let small = format!("{images}/small.png");
    let answer = answer_to(&scene, "pics", "look", &[imeta(&small)]).await;
    assert!(
        answer.contains(&format!(
            "[acp-bridge] image: {small} — not shown: the agent does not take images"
        )),
        "{answer}"
    );
    assert!(!answer.contains("[image image/"), "no image block: {answer}");
    assert!(
        answer.contains(&format!("[resource_link small.png {small} image/png]")),
        "a link the agent can open instead: {answer}"
    );
}

/// A mention with an image, steered into a live turn natively (goose's
/// steer), reaches the agent as an image block inside the steer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_steered_into_a_live_turn_reaches_the_agent_as_an_image_block() {
    steered_image_reaches_the_agent(&[]).await;
}

/// The same through `_session/steering`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_steered_through_session_steering_reaches_the_agent_as_an_image_block() {
    steered_image_reaches_the_agent(&["--session-steering"]).await;
}

/// The owner's second mention, carrying an image, arrives while the first
/// one's turn runs on an agent speaking the steer `agent` flags choose:
/// the steer carries the image block, and the one turn's answer says so
/// in its steer line.
async fn steered_image_reaches_the_agent(agent: &[&str]) {
    let images = image_server().await;
    let mut flags = vec!["--rounds", "6", "--round-delay-ms", "300", "--images"];
    flags.extend(agent);
    let scene = Scene::builder()
        .agent(&flags)
        .flags(&["--fetch-private-addresses"])
        .start()
        .await;
    let log = &scene.bridge.log;
    scene.mention_mid_turn("room", "write the report").await;
    let small = format!("{images}/small.png");
    let mark = log.cursor();
    let second = scene
        .owner
        .publish(group_message(
            &scene.bot,
            "room",
            "and look at this",
            &[imeta(&small)],
        ))
        .await;
    log.wait(mark, Line::new("steered into the live turn")).await;
    let carried = log.wait(mark, Line::new("prompt carries images")).await;
    assert_eq!(carried["images_shown"], 1, "{carried}");
    let answer = scene.reply_to(&second).await.content;
    println!("answer:\n{answer}");
    let (_, steer) = answer
        .split_once("\nsteer: ")
        .unwrap_or_else(|| panic!("the mention was steered into the turn: {answer}"));
    for expected in [
        "> and look at this".to_owned(),
        format!("[acp-bridge] image: {small} — attached"),
        format!("[image image/png, {} bytes]", PNG.len()),
    ] {
        assert!(steer.contains(&expected), "`{expected}` in the steer: {answer}");
    }
}

/// A prompt the agent refused is retried with its image, which the daemon
/// fetched once: the retry takes it from the daemon's cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_fetched_once_for_a_prompt_and_its_retry() {
    let images = image_server().await;
    let scene = Scene::builder()
        .agent(&[
            "--round-delay-ms",
            "20",
            "--rounds",
            "1",
            "--images",
            "--fail-first-prompts",
            "1",
        ])
        .flags(&["--fetch-private-addresses"])
        .start()
        .await;
    let log = &scene.bridge.log;
    let once = format!("{images}/once.png");
    let mark = log.cursor();
    let answer = answer_to(&scene, "pics", "what is this?", &[imeta(&once)]).await;
    assert!(
        answer.contains(&format!("[image image/png, {} bytes]", PNG.len())),
        "the retry carried the image: {answer}"
    );
    let prompts = log.matching(mark, Line::new("prompt carries images"));
    assert_eq!(prompts.len(), 2, "the failed prompt and its retry carried it");
    assert!(
        prompts.iter().all(|line| line["images_shown"] == 1),
        "{prompts:?}"
    );
    assert_eq!(ONCE_GETS.load(Ordering::SeqCst), 1, "fetched once");
}
