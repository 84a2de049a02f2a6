import CloudSyncCore
import Foundation

/// Retry policy for one remote: exponential backoff with full jitter, `Retry-After` honoured exactly, and a
/// pause shared by every request of the remote (a 429 slows all workers, not just the one that got it).
public actor Pacer {
    public struct Policy: Sendable {
        /// Retries after the first attempt.
        public var retries: Int
        public var baseDelay: TimeInterval
        public var maxDelay: TimeInterval

        public init(retries: Int = 10, baseDelay: TimeInterval = 0.5, maxDelay: TimeInterval = 60) {
            self.retries = retries
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
        }
    }

    public let policy: Policy
    private let logger: Logger
    private let sleep: @Sendable (TimeInterval) async throws -> Void
    /// No request of this remote starts before this moment.
    private var pausedUntil: Date = .distantPast

    public init(policy: Policy = Policy(), logger: Logger = .silent,
                sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(for: .seconds($0)) }) {
        self.policy = policy
        self.logger = logger
        self.sleep = sleep
    }

    /// Runs `operation`, retrying it while it throws a retryable `ProviderError`, up to `policy.retries` times.
    /// Rethrows the last error (or any non-retryable one) unchanged.
    public func run<T: Sendable>(_ what: String, _ operation: @Sendable () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            try await waitWhilePaused()
            do {
                return try await operation()
            } catch let error as ProviderError where error.isRetryable && attempt < policy.retries {
                attempt += 1
                let delay = error.retryAfter ?? backoff(attempt: attempt)
                if error.retryAfter != nil || error.code == .rateLimited {
                    pause(for: delay)
                }
                logger.info("\(what): \(error.message); retry \(attempt)/\(policy.retries) in \(String(format: "%.1f", delay)) s")
                if error.retryAfter == nil && error.code != .rateLimited {
                    try await sleep(delay)
                }
            }
        }
    }

    /// Pauses every request of the remote for `seconds` from now (extends, never shortens, a pause).
    public func pause(for seconds: TimeInterval) {
        let until = Date().addingTimeInterval(seconds)
        if until > pausedUntil { pausedUntil = until }
    }

    /// Full jitter: uniform in 0...min(cap, base·2^attempt).
    func backoff(attempt: Int) -> TimeInterval {
        let ceiling = min(policy.maxDelay, policy.baseDelay * pow(2, Double(attempt)))
        return Double.random(in: 0...ceiling)
    }

    private func waitWhilePaused() async throws {
        while true {
            let wait = pausedUntil.timeIntervalSinceNow
            if wait <= 0 { return }
            try await sleep(wait)
        }
    }
}
