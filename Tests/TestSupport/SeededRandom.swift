import Foundation

/// SplitMix64: small, seeded, reproducible randomness, so property and fuzz tests can print and replay their
/// seed. The same seed gives the same sequence on every machine.
public struct SeededRandom: RandomNumberGenerator {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` pseudo-random bytes.
    public mutating func bytes(_ count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            var i = 0
            while i < count {
                var word = next()
                for _ in 0 ..< min(8, count - i) {
                    bytes[i] = UInt8(truncatingIfNeeded: word)
                    word >>= 8
                    i += 1
                }
            }
        }
        return data
    }
}

/// The seed of a property or fuzz test named `name`: `CLOUDSYNC_TEST_SEED` when set (to replay a failure),
/// else a random one, printed with the line that replays it.
public func seed(_ name: String) -> UInt64 {
    if let text = ProcessInfo.processInfo.environment["CLOUDSYNC_TEST_SEED"], let value = UInt64(text) { return value }
    let value = UInt64.random(in: 0...UInt64.max)
    print("\(name): seed \(value) (replay with CLOUDSYNC_TEST_SEED=\(value))")
    return value
}
