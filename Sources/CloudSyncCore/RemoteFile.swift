import Foundation

/// A hash kind a provider publishes for file contents.
public enum HashKind: String, Sendable, Codable, CaseIterable, Hashable {
    case md5
    case sha1
    case sha256
    /// Dropbox `content_hash`: SHA-256 over the concatenated SHA-256 digests of 4 MiB blocks (hex).
    case dropbox
    /// OneDrive `quickXorHash`: 20 bytes, standard base64.
    case quickXor = "quickxor"
}

/// A provider's hash of a file's contents, as the provider prints it (hex, or base64 for quickXor).
public struct ContentHash: Sendable, Codable, Hashable {
    public var kind: HashKind
    public var value: String

    public init(kind: HashKind, value: String) {
        self.kind = kind
        self.value = value
    }
}

extension ContentHash {
    /// Whether `computed` is this hash: hex digests compare case-insensitively, base64 (quickXor) exactly.
    public func matches(_ computed: String) -> Bool {
        kind == .quickXor ? value == computed : value.lowercased() == computed.lowercased()
    }
}

/// The identity of a remote file's contents: when any part changes, cached bytes are dropped.
public struct Fingerprint: Sendable, Codable, Hashable {
    public var size: Int64
    /// Whole seconds since 1970; providers differ in sub-second precision, so it is not compared finer.
    public var modified: Int64
    /// Provider revision: Dropbox `rev`, Drive `headRevisionId`/md5, OneDrive `cTag`/`eTag`, Yandex `revision`,
    /// WebDAV `getetag`. Empty when the provider has none.
    public var revision: String

    public init(size: Int64, modified: Int64, revision: String) {
        self.size = size
        self.modified = modified
        self.revision = revision
    }
}

/// One audio file as listed by a provider.
public struct RemoteFile: Sendable, Codable, Hashable {
    /// Path relative to the remote's root, `/`-separated, no leading slash, as the provider spells it
    /// (display case). This is what the user sees and what `tracks/<remote>/` mirrors.
    public var path: String
    /// The provider's stable id (Drive and OneDrive item id, Dropbox `id:`), if it has one.
    public var providerID: String?
    public var size: Int64
    public var modified: Date
    /// See ``Fingerprint/revision``.
    public var revision: String
    public var hashes: [ContentHash]
    public var mimeType: String?
    /// The provider's own download address when it is known from the listing (Dropbox `path_display`, OneDrive's
    /// `drives/{id}/items/{id}` of a shared item, a Yandex `disk:/` path); providers may keep anything here that
    /// `resolveDownload(for:)` needs. Never shown to users.
    public var downloadHint: String?

    public init(path: String, providerID: String? = nil, size: Int64, modified: Date, revision: String = "",
                hashes: [ContentHash] = [], mimeType: String? = nil, downloadHint: String? = nil) {
        self.path = path
        self.providerID = providerID
        self.size = size
        self.modified = modified
        self.revision = revision
        self.hashes = hashes
        self.mimeType = mimeType
        self.downloadHint = downloadHint
    }

    /// `revision` compares without a weak-validator prefix: Apache marks an ETag weak (`W/"x"`) for a second
    /// after a write, then strong (`"x"`); both name the same version.
    public var fingerprint: Fingerprint {
        let plain = revision.hasPrefix("W/") ? String(revision.dropFirst(2)) : revision
        return Fingerprint(size: size, modified: Int64(modified.timeIntervalSince1970.rounded(.down)), revision: plain)
    }

    /// The strongest hash the provider gave, preferring SHA-256, then provider-specific ones, then SHA-1 and MD5.
    public var preferredHash: ContentHash? {
        let order: [HashKind] = [.sha256, .dropbox, .quickXor, .sha1, .md5]
        for kind in order { if let h = hashes.first(where: { $0.kind == kind }) { return h } }
        return nil
    }
}
