import CloudSyncCache
import CloudSyncCore
import CloudSyncXML
import Foundation

/// What a `/dav/...` target names. Folders are synthesised from the index paths: `/dav/` lists the remotes,
/// `/dav/<remote>/` a remote's root; a trailing `/` is optional.
enum DAVTarget: Equatable {
    case root
    /// A file or folder of `remote`; `path` is "" for the remote's root.
    case item(remote: String, path: String)
    /// 400: a malformed escape.
    case malformed
    /// 404 without touching the index (traversal, NUL, control characters, over-long, empty segments).
    case refused

    /// Parses the encoded path after `/dav` (starting with `/`, or empty), with the rules of `/tracks/` paths.
    static func parse(afterPrefix encoded: Substring) -> DAVTarget {
        var rest = encoded
        if rest.hasPrefix("/") { rest = rest.dropFirst() }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.isEmpty { return .root }
        // A remote's root is checked as the remote segment of a track path (any valid leaf will do).
        let isRemoteRoot = !rest.contains("/")
        switch TrackPaths.parse(afterPrefix: isRemoteRoot ? rest + "/x" : rest) {
        case .track(let remote, _) where isRemoteRoot: return .item(remote: remote, path: "")
        case .track(let remote, let path): return .item(remote: remote, path: path)
        case .malformed: return .malformed
        case .refused: return .refused
        }
    }
}

/// A property name: namespace URI and local name.
struct DAVName: Hashable, Sendable {
    var namespace: String
    var name: String

    static let dav = "DAV:"
    static let resourcetype = DAVName(namespace: dav, name: "resourcetype")
    static let displayname = DAVName(namespace: dav, name: "displayname")
    static let getcontentlength = DAVName(namespace: dav, name: "getcontentlength")
    static let getlastmodified = DAVName(namespace: dav, name: "getlastmodified")
    static let getcontenttype = DAVName(namespace: dav, name: "getcontenttype")
    static let getetag = DAVName(namespace: dav, name: "getetag")
    static let creationdate = DAVName(namespace: dav, name: "creationdate")
}

/// What a PROPFIND asks for (RFC 4918 §9.1): every live property, their names, or a list.
enum PropfindRequest: Equatable {
    case allprop
    case propname
    case prop([DAVName])

    /// Parses a PROPFIND body; an empty body means `allprop`. Throws `XMLError` for a document that is not
    /// well-formed or not a `DAV:propfind`.
    static func parse(_ body: [UInt8]) throws -> PropfindRequest {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) { return .allprop }
        let handler = PropfindHandler()
        let parser = try XMLPushParser(handler: handler, limits: XMLLimits(maxDocumentBytes: 1 << 20, maxDepth: 16))
        try parser.feed(body)
        try parser.finish()
        guard handler.sawPropfind else { throw XMLError("the body is not a DAV:propfind document") }
        switch handler.kind {
        case .propname: return .propname
        case .prop: return .prop(handler.names)
        case .allprop, nil: return .allprop
        }
    }
}

/// Collects a `<D:propfind>`: its first child decides the kind; the children of `<D:prop>` are the names.
private final class PropfindHandler: XMLEventHandler {
    enum Kind { case allprop, propname, prop }
    var kind: Kind?
    var names: [DAVName] = []
    var sawPropfind = false
    private var depth = 0

    func startElement(namespace: String, name: String, attributes: [XMLAttribute]) throws {
        depth += 1
        switch depth {
        case 1:
            guard namespace == DAVName.dav, name == "propfind" else { throw XMLError("expected DAV:propfind, got \(name)") }
            sawPropfind = true
        case 2 where namespace == DAVName.dav && kind == nil:
            switch name {
            case "allprop": kind = .allprop
            case "propname": kind = .propname
            case "prop": kind = .prop
            default: break
            }
        case 3 where kind == .prop:
            if !names.contains(DAVName(namespace: namespace, name: name)) { names.append(DAVName(namespace: namespace, name: name)) }
        default:
            break
        }
    }

    func endElement(namespace: String, name: String) throws { depth -= 1 }
    func characters(_ utf8: UnsafeRawBufferPointer) throws {}
}

/// One resource of a listing, with its live properties (computed only when asked for).
struct DAVResource {
    /// The percent-encoded absolute path (`/dav/...`, collections end with `/`).
    var href: String
    var displayName: String
    var modified: Date
    /// The track, for files; nil for collections.
    var file: RemoteFile?
    var isCollection: Bool { file == nil }

    /// The live properties this resource has, in a stable order (`allprop` and `propname`).
    static let fileProperties: [DAVName] = [.resourcetype, .displayname, .getcontentlength, .getlastmodified, .getcontenttype,
                                            .getetag, .creationdate]
    static let collectionProperties: [DAVName] = [.resourcetype, .displayname, .getlastmodified, .creationdate]

    var propertyNames: [DAVName] { isCollection ? Self.collectionProperties : Self.fileProperties }

    /// The XML content of live property `name`, or nil when this resource does not have it.
    func value(of name: DAVName) -> String? {
        guard name.namespace == DAVName.dav else { return nil }
        switch name.name {
        case "resourcetype": return isCollection ? "<D:collection/>" : ""
        case "displayname": return Markup.escape(displayName)
        case "getcontentlength": return file.map { String($0.size) }
        case "getlastmodified": return TrackMetadata.httpDate(modified)
        case "getcontenttype": return file.map { Markup.escape(TrackMetadata.contentType(for: $0)) }
        case "getetag": return file.map { Markup.escape(TrackMetadata.etag(for: $0)) }
        case "creationdate": return TrackMetadata.iso8601(modified)
        default: return nil
        }
    }

    static func collection(href: String, name: String, modified: Date) -> DAVResource {
        DAVResource(href: href, displayName: name, modified: modified, file: nil)
    }

    static func file(_ entry: CacheEntryInfo) -> DAVResource {
        let file = entry.file
        let bytes = file.path.utf8
        let leaf = bytes.lastIndex(of: UInt8(ascii: "/")).map { String(decoding: bytes[bytes.index(after: $0)...], as: UTF8.self) } ?? file.path
        return DAVResource(href: DAVPaths.href(remote: entry.remote, path: file.path, collection: false), displayName: leaf,
                           modified: file.modified, file: file)
    }
}

enum DAVPaths {
    static let prefix = "/dav/"

    /// `/dav/<remote>/<path>` percent-encoded per RFC 3986 (unreserved characters only, `/` kept in the path);
    /// collections end with `/`.
    static func href(remote: String, path: String, collection: Bool) -> String {
        var out = prefix + PercentEncoding.encode(remote) + "/"
        if !path.isEmpty { out += PercentEncoding.encode(path, .path) + (collection ? "/" : "") }
        return out
    }
}

/// A 207 Multi-Status document (RFC 4918 §13): one `<D:response>` per resource, found properties in a
/// `HTTP/1.1 200 OK` propstat (exactly that status line: Kodi accepts no other), unknown ones in a 404 one.
struct Multistatus {
    private(set) var bytes: [UInt8] = Array("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:multistatus xmlns:D=\"DAV:\">\n".utf8)

    mutating func append(_ resource: DAVResource, request: PropfindRequest) {
        var out = "<D:response><D:href>\(resource.href)</D:href>"
        switch request {
        case .allprop:
            out += "<D:propstat><D:prop>"
            for name in resource.propertyNames { out += Self.element(name, resource.value(of: name) ?? "") }
            out += "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
        case .propname:
            out += "<D:propstat><D:prop>"
            for name in resource.propertyNames { out += Self.element(name, "") }
            out += "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
        case .prop(let names):
            var found = "", missing = ""
            for name in names {
                if let value = resource.value(of: name) {
                    found += Self.element(name, value)
                } else {
                    missing += Self.element(name, "")
                }
            }
            if !found.isEmpty { out += "<D:propstat><D:prop>\(found)</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>" }
            if !missing.isEmpty {
                out += "<D:propstat><D:prop>\(missing)</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>"
            }
        }
        out += "</D:response>\n"
        bytes.append(contentsOf: out.utf8)
    }

    mutating func finish() -> [UInt8] {
        bytes += Array("</D:multistatus>\n".utf8)
        return bytes
    }

    /// `<D:name>value</D:name>`, or the element in its own namespace (prefix `X`) when it is not DAV's.
    static func element(_ name: DAVName, _ value: String) -> String {
        if name.namespace == DAVName.dav {
            return value.isEmpty ? "<D:\(name.name)/>" : "<D:\(name.name)>\(value)</D:\(name.name)>"
        }
        let ns = Markup.escape(name.namespace)
        return value.isEmpty ? "<X:\(name.name) xmlns:X=\"\(ns)\"/>" : "<X:\(name.name) xmlns:X=\"\(ns)\">\(value)</X:\(name.name)>"
    }
}

extension TrackServer {
    /// Methods of the read-only WebDAV face.
    static let davAllow = "OPTIONS, GET, HEAD, PROPFIND"

    /// `/dav/...`: OPTIONS, PROPFIND (Depth 0 and 1), GET/HEAD of files as `/tracks/` does; every method that
    /// writes gets 405 and changes nothing.
    func dav(_ io: ConnectionIO, _ head: RequestHead, body: [UInt8], encoded: Substring, state: inout ConnectionState) -> Outcome {
        let target = DAVTarget.parse(afterPrefix: encoded)
        switch head.method {
        case "OPTIONS":
            return respond(io, head, status: 200, body: [], type: nil,
                           extra: [("DAV", "1"), ("Allow", Self.davAllow), ("MS-Author-Via", "DAV")])
        case "PROPFIND", "GET", "HEAD":
            break
        default:
            return respond(io, head, status: 405, text: "this WebDAV face is read-only: \(head.method) is not allowed",
                           extra: [("Allow", Self.davAllow)])
        }
        let remote: String, path: String
        switch target {
        case .malformed: return respond(io, head, status: 400, text: "malformed percent-encoding in the path")
        case .refused: return respond(io, head, status: 404, text: "no such file or folder")
        case .root:
            if head.method == "PROPFIND" { return propfindRoot(io, head, body: body) }
            return respond(io, head, status: 405, text: "a folder: list it with PROPFIND", extra: [("Allow", Self.davAllow)])
        case .item(let r, let p): (remote, path) = (r, p)
        }
        do {
            if !path.isEmpty, let entry = try cache.entry(remote: remote, path: path) {
                if head.method == "PROPFIND" {
                    return propfind(io, head, body: body, self: .file(entry), children: [])
                }
                return track(io, head, remote: remote, path: path, state: &state)
            }
            let listing = try cache.folder(remote: remote, path: path)
            let knownRemote = path.isEmpty && (sources[remote] != nil || unavailable[remote] != nil)
            guard listing != nil || knownRemote else {
                if head.method != "PROPFIND", !path.isEmpty,
                   let moved = movedRedirect(io, head, remote: remote, path: path, url: { DAVPaths.href(remote: $0, path: $1, collection: false) }) {
                    return moved
                }
                return respond(io, head, status: 404, text: "no such file or folder in the index")
            }
            guard head.method == "PROPFIND" else {
                return respond(io, head, status: 405, text: "a folder: list it with PROPFIND", extra: [("Allow", Self.davAllow)])
            }
            let folder = listing ?? FolderListing(files: [], folders: [])
            let newest = (folder.files.map { $0.file.modified } + folder.folders.map { $0.modified }).max() ?? Date(timeIntervalSince1970: 0)
            let name = path.isEmpty ? remote : String(path.split(separator: "/").last ?? "")
            let me = DAVResource.collection(href: DAVPaths.href(remote: remote, path: path, collection: true), name: name, modified: newest)
            var children: [DAVResource] = []
            if Self.depth(head) == "1" {
                children.reserveCapacity(folder.folders.count + folder.files.count)
                for sub in folder.folders {
                    let subpath = path.isEmpty ? sub.name : path + "/" + sub.name
                    children.append(.collection(href: DAVPaths.href(remote: remote, path: subpath, collection: true), name: sub.name,
                                                modified: sub.modified))
                }
                for entry in folder.files { children.append(.file(entry)) }
            }
            return propfind(io, head, body: body, self: me, children: children)
        } catch {
            logger.warning("serve: \(head.method) \(Self.loggable(head.path)): \(error)")
            return respond(io, head, status: 500, text: "the cache index could not be read; see the server's log")
        }
    }

    /// The Depth header: "0", "1", or "infinity" (also when absent, RFC 4918 §9.1).
    static func depth(_ head: RequestHead) -> String {
        guard let value = head.header("Depth")?.lowercased() else { return "infinity" }
        return value
    }

    private func propfindRoot(_ io: ConnectionIO, _ head: RequestHead, body: [UInt8]) -> Outcome {
        do {
            var remotes = Set(try cache.indexedRemotes())
            remotes.formUnion(sources.keys)
            remotes.formUnion(unavailable.keys)
            let me = DAVResource.collection(href: DAVPaths.prefix, name: "cloudsync", modified: Date(timeIntervalSince1970: 0))
            var children: [DAVResource] = []
            if Self.depth(head) == "1" {
                for remote in remotes.sorted() {
                    children.append(.collection(href: DAVPaths.href(remote: remote, path: "", collection: true), name: remote,
                                                modified: Date(timeIntervalSince1970: 0)))
                }
            }
            return propfind(io, head, body: body, self: me, children: children)
        } catch {
            logger.warning("serve: PROPFIND /dav/: \(error)")
            return respond(io, head, status: 500, text: "the cache index could not be read; see the server's log")
        }
    }

    private func propfind(_ io: ConnectionIO, _ head: RequestHead, body: [UInt8], self resource: DAVResource,
                          children: [DAVResource]) -> Outcome {
        switch Self.depth(head) {
        case "0", "1": break
        case "infinity":
            // As Apache does: listing a whole library in one answer is refused.
            let error = Array("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:error xmlns:D=\"DAV:\"><D:propfind-finite-depth/></D:error>\n".utf8)
            return respond(io, head, status: 403, body: error, type: "application/xml; charset=utf-8")
        default:
            return respond(io, head, status: 400, text: "Depth must be 0, 1 or infinity")
        }
        let request: PropfindRequest
        do {
            request = try PropfindRequest.parse(body)
        } catch {
            return respond(io, head, status: 400, text: "the PROPFIND body is not a DAV:propfind document: \(error)")
        }
        var document = Multistatus()
        document.append(resource, request: request)
        for child in children { document.append(child, request: request) }
        return respond(io, head, status: 207, body: document.finish(), type: "application/xml; charset=utf-8")
    }
}
