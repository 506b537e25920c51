//! The chunk queue of one call: each worker's own chunks (static plans), a shared queue
//! (adaptive plans: workers pull, so fast devices take more), and orphans — chunks of a
//! device that failed — which any healthy worker picks up.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Debug)]
struct State {
    own: Vec<VecDeque<usize>>,
    shared: VecDeque<usize>,
    orphans: VecDeque<usize>,
    remaining: usize,
    alive: usize,
    waiting: usize,
    sharers_alive: usize,
}

impl State {
    /// The next chunk for `slot`, and whether it is an orphan of a failed device.
    fn take(&mut self, slot: usize, may_share: bool) -> Option<(usize, bool)> {
        if let Some(chunk) = self.own[slot].pop_front() {
            return Some((chunk, false));
        }
        if let Some(chunk) = self.orphans.pop_front() {
            return Some((chunk, true));
        }
        if may_share {
            return self.shared.pop_front().map(|c| (c, false));
        }
        None
    }
}

/// Hands out chunk indices to worker slots until every chunk is done.
#[derive(Debug)]
pub struct Scheduler {
    state: Mutex<State>,
    changed: Condvar,
    sharers: Vec<bool>,
}

impl Scheduler {
    /// `own[slot]`: the chunks planned for worker `slot`; `shared`: chunks any worker with
    /// `sharers[slot]` may pull.
    pub fn new(own: Vec<VecDeque<usize>>, shared: VecDeque<usize>, sharers: Vec<bool>) -> Self {
        let remaining = own.iter().map(VecDeque::len).sum::<usize>() + shared.len();
        let alive = own.len();
        let sharers_alive = sharers.iter().filter(|&&s| s).count();
        Scheduler {
            state: Mutex::new(State {
                own,
                shared,
                orphans: VecDeque::new(),
                remaining,
                alive,
                waiting: 0,
                sharers_alive,
            }),
            changed: Condvar::new(),
            sharers,
        }
    }

    /// The state, also after a worker panicked holding it (every update leaves it whole).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Chunks no worker was planned for: any worker takes them, like a failed one's.
    pub fn adopt(&self, chunks: impl IntoIterator<Item = usize>) {
        let mut state = self.lock();
        let before = state.orphans.len();
        state.orphans.extend(chunks);
        state.remaining += state.orphans.len() - before;
        drop(state);
        self.changed.notify_all();
    }

    /// The next chunk for `slot` if one is ready now, and whether it is an orphan.
    pub fn try_next(&self, slot: usize) -> Option<(usize, bool)> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(slot, self.sharers[slot])
    }

    /// The next chunk for `slot`, waiting while other workers still hold chunks that could
    /// come back as orphans. `None` when every chunk is done (or nothing can come).
    pub fn next(&self, slot: usize) -> Option<(usize, bool)> {
        let mut state = self.lock();
        loop {
            if let Some(chunk) = state.take(slot, self.sharers[slot]) {
                return Some(chunk);
            }
            // Every other live worker idle too: no chunk is in flight, nothing can return.
            if state.remaining == 0 || state.waiting + 1 >= state.alive {
                self.changed.notify_all();
                return None;
            }
            state.waiting += 1;
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
    }

    /// A chunk completed.
    pub fn done(&self) {
        let mut state = self.lock();
        state.remaining = state.remaining.saturating_sub(1);
        if state.remaining == 0 {
            self.changed.notify_all();
        }
    }

    /// Worker `slot` stops normally.
    pub fn exit(&self) {
        let mut state = self.lock();
        state.alive = state.alive.saturating_sub(1);
        drop(state);
        self.changed.notify_all();
    }

    /// Worker `slot` failed: `unfinished` and its remaining own chunks become orphans.
    pub fn fail(&self, slot: usize, unfinished: impl IntoIterator<Item = usize>) {
        let mut state = self.lock();
        let own: Vec<usize> = state.own[slot].drain(..).collect();
        state.orphans.extend(unfinished);
        state.orphans.extend(own);
        state.alive = state.alive.saturating_sub(1);
        if self.sharers[slot] {
            state.sharers_alive = state.sharers_alive.saturating_sub(1);
            // Nobody left may pull from the shared queue: its chunks become everyone's.
            if state.sharers_alive == 0 {
                let shared: Vec<usize> = state.shared.drain(..).collect();
                state.orphans.extend(shared);
            }
        }
        self.changed.notify_all();
    }

    /// Worker `slot` found the call itself wrong (a user's kernel the driver refuses or
    /// cannot run as written): no chunk is handed out any more, to any worker, since every
    /// one would fail alike; the chunks stay counted as remaining.
    pub fn abort(&self) {
        let mut state = self.lock();
        for own in &mut state.own {
            own.clear();
        }
        state.shared.clear();
        state.orphans.clear();
        state.alive = state.alive.saturating_sub(1);
        drop(state);
        self.changed.notify_all();
    }

    /// Worker slots of the call (the devices that run it, failed ones included).
    pub fn workers(&self) -> usize {
        self.sharers.len()
    }

    /// Chunks not completed yet.
    pub fn remaining(&self) -> usize {
        self.lock().remaining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_chunks_first_then_orphans_then_shared() {
        let s = Scheduler::new(
            vec![VecDeque::from([0, 1]), VecDeque::from([2])],
            VecDeque::from([3]),
            vec![true, false],
        );
        assert_eq!(s.try_next(1).map(|c| c.0), Some(2));
        s.fail(1, [2]);
        assert_eq!(s.try_next(0).map(|c| c.0), Some(0));
        assert_eq!(s.try_next(0).map(|c| c.0), Some(1));
        assert_eq!(s.try_next(0).map(|c| c.0), Some(2));
        assert_eq!(s.try_next(0).map(|c| c.0), Some(3));
        assert_eq!(s.try_next(0), None);
        for _ in 0..4 {
            s.done();
        }
        assert_eq!(s.remaining(), 0);
        assert_eq!(s.next(0), None);
    }

    #[test]
    fn a_waiting_worker_takes_the_chunks_of_a_failed_one() {
        let s = std::sync::Arc::new(Scheduler::new(
            vec![VecDeque::new(), VecDeque::from([0, 1])],
            VecDeque::new(),
            vec![false, false],
        ));
        let taken = s.try_next(1).map(|c| c.0);
        assert_eq!(taken, Some(0));
        let waiter = {
            let s = std::sync::Arc::clone(&s);
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while let Some((c, _)) = s.next(0) {
                    got.push(c);
                    s.done();
                }
                got
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.fail(1, [0]);
        let mut got = waiter.join().unwrap();
        got.sort();
        assert_eq!(got, vec![0, 1]);
        assert_eq!(s.remaining(), 0);
    }

    #[test]
    fn the_shared_queue_goes_to_everyone_when_its_last_puller_fails() {
        let s = Scheduler::new(
            vec![VecDeque::new(), VecDeque::new()],
            VecDeque::from([0, 1, 2]),
            vec![true, false],
        );
        assert_eq!(s.try_next(1), None);
        assert_eq!(s.try_next(0).map(|c| c.0), Some(0));
        s.fail(0, [0]);
        let mut got = Vec::new();
        while let Some((c, _)) = s.try_next(1) {
            got.push(c);
        }
        got.sort();
        assert_eq!(got, vec![0, 1, 2]);
    }

    #[test]
    fn adopted_chunks_go_to_any_worker_and_count_as_remaining() {
        let s = Scheduler::new(vec![VecDeque::from([0])], VecDeque::new(), vec![false]);
        s.adopt([1, 2]);
        assert_eq!(s.remaining(), 3);
        let mut got = Vec::new();
        while let Some((c, _)) = s.try_next(0) {
            got.push(c);
            s.done();
        }
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(s.remaining(), 0);
    }

    #[test]
    fn workers_stop_when_everything_is_done() {
        let s = Scheduler::new(
            vec![VecDeque::from([0]), VecDeque::new()],
            VecDeque::new(),
            vec![false; 2],
        );
        assert_eq!(s.next(0).map(|c| c.0), Some(0));
        s.done();
        assert_eq!(s.next(1), None);
        assert_eq!(s.next(0), None);
    }
}
