//! Media fetched once, kept for the next prompt or steer that carries them
//! again: a failed prompt's retry, a turn taken up again after a restart of
//! the agent. Bounded by [`MEDIA_CACHE_BYTES`] and [`MEDIA_CACHE_ENTRIES`];
//! the oldest entry goes first. Only media that passed every check are
//! kept (a refusal may be passing, a failed fetch surely is), keyed by URL,
//! claimed hash and kind, so a medium another mention names with another
//! hash is fetched (and checked) again. In memory only: a restarted daemon
//! fetches again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use acp_bridge_core::media_refs::{MediaKind, MediaRef};

use super::fetch::Fetched;

/// The most bytes of media kept: a few prompts' worth at the default caps.
const MEDIA_CACHE_BYTES: usize = 32 * 1024 * 1024;
/// The most media kept.
const MEDIA_CACHE_ENTRIES: usize = 64;

/// What a cached medium is known by.
type Key = (String, Option<String>, MediaKind);

/// The media fetched lately. Cheap to clone: clones share one cache.
#[derive(Debug, Clone, Default)]
pub(crate) struct MediaCache {
    inner: Arc<Mutex<Entries>>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Oldest first.
    kept: VecDeque<(Key, Fetched)>,
    bytes: usize,
}

fn key(media: &MediaRef) -> Key {
    (media.url.clone(), media.sha256.clone(), media.kind())
}

impl MediaCache {
    /// The medium `media` names, if it was fetched lately.
    pub(crate) fn get(&self, media: &MediaRef) -> Option<Fetched> {
        let key = key(media);
        let entries = self.lock();
        entries
            .kept
            .iter()
            .find(|(kept, _)| *kept == key)
            .map(|(_, fetched)| fetched.clone())
    }

    /// Keeps `fetched` for `media`, making room by dropping the oldest; a
    /// medium larger than the whole cache is not kept.
    pub(crate) fn put(&self, media: &MediaRef, fetched: &Fetched) {
        let size = fetched.bytes.len();
        if size > MEDIA_CACHE_BYTES {
            return;
        }
        let key = key(media);
        let mut entries = self.lock();
        if entries.kept.iter().any(|(kept, _)| *kept == key) {
            return;
        }
        while entries.kept.len() >= MEDIA_CACHE_ENTRIES || entries.bytes + size > MEDIA_CACHE_BYTES {
            let Some((_, dropped)) = entries.kept.pop_front() else {
                break;
            };
            entries.bytes -= dropped.bytes.len();
        }
        entries.bytes += size;
        entries.kept.push_back((key, fetched.clone()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // Each change leaves the entries and their byte count in step, so
        // a poisoned lock is used as it is.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(url: &str, sha256: Option<&str>) -> MediaRef {
        MediaRef {
            url: url.into(),
            mime: None,
            sha256: sha256.map(str::to_owned),
            size: None,
            dim: None,
        }
    }

    fn fetched(bytes: usize) -> Fetched {
        Fetched {
            kind: MediaKind::Image,
            mime: "image/png",
            bytes: vec![0; bytes],
        }
    }

    #[test]
    fn a_medium_is_found_by_its_url_hash_and_kind() {
        let cache = MediaCache::default();
        let png = media("https://e.com/a.png", Some("aa"));
        cache.put(&png, &fetched(3));
        assert_eq!(cache.get(&png), Some(fetched(3)));
        assert_eq!(
            cache.get(&media("https://e.com/a.png", Some("bb"))),
            None,
            "another hash"
        );
        assert_eq!(cache.get(&media("https://e.com/a.png", None)), None);
        let mut as_audio = png.clone();
        as_audio.mime = Some("audio/ogg".into());
        assert_eq!(cache.get(&as_audio), None, "another kind");
    }

    #[test]
    fn the_oldest_go_first_past_the_bounds() {
        let cache = MediaCache::default();
        let third = MEDIA_CACHE_BYTES / 3;
        for n in 0..3 {
            cache.put(&media(&format!("https://e.com/{n}.png"), None), &fetched(third));
        }
        cache.put(&media("https://e.com/3.png", None), &fetched(third));
        assert_eq!(
            cache.get(&media("https://e.com/0.png", None)),
            None,
            "dropped for room"
        );
        assert!(cache.get(&media("https://e.com/3.png", None)).is_some());
        assert!(cache.lock().bytes <= MEDIA_CACHE_BYTES);

        cache.put(
            &media("https://e.com/huge.png", None),
            &fetched(MEDIA_CACHE_BYTES + 1),
        );
        assert_eq!(cache.get(&media("https://e.com/huge.png", None)), None);

        let many = MediaCache::default();
        for n in 0..=MEDIA_CACHE_ENTRIES {
            many.put(&media(&format!("https://e.com/{n}.png"), None), &fetched(1));
        }
        assert_eq!(many.lock().kept.len(), MEDIA_CACHE_ENTRIES);
        assert_eq!(many.get(&media("https://e.com/0.png", None)), None);
    }
}
