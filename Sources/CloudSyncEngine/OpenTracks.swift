import CloudSyncCore
import Synchronization

/// The tracks clients of `serve` have open now, counted per open, whatever serves their bytes (a remote serve can
/// fetch for, or one it serves from the cache only). ``ServeBudgetKeeper`` leaves them as they are: shrinking a
/// track under a player makes it fetch those bytes again, stall, or — for a remote that cannot fetch — fail.
public final class OpenTracks: Sendable {
    private let counts = Mutex<[RemotePath: Int]>([:])
    private let closes = Atomic<Int>(0)

    public init() {}

    /// Marks `track` open until the returned claim is released.
    public func open(_ track: RemotePath) -> OpenTrack {
        counts.withLock { $0[track, default: 0] += 1 }
        return OpenTrack(owner: self, track: track)
    }

    fileprivate func release(_ track: RemotePath) {
        counts.withLock { counts in
            let left = (counts[track] ?? 1) - 1
            counts[track] = left > 0 ? left : nil
        }
        closes.add(1, ordering: .relaxed)
    }

    /// The tracks open now.
    public var tracks: Set<RemotePath> { counts.withLock { Set($0.keys) } }

    /// Claims released so far: it moves when a client let go of a track.
    public var closesSoFar: Int { closes.load(ordering: .relaxed) }
}

/// One client's hold on an open track (``OpenTracks/open(_:)``). Released once: by ``release()``, or when it goes.
public final class OpenTrack: Sendable {
    private let owner: OpenTracks
    public let track: RemotePath
    private let released = Atomic<Bool>(false)

    fileprivate init(owner: OpenTracks, track: RemotePath) {
        self.owner = owner
        self.track = track
    }

    /// Lets go of the track. Idempotent.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        owner.release(track)
    }

    deinit { release() }
}
