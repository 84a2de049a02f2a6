import Foundation
import Synchronization

/// A token bucket shared by every transfer of one or more transports: `bytesPerSecond` on average, with
/// bursts of at most `burst` bytes after an idle spell.
///
/// The transport asks before handing received bytes on (`admit`); when the bucket is in debt the transfer
/// is paused (`CURL_WRITEFUNC_PAUSE`) and resumed once the debt is paid back. A received chunk (up to the
/// receive buffer size) is admitted whole, so the bucket may run up to one chunk per transfer into debt;
/// over any window of a few seconds the rate stays within `bytesPerSecond` plus one burst plus one chunk
/// per transfer. Socket buffers still fill at full speed: the limit applies to what reaches the disk,
/// which TCP flow control then propagates to the sender.
public final class BandwidthLimiter: Sendable {
    public let bytesPerSecond: Int64
    public let burst: Int64

    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }
    private let bucket: Mutex<Bucket>

    /// - Parameters:
    ///   - bytesPerSecond: average rate, > 0.
    ///   - burst: bucket capacity; defaults to a quarter second of traffic (at least 16 KiB).
    public init(bytesPerSecond: Int64, burst: Int64? = nil) {
        precondition(bytesPerSecond > 0, "BandwidthLimiter needs a positive rate")
        self.bytesPerSecond = bytesPerSecond
        self.burst = burst ?? max(16 * 1024, bytesPerSecond / 4)
        bucket = Mutex(Bucket(tokens: Double(self.burst), updated: .now))
    }

    /// Takes `count` bytes from the bucket if it is not in debt and returns true; returns false (taking
    /// nothing) while it is in debt.
    public func admit(_ count: Int) -> Bool {
        bucket.withLock { b in
            refill(&b)
            guard b.tokens >= 0 else { return false }
            b.tokens -= Double(count)
            return true
        }
    }

    /// Seconds until the bucket is out of debt (0 when it is not).
    public func delayUntilAdmitting() -> TimeInterval {
        bucket.withLock { b in
            refill(&b)
            return b.tokens >= 0 ? 0 : -b.tokens / Double(bytesPerSecond)
        }
    }

    private func refill(_ b: inout Bucket) {
        let now = ContinuousClock.now
        let elapsed = now - b.updated
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        b.tokens = min(Double(burst), b.tokens + seconds * Double(bytesPerSecond))
        b.updated = now
    }
}
