import Foundation

/// The one spelling of a provider's listing cursor: compact JSON `{"v": <version>, …the payload's keys…}`. The
/// payload is the provider's (its change token, the root it was made for, an ``ItemTree``); the version says which
/// shape of payload it is, so a cloudsync that changed the shape refuses an older cursor and lists everything
/// again instead of misreading it. The payload must be a keyed value without a key "v".
public enum CursorEnvelope {
    /// Why a stored cursor cannot be used; every case means "a full listing is needed".
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// Not a cursor of this spelling: damaged, another provider's, or written before cursors had one.
        case unreadable
        /// A cursor of another payload version (an older or newer cloudsync).
        case version(found: Int, reads: Int)

        public var description: String {
            switch self {
            case .unreadable: "the stored cursor is not readable (damaged, or written by an older cloudsync); listing everything again"
            case .version(let found, let reads):
                "the stored cursor has format \(found) and this cloudsync reads format \(reads); listing everything again"
            }
        }
    }

    /// `payload` sealed with `version`. Throws only what encoding `payload` throws.
    public static func seal<Payload: Encodable>(_ payload: Payload, version: Int) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(Sealed(version: version, payload: payload)), as: UTF8.self)
    }

    /// The payload of `text` when it was sealed with `version`, else why not.
    public static func open<Payload: Decodable>(_ type: Payload.Type = Payload.self, from text: String, version: Int)
        -> Result<Payload, Refusal> {
        let data = Data(text.utf8)
        guard let found = try? JSONDecoder().decode(Version.self, from: data).v else { return .failure(.unreadable) }
        guard found == version else { return .failure(.version(found: found, reads: version)) }
        guard let payload = try? JSONDecoder().decode(Payload.self, from: data) else { return .failure(.unreadable) }
        return .success(payload)
    }

    private enum Key: String, CodingKey { case v }

    private struct Version: Decodable { var v: Int }

    /// The payload's keys and "v" in one JSON object.
    private struct Sealed<Payload: Encodable>: Encodable {
        var version: Int
        var payload: Payload

        func encode(to encoder: any Encoder) throws {
            try payload.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(version, forKey: .v)
        }
    }
}

/// A provider's cursor payload of one format version, sealed and opened through ``CursorEnvelope``.
public protocol VersionedCursor: Codable {
    /// The payload's format; a stored cursor of another one is refused (a full listing).
    static var version: Int { get }
}

extension VersionedCursor {
    /// The cursor text.
    public func sealed() throws -> String { try CursorEnvelope.seal(self, version: Self.version) }

    /// The payload in cursor `text`, or why it cannot be used.
    public static func open(_ text: String) -> Result<Self, CursorEnvelope.Refusal> {
        CursorEnvelope.open(Self.self, from: text, version: version)
    }
}
