import CloudSyncCore
import Foundation
import Synchronization

/// Turns SIGINT, SIGTERM and SIGHUP into a call of `onInterrupt` (once; a second signal of the same kind then
/// ends the process at once, the default action) and remembers which came first, for the exit code: 130 for
/// SIGINT, 143 for SIGTERM and SIGHUP (a closed terminal is handled like a polite stop).
final class InterruptHandler: Sendable {
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    /// The first signal received; shared with the signal sources' handlers.
    private final class First: Sendable {
        let value = Mutex<Int32?>(nil)
    }

    private let sources: Mutex<[any DispatchSourceSignal]>
    private let first: First

    init(_ onInterrupt: @escaping @Sendable () -> Void) {
        var sources: [any DispatchSourceSignal] = []
        let first = First()
        self.first = first
        for sig in Self.signals {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                first.value.withLock { if $0 == nil { $0 = sig } }
                onInterrupt()
                signal(sig, SIG_DFL)
            }
            source.resume()
            sources.append(source)
        }
        self.sources = Mutex(sources)
    }

    /// The signal received first, if any.
    var received: Int32? { first.value.withLock { $0 } }

    /// What the process exits with after the interruption: `.interrupted` (130) for SIGINT, else `.terminated` (143).
    var exitCode: ExitCode { received == SIGINT ? .interrupted : .terminated }

    func stop() {
        sources.withLock { sources in
            for s in sources { s.cancel() }
        }
        for sig in Self.signals { signal(sig, SIG_DFL) }
    }
}

/// The task a signal cancels, installed after the handler: a signal that comes first (the handler must be in
/// place before the work can print anything a person or a script reacts to) cancels the task once it is set.
final class CancellationTarget: Sendable {
    private struct State {
        var cancel: (@Sendable () -> Void)?
        var requested = false
    }

    private let state = Mutex(State())

    /// Cancels the target now, or as soon as it is set.
    func cancel() {
        let action: (@Sendable () -> Void)? = state.withLock {
            $0.requested = true
            return $0.cancel
        }
        action?()
    }

    func set<Success, Failure>(_ task: Task<Success, Failure>) {
        let cancelNow: Bool = state.withLock {
            $0.cancel = { task.cancel() }
            return $0.requested
        }
        if cancelNow { task.cancel() }
    }
}
