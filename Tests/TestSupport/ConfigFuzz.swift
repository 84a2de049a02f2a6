import Foundation

/// `config.example.toml` and the config fuzzer's mutations, shared by the in-process parser fuzz
/// (CloudSyncConfigTests) and the fuzz run of the real binary (CloudSyncCommandsTests).
public enum ConfigExample {
    public static let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("config.example.toml")

    public static func text() throws -> String { try String(contentsOf: url, encoding: .utf8) }

    /// The example with every commented-out key, section and array continuation switched on.
    public static func uncommented() throws -> String {
        var out: [String] = []
        var continuing = false
        for line in try text().components(separatedBy: "\n") {
            let rest = line.hasPrefix("# ") ? String(line.dropFirst(2)) : nil
            if let rest, let first = rest.first, first != " ", first != "#",
               rest.contains(" = ") || rest.hasPrefix("[") {
                out.append(rest)
                continuing = rest.hasSuffix(",")
            } else if continuing, let rest {
                out.append(rest)
                continuing = rest.hasSuffix(",")
            } else {
                out.append(line)
            }
        }
        return out.joined(separator: "\n")
    }

    /// Bytes that matter to TOML's grammar, to make mutations hit interesting paths.
    public static let interesting: [UInt8] = Array("[]{}=\"'.,#\\\n\r\t 0123456789+-_:eExobTZ".utf8) + [0x00, 0x7F, 0xC3, 0xA9, 0xFF, 0xEF]

    /// `bytes` with 1 to `maximumEdits` random edits: a byte replaced, inserted or removed, a run duplicated.
    public static func mutate(_ original: [UInt8], maximumEdits: Int = 6, using random: inout SeededRandom) -> [UInt8] {
        var bytes = original
        for _ in 0..<Int.random(in: 1...maximumEdits, using: &random) {
            let at = Int.random(in: 0..<max(1, bytes.count), using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !bytes.isEmpty: bytes[at] = UInt8.random(in: 0...255, using: &random)
            case 1: bytes.insert(interesting.randomElement(using: &random) ?? 0, at: min(at, bytes.count))
            case 2 where !bytes.isEmpty: bytes.remove(at: at)
            case 3 where bytes.count > 2:
                let end = min(bytes.count, at + Int.random(in: 1...40, using: &random))
                bytes.insert(contentsOf: bytes[at..<end], at: Int.random(in: 0...bytes.count, using: &random))
            default:
                if at < bytes.count { bytes[at] = interesting.randomElement(using: &random) ?? 0 }
            }
        }
        return bytes
    }
}
