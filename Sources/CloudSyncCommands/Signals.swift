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
