//! Flow control for `pub --sub M`: publishers that do not outrun their subscribers.
//!
//! Core NATS has no back pressure: a publisher faster than a subscriber fills the
//! server's outbound buffer for that subscriber (64 MiB by default, `max_pending`), then
//! the server drops it as a slow consumer and the messages are gone. `nats bench`
//! survives only because nats.go buffers without limit in the subscriber's process.
//!
//! diskpulse's publishers and subscribers of one run share a [`Flow`]: a count of the
//! messages the publishers have handed to the server (added after each write of the
//! publisher's buffer, so a count never includes a message still in the publisher's own
//! buffer: no publisher can wait for itself) and, per subscriber, how many it has
//! received (stored after each read). Before each write a publisher waits while
//! `sent - min(received) > window`: no subscriber is ever more than `window` messages
//! behind, which keeps the server's buffer for it far below `max_pending`
//! ([`Flow::default_window`]: 16 MiB of messages). The subscribers wake waiting
//! publishers after each read.
//!
//! A subscriber that has ended (its count reached, --duration, Ctrl-C) stops counting in
//! the minimum. One that makes no progress for [`STALL_NS`] while publishers wait for it
//! (a stalled process, a dead connection) is left behind: a `flow_control_left_behind`
//! event names it, the publishers go on without it, and the messages it misses are
//! counted `missing` at the end (the run fails, exit 1). `pub` without subscribers has
//! no [`Flow`] and costs nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use format::events::{Body, FlowControlLeftBehind};

use super::workers::Ctx;

/// How long publishers wait for a subscriber that makes no progress before they leave it
/// behind.
const STALL_NS: u64 = 2_000_000_000;

/// A subscriber's count that no longer holds anyone back.
const GONE: u64 = u64::MAX;

/// One subscriber's counter on its own cache line (written after every read).
#[repr(align(64))]
struct Slot(AtomicU64);

/// What the publishers and subscribers of one run share.
pub struct Flow {
    window: u64,
    sent: AtomicU64,
    subs: Vec<Slot>,
    /// Publishers waiting: subscribers notify after a read while there are any.
    waiting: AtomicU64,
    notify: tokio::sync::Notify,
}

impl Flow {
    /// `window` messages in flight at most; `subs` subscribers.
    pub fn new(window: u64, subs: usize) -> Arc<Flow> {
        Arc::new(Flow {
            window: window.max(1),
            sent: AtomicU64::new(0),
            subs: (0..subs).map(|_| Slot(AtomicU64::new(0))).collect(),
            waiting: AtomicU64::new(0),
            notify: tokio::sync::Notify::new(),
        })
    }

    /// The default window for messages of `size` bytes: 16 MiB of them (with ~64 bytes of
    /// protocol per message), at least 1,000 messages: a quarter of the server's default
    /// `max_pending` (64 MiB), and enough to keep every socket buffer on the way full.
    pub(crate) fn default_window(size: usize) -> u64 {
        ((16u64 << 20) / (size as u64 + 64)).max(1000)
    }

    pub fn window(&self) -> u64 {
        self.window
    }

    /// `n` more messages were handed to the server.
    #[inline]
    pub fn sent(&self, n: u64) {
        self.sent.fetch_add(n, Ordering::SeqCst);
    }

    /// Subscriber `i` has received `got` messages in all.
    #[inline]
    pub fn received(&self, i: usize, got: u64) {
        if let Some(s) = self.subs.get(i) {
            if s.0.load(Ordering::SeqCst) != GONE {
                s.0.store(got, Ordering::SeqCst);
            }
        }
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Subscriber `i` has ended: it holds no one back any more.
    pub fn leave(&self, i: usize) {
        if let Some(s) = self.subs.get(i) {
            s.0.store(GONE, Ordering::SeqCst);
        }
        self.notify.notify_waiters();
    }

    /// The slowest subscriber still counted: (index, received).
    fn slowest(&self) -> Option<(usize, u64)> {
        self.subs
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.0.load(Ordering::SeqCst)))
            .filter(|&(_, g)| g != GONE)
            .min_by_key(|&(_, g)| g)
    }

    fn room(&self) -> Result<(), (usize, u64)> {
        match self.slowest() {
            Some((i, g)) if self.sent.load(Ordering::SeqCst).saturating_sub(g) > self.window => {
                Err((i, g))
            }
            _ => Ok(()),
        }
    }

    /// Waits until no subscriber is more than the window behind (or the run is over).
    /// Returns at once, without touching the waiter machinery, when there is room.
    #[inline]
    pub(crate) async fn wait_room(&self, ctx: &Ctx) {
        if self.room().is_ok() {
            return;
        }
        self.wait_slow(ctx).await
    }

    async fn wait_slow(&self, ctx: &Ctx) {
        let mut since = ctx.clock.now_ns();
        let mut behind = None;
        self.waiting.fetch_add(1, Ordering::SeqCst);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (i, g) = match self.room() {
                Ok(()) => break,
                Err(x) => x,
            };
            let now = ctx.clock.now_ns();
            if ctx.over(now) {
                break;
            }
            if behind != Some((i, g)) {
                behind = Some((i, g));
                since = now;
            } else if now.saturating_sub(since) > STALL_NS {
                // The same subscriber at the same count for STALL_NS: go on without it.
                let s = &self.subs[i].0;
                if s.compare_exchange(g, GONE, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    ctx.events.event_at(
                        now,
                        Body::FlowControlLeftBehind(FlowControlLeftBehind {
                            client: super::record::client_name(super::record::Role::Sub, i),
                            received: g,
                            sent: self.sent.load(Ordering::SeqCst),
                            window: self.window,
                            stalled_ns: now - since,
                        }),
                    );
                }
                continue;
            }
            // Looked at again every 10 ms: Ctrl-C, --duration, a stalled subscriber.
            let _ = tokio::time::timeout(Duration::from_millis(10), notified).await;
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_held_by_the_slowest_subscriber_still_counted() {
        let f = Flow::new(100, 2);
        f.sent(150);
        f.received(0, 150);
        f.received(1, 40);
        assert_eq!(f.room(), Err((1, 40)));
        f.received(1, 50);
        assert_eq!(f.room(), Ok(()));
        f.sent(1);
        assert_eq!(f.room(), Err((1, 50)));
        f.leave(1);
        assert_eq!(f.room(), Ok(()));
        // A subscriber that left is not counted again by a late store.
        f.received(1, 10);
        assert_eq!(f.room(), Ok(()));
    }

    #[test]
    fn the_default_window_is_16_mib_of_messages() {
        assert_eq!(Flow::default_window(128), (16 << 20) / 192);
        assert_eq!(Flow::default_window(1 << 20), 1000);
    }
}
