import CloudSyncCore
import Foundation
import Synchronization

/// Retry policy for one remote: exponential backoff with full jitter, `Retry-After` honoured exactly, and a
/// pause shared by every request of the remote (a 429 slows all workers, not just the one that got it).
///
/// Share one `Pacer` between every request of a remote (API calls and downloads). Waits hold no lock: other
/// requests keep being admitted and delayed while one sleeps. Not an actor: `run` would then hop onto it and off
/// again around every request (two executor switches per ranged GET of a pull, each a wake-up of another thread
/// when the pool is busy); the one shared value, the pause, sits behind a mutex.
public final class Pacer: Sendable {
    public struct Policy: Sendable {
        /// Retries after the first attempt.
        public var retries: Int
        /// Ceiling of the first retry's delay; doubles with each retry.
        public var baseDelay: TimeInterval
        /// Largest backoff ceiling (Retry-After may ask for longer and is honoured).
        public var maxDelay: TimeInterval
        /// Retries of a request that failed with `.unreachable` (DNS, refused, no route): at most `retries`;
        /// interactive callers (`ls`, `serve`) set it low so an offline machine answers from the cache at once.
        public var unreachableRetries: Int
        /// Largest backoff ceiling for `.unreachable`. Nothing answered, so there is no server to spare: the
        /// retries are for a network coming back (Wi-Fi after a resume takes seconds), and a pull with the cloud
        /// unplugged ended after ~2 minutes of 60 s ceilings; with 5 s the ten retries take ~20 s (at most ~38).
        public var unreachableMaxDelay: TimeInterval

        public init(retries: Int = 10, baseDelay: TimeInterval = 0.5, maxDelay: TimeInterval = 60,
                    unreachableRetries: Int? = nil, unreachableMaxDelay: TimeInterval = 5) {
            self.retries = retries
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
            self.unreachableRetries = min(retries, unreachableRetries ?? retries)
            self.unreachableMaxDelay = min(maxDelay, unreachableMaxDelay)
        }
    }

    public let policy: Policy
    private let logger: Logger
    private let sleep: @Sendable (TimeInterval) async throws -> Void
    private let now: @Sendable () -> Date
    /// No request of this remote starts before this moment.
    private let pausedUntil = Mutex(Date.distantPast)

    /// - Parameters:
    ///   - sleep: waits the given seconds (tests inject a fake together with `now`).
    ///   - now: the clock pauses are measured with.
    public init(policy: Policy = Policy(), logger: Logger = .silent,
                sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(for: .seconds($0)) },
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.policy = policy
        self.logger = logger
        self.sleep = sleep
        self.now = now
    }

    /// Runs `operation`, retrying it while it throws a retryable `ProviderError`, up to `policy.retries` times.
    /// Before each attempt it waits while the remote is paused. A retryable error with `retryAfter` waits exactly
    /// that long; `.rateLimited` errors (with or without `retryAfter`) pause the whole remote. Rethrows the last
    /// error (its advice saying it gave up: ``ProviderError/givenUp(after:)``), or any non-retryable one, or
    /// `CancellationError`, unchanged. A download that did not start because the
    /// remote was paused while it waited for a transfer slot (``TransferSlot/Deferred``) is asked again, not counted.
    ///
    /// `progress` (a download's bytes so far): an attempt that moved it past every earlier attempt starts the count
    /// of retries again, so a connection that keeps breaking but brings bytes each time (a train's Wi-Fi, a proxy
    /// cutting long responses) finishes the file instead of failing it after `retries` cuts.
    public func run<T: Sendable>(_ what: String, progress: (@Sendable () -> Int64)? = nil,
                                 _ operation: @Sendable () async throws -> T) async throws -> T {
        var attempt = 0
        var furthest = progress?() ?? 0
        while true {
            try await waitWhilePaused()
            do {
                return try await operation()
            } catch is TransferSlot.Deferred {
                // It waited for a transfer slot while the remote was paused: ask again after the pause.
                continue
            } catch let error as ProviderError where error.isRetryable {
                if let progress {
                    let now = progress()
                    if now > furthest {
                        furthest = now
                        attempt = 0
                    }
                }
                // Spent: its advice must not promise a retry in the final report.
                guard attempt < retries(for: error) else { throw error.givenUp(after: attempt) }
                attempt += 1
                let delay = error.retryAfter ?? backoff(attempt: attempt, ceiling: error.code == .unreachable ? policy.unreachableMaxDelay : policy.maxDelay)
                logger.info("\(what): \(error.message); retry \(attempt)/\(retries(for: error)) in \(String(format: "%.1f", delay)) s")
                if error.code == .rateLimited {
                    pause(for: delay)
                } else {
                    try await sleep(delay)
                }
            }
        }
    }

    /// The retries `error` gets: `unreachableRetries` for a host that cannot be reached, else `retries`.
    private func retries(for error: ProviderError) -> Int {
        error.code == .unreachable ? policy.unreachableRetries : policy.retries
    }

    /// Whether the remote is paused now (a request would wait before it starts).
    public var isPaused: Bool { pausedUntil.withLock { $0 } > now() }

    /// Pauses every request of the remote for `seconds` from now (extends, never shortens, a pause).
    public func pause(for seconds: TimeInterval) {
        let until = now().addingTimeInterval(seconds)
        pausedUntil.withLock { if until > $0 { $0 = until } }
    }

    /// Pauses every request of the remote according to a response's `Retry-After`, if it has one.
    public func honourRetryAfter(in headers: HTTPHeaders) {
        if let seconds = retryAfter(from: headers, now: now()) { pause(for: seconds) }
    }

    /// Full jitter: uniform in 0...min(`ceiling`, baseDelay·2^(attempt-1)) for attempt ≥ 1.
    func backoff(attempt: Int, ceiling: TimeInterval? = nil) -> TimeInterval {
        let top = min(ceiling ?? policy.maxDelay, policy.baseDelay * pow(2, Double(max(0, attempt - 1))))
        return Double.random(in: 0...max(0, top))
    }

    private func waitWhilePaused() async throws {
        while true {
            let wait = pausedUntil.withLock { $0 }.timeIntervalSince(now())
            if wait <= 0 { return }
            try await sleep(wait)
        }
    }
}
