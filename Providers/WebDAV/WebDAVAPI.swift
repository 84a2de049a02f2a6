import CloudSyncCore
import CloudSyncXML
import Foundation

/// Wire types and parsing of RFC 4918 PROPFIND / 207 Multi-Status.
enum WebDAVAPI {
    static let davNamespace = "DAV:"
    static let ownCloudNamespace = "http://owncloud.org/ns"

    /// The PROPFIND body: the five DAV: properties we use plus ownCloud/Nextcloud `oc:checksums`. Servers that
    /// do not know a property answer it in a propstat with status 404 (Apache, rclone) or leave it out (nginx).
    static let propfindBody = Data("""
        <?xml version="1.0" encoding="utf-8"?>
        <d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"><d:prop>\
        <d:resourcetype/><d:getcontentlength/><d:getlastmodified/><d:getetag/><d:getcontenttype/><oc:checksums/>\
        </d:prop></d:propfind>
        """.utf8)

    /// One `<response>` with its successful (2xx) propstats merged. Text values are XML-unescaped and trimmed.
    struct Entry: Sendable, Hashable {
        /// The href exactly as sent (after XML unescaping), still percent-encoded.
        var href: String
        var isCollection: Bool = false
        var contentLength: String?
        var lastModified: String?
        var etag: String?
        var contentType: String?
        /// Texts of every `oc:checksum` element, e.g. "SHA1:... MD5:... ADLER32:...".
        var checksums: [String] = []
    }

    struct ParseError: Error, Sendable, CustomStringConvertible {
        var description: String
    }

    /// Parses a whole 207 body (golden fixtures and tests; listings stream, see ``MultistatusParser``).
    /// Throws `ParseError` when the body is not well-formed XML or its root is not `DAV:multistatus`.
    static func parseMultistatus(_ data: Data) throws -> [Entry] {
        var entries: [Entry] = []
        let parser = try MultistatusParser { entries.append($0) }
        try parser.feed(data)
        try parser.finish()
        return entries
    }

    /// Status code of a `<status>` line like "HTTP/1.1 404 Not Found"; nil when it has none.
    static func statusCode(_ line: String) -> Int? {
        let parts = line.split(separator: " ")
        guard parts.count >= 2 else { return nil }
        return Int(parts[1])
    }

    /// Hashes from `oc:checksum` texts: `SHA1:<40 hex>`, `MD5:<32 hex>`, `SHA256:<64 hex>`; others ignored.
    static func hashes(fromChecksums texts: [String]) -> [ContentHash] {
        var result: [ContentHash] = []
        for token in texts.flatMap({ $0.split(whereSeparator: { $0.isWhitespace || $0 == "," }) }) {
            guard let colon = token.firstIndex(of: ":") else { continue }
            let kindName = token[..<colon].uppercased()
            let value = token[token.index(after: colon)...].lowercased()
            let kind: HashKind
            let length: Int
            switch kindName {
            case "SHA1": (kind, length) = (.sha1, 40)
            case "MD5": (kind, length) = (.md5, 32)
            case "SHA256", "SHA-256": (kind, length) = (.sha256, 64)
            default: continue
            }
            guard value.count == length, value.allSatisfy(\.isHexDigit), !result.contains(where: { $0.kind == kind }) else { continue }
            result.append(ContentHash(kind: kind, value: value))
        }
        return result
    }
}

/// A streaming parse of a 207 body: bytes go in as they arrive, each `<response>` comes out as an ``WebDAVAPI/Entry``
/// as soon as it closes, and nothing else is kept, so memory does not grow with the answer. Namespace-aware on
/// libxml2 (CloudSyncXML): prefixes are ignored (Apache mixes `D:`, `lp1:`, `g0:` for `DAV:`). Responses whose own
/// `<status>` is not 2xx, and responses without an href, are dropped; properties from non-2xx propstats (the 404
/// block for unknown properties) are ignored. Errors are `ParseError`: not well-formed XML, a DOCTYPE, a root that
/// is not `DAV:multistatus`, over 32 MiB, or nesting deeper than 64. One parse, one thread at a time.
final class MultistatusParser {
    private let handler: MultistatusHandler
    private let parser: XMLPushParser

    /// `onEntry` gets each complete response in document order; an error it throws ends the parse.
    init(onEntry: @escaping (WebDAVAPI.Entry) throws -> Void) throws {
        handler = MultistatusHandler(onEntry: onEntry)
        do {
            parser = try XMLPushParser(handler: handler)
        } catch {
            throw WebDAVAPI.ParseError(description: error.description)
        }
    }

    /// Parses the next bytes of the body.
    func feed(_ bytes: UnsafeRawBufferPointer) throws {
        do { try parser.feed(bytes) } catch { throw Self.parseError(error) }
    }

    func feed(_ data: Data) throws { try data.withUnsafeBytes { try feed($0) } }

    /// Ends the body: throws when it is incomplete or was no multistatus.
    func finish() throws {
        do { try parser.finish() } catch { throw Self.parseError(error) }
        guard handler.sawRoot else { throw WebDAVAPI.ParseError(description: "the body is not a DAV:multistatus document") }
    }

    private static func parseError(_ error: any Error) -> any Error {
        switch error {
        case let xml as XMLError: WebDAVAPI.ParseError(description: "malformed multistatus XML: \(xml)")
        default: error
        }
    }
}

/// SAX state machine over `DAV:multistatus`, fed by ``MultistatusParser``.
private final class MultistatusHandler: XMLEventHandler {
    private let onEntry: (WebDAVAPI.Entry) throws -> Void
    private(set) var sawRoot = false

    private struct Name: Equatable {
        var namespace: String
        var local: String
    }

    private var stack: [Name] = []
    /// UTF-8 of the innermost element's text so far.
    private var text: [UInt8] = []
    private var current: WebDAVAPI.Entry?
    private var responseStatus: Int?
    private var propstat: WebDAVAPI.Entry?
    private var propstatStatus: Int?
    private var propstats: [(WebDAVAPI.Entry, Int?)] = []

    init(onEntry: @escaping (WebDAVAPI.Entry) throws -> Void) { self.onEntry = onEntry }

    private func isDAV(_ name: Name, _ local: String) -> Bool { name.namespace == WebDAVAPI.davNamespace && name.local == local }

    func startElement(namespace: String, name local: String, attributes: [XMLAttribute]) throws {
        let name = Name(namespace: namespace, local: local)
        if stack.isEmpty {
            guard isDAV(name, "multistatus") else {
                throw WebDAVAPI.ParseError(description: "the root element is {\(name.namespace)}\(name.local), not {DAV:}multistatus")
            }
            sawRoot = true
        }
        let parent = stack.last
        stack.append(name)
        text.removeAll(keepingCapacity: true)
        if isDAV(name, "response"), let parent, isDAV(parent, "multistatus") {
            current = WebDAVAPI.Entry(href: "")
            responseStatus = nil
            propstats = []
        } else if isDAV(name, "propstat"), current != nil {
            propstat = WebDAVAPI.Entry(href: "")
            propstatStatus = nil
        } else if isDAV(name, "collection"), let parent, isDAV(parent, "resourcetype"), propstat != nil {
            propstat?.isCollection = true
        }
    }

    func characters(_ utf8: UnsafeRawBufferPointer) throws { text.append(contentsOf: utf8) }

    func endElement(namespace: String, name local: String) throws {
        guard let name = stack.popLast() else { return }
        let parent = stack.last
        let value = String(decoding: ASCII.trimmingWhitespace(text), as: UTF8.self)
        text.removeAll(keepingCapacity: true)
        if propstat != nil, let parent {
            // Direct children of <prop>.
            if isDAV(parent, "prop") {
                if name.namespace == WebDAVAPI.davNamespace {
                    switch name.local {
                    case "getcontentlength": propstat?.contentLength = value
                    case "getlastmodified": propstat?.lastModified = value
                    case "getetag": propstat?.etag = value
                    case "getcontenttype": propstat?.contentType = value
                    default: break
                    }
                }
                // Microsoft's extension; its namespace varies between servers.
                if name.local == "iscollection", value == "1" || value.lowercased() == "true" { propstat?.isCollection = true }
            } else if name.namespace == WebDAVAPI.ownCloudNamespace, name.local == "checksum", !value.isEmpty {
                propstat?.checksums.append(value)
            } else if isDAV(name, "status"), isDAV(parent, "propstat") {
                propstatStatus = WebDAVAPI.statusCode(value)
            }
        }
        if isDAV(name, "propstat"), let ps = propstat {
            propstats.append((ps, propstatStatus))
            propstat = nil
        } else if current != nil, let parent, isDAV(parent, "response") {
            if isDAV(name, "href"), current?.href.isEmpty == true { current?.href = value }
            if isDAV(name, "status") { responseStatus = WebDAVAPI.statusCode(value) }
        }
        if isDAV(name, "response"), var entry = current {
            current = nil
            defer { propstats = [] }
            if let s = responseStatus, !(200..<300).contains(s) { return }
            guard !entry.href.isEmpty else { return }
            var anyOK = propstats.isEmpty
            for (ps, status) in propstats where status.map({ (200..<300).contains($0) }) ?? true {
                anyOK = true
                entry.isCollection = entry.isCollection || ps.isCollection
                entry.contentLength = ps.contentLength ?? entry.contentLength
                entry.lastModified = ps.lastModified ?? entry.lastModified
                entry.etag = ps.etag ?? entry.etag
                entry.contentType = ps.contentType ?? entry.contentType
                entry.checksums += ps.checksums
            }
            if anyOK { try onEntry(entry) }
        }
    }
}
