import Synchronization

/// Keeps the files of a run asking for bytes in the run's order while twice `lead` are open: file k (counted from
/// 0 in launch order) opens once file k − `lead` has handed the transport a request, found its entry held by
/// another writer (it waits for it out of order), or ended (``pass(_:)``; the first counts). At most `lead` files
/// are then between opening and their first request, so with one job the files ask strictly one after another, as
/// they did with one open; a file waiting for its entry holds back none behind it.
final class OpenGate: Sendable {
    private struct State {
        /// Which files passed (one byte per file of the run).
        var passed: [Bool]
        /// Followers waiting, by the file they wait for.
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Everything opens (the run stops).
        var open = false
    }

    private let lead: Int
    private let state: Mutex<State>

    init(lead: Int, files: Int) {
        self.lead = max(1, lead)
        state = Mutex(State(passed: Array(repeating: false, count: max(0, files))))
    }

    /// Returns once file `index` may open. Cancellation opens the gate (the run is stopping).
    func wait(_ index: Int) async {
        let before = index - lead
        guard before >= 0 else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.open || !s.passed.indices.contains(before) || s.passed[before] { return true }
                    s.waiting[before] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            openAll()
        }
    }

    /// File `index` asked for bytes or ended: the file `lead` after it may open.
    func pass(_ index: Int) {
        let follower = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard s.passed.indices.contains(index), !s.passed[index] else { return nil }
            s.passed[index] = true
            return s.waiting.removeValue(forKey: index)
        }
        follower?.resume()
    }

    /// Lets every waiting and future file open.
    func openAll() {
        let all = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiting = [:] }
            return Array(s.waiting.values)
        }
        for c in all { c.resume() }
    }
}
