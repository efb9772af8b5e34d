//! Against a relay written elsewhere: the PyPI package `nostr-relay` (1.14),
//! started on loopback from the test virtualenv.

use std::process::{Child, Command, Stdio};

use nostr_sdk::prelude::*;

use crate::support::*;

/// `nostr-relay serve` on a free port, killed when dropped.
struct PythonRelay {
    child: Child,
    port: u16,
}

impl PythonRelay {
    async fn start() -> Self {
        let dir = temp_dir("python-relay");
        let port = free_port();
        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "storage:\n  sqlalchemy.url: sqlite+aiosqlite:///{db}\n  validators:\n    - nostr_relay.validators.is_not_too_large\n    - nostr_relay.validators.is_signed\n    - nostr_relay.validators.is_recent\ngunicorn:\n  bind: 127.0.0.1:{port}\n  workers: 1\n  loglevel: warning\n  reload: false\nverification:\n  nip05_verification: disabled\nauthentication:\n  enabled: false\n",
                db = dir.join("relay.sqlite3").display()
            ),
        )
        .expect("relay config");
        let child = Command::new(test_support::venv_script("nostr-relay"))
            .arg("-c")
            .arg(&config)
            .arg("serve")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("relay.log")).expect("log"))
            .spawn()
            .expect("start nostr-relay");
        let listening = async || tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok();
        let describe = || format!("nostr-relay to listen on {port}");
        eventually(PATIENCE, listening, describe).await;
        PythonRelay { child, port }
    }
}

impl RelayServer for PythonRelay {
    fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PythonRelay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mention_and_dm_round_trips_through_the_python_relay() {
    let scene = Scene::builder().start_on(PythonRelay::start().await).await;
    let (owner, bot) = (&scene.owner, scene.bot);

    let root = owner
        .publish(EventBuilder::text_note("a thread on a foreign relay"))
        .await;
    let mention = owner
        .publish(
            EventBuilder::text_note_reply("bot, your view?", &root, Some(&root), None)
                .tag(Tag::public_key(bot)),
        )
        .await;
    let reply = scene.reply_to(&mention).await;
    assert!(reply.content.contains("> bot, your view?"), "{}", reply.content);
    let expected: std::collections::BTreeSet<_> = [
        (root.id.to_hex(), "root".to_owned()),
        (mention.id.to_hex(), "reply".to_owned()),
    ]
    .into();
    assert_eq!(e_tags(&reply), expected);

    owner.dm(&bot, "privately, on python").await;
    let replies = owner.direct_messages_from(&bot, 1).await;
    assert!(
        replies[0].content.contains("> privately, on python"),
        "{}",
        replies[0].content
    );
}
