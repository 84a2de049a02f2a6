import CXML
import Foundation

/// Receives the events of a namespace-aware streaming parse, in document order. A thrown error stops the
/// parse; ``XMLPushParser/feed(_:)`` or ``XMLPushParser/finish()`` then rethrows it unchanged.
public protocol XMLEventHandler: AnyObject {
    /// An element opens. `namespace` is the resolved namespace URI ("" when none), `name` the local name.
    func startElement(namespace: String, name: String, attributes: [XMLAttribute]) throws
    /// The element opened last closes.
    func endElement(namespace: String, name: String) throws
    /// Character data (text or CDATA) of the innermost open element, already unescaped, as UTF-8. One text
    /// node may arrive in several calls.
    func characters(_ utf8: UnsafeRawBufferPointer) throws
}

/// An attribute of a started element.
public struct XMLAttribute: Sendable, Hashable {
    public var namespace: String
    public var name: String
    public var value: String
}

/// What a parse refuses to go beyond. Exceeding one is an ``XMLError`` naming it.
public struct XMLLimits: Sendable, Hashable {
    /// Bytes of the whole document (default 32 MiB, the cap on a WebDAV answer).
    public var maxDocumentBytes: Int
    /// Elements open at once (default 64; RFC 4918 documents nest 6 deep).
    public var maxDepth: Int

    public init(maxDocumentBytes: Int = 32 << 20, maxDepth: Int = 64) {
        self.maxDocumentBytes = maxDocumentBytes
        self.maxDepth = maxDepth
    }
}

/// Why a document was refused: not well-formed, a DTD (never needed by the protocols we speak, and the door
/// to entity expansion bombs and external entities), or a limit.
public struct XMLError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// 1-based position in the document, 0 when unknown.
    public var line: Int
    public var column: Int

    public init(_ message: String, line: Int = 0, column: Int = 0) {
        self.message = message
        self.line = line
        self.column = column
    }

    public var description: String { line > 0 ? "\(message) (line \(line), column \(column))" : message }
}

/// libxml2's push parser with a SAX2 handler: bytes go in as they arrive (``feed(_:)``), events come out at
/// once, and memory stays flat however long the document is — nothing is built but what the handler keeps.
/// Documents with a DOCTYPE are refused; no entity other than the five predefined ones and character
/// references exists, no network or file is ever read (`XML_PARSE_NONET`). Not thread-safe: one parse, one
/// thread at a time. The corresponding C functions are `xmlCreatePushParserCtxt`, `xmlParseChunk`.
public final class XMLPushParser {
    private let box: ParserBox
    private let context: xmlParserCtxtPtr
    private var fed = 0
    private var finished = false

    /// Throws when libxml2 cannot allocate a parser context.
    public init(handler: any XMLEventHandler, limits: XMLLimits = XMLLimits()) throws(XMLError) {
        _ = libxml2Initialized
        let box = ParserBox(handler: handler, limits: limits)
        var sax = xmlSAXHandler()
        sax.initialized = UInt32(XML_SAX2_MAGIC)
        sax.startElementNs = { ctx, localname, _, uri, _, _, count, _, attributes in
            guard let ctx else { return }
            Unmanaged<ParserBox>.fromOpaque(ctx).takeUnretainedValue()
                .start(localname: localname, uri: uri, count: Int(count), attributes: attributes)
        }
        sax.endElementNs = { ctx, localname, _, uri in
            guard let ctx else { return }
            Unmanaged<ParserBox>.fromOpaque(ctx).takeUnretainedValue().end(localname: localname, uri: uri)
        }
        sax.characters = { ctx, bytes, length in
            guard let ctx else { return }
            Unmanaged<ParserBox>.fromOpaque(ctx).takeUnretainedValue().text(bytes, Int(length))
        }
        sax.cdataBlock = sax.characters
        sax.internalSubset = { ctx, _, _, _ in
            guard let ctx else { return }
            Unmanaged<ParserBox>.fromOpaque(ctx).takeUnretainedValue()
                .fail(XMLError("the document has a DOCTYPE; DTDs and entities are not accepted"))
        }
        sax.serror = { ctx, error in
            guard let ctx, let error else { return }
            Unmanaged<ParserBox>.fromOpaque(ctx).takeUnretainedValue().record(error.pointee)
        }
        let opaque = Unmanaged.passUnretained(box).toOpaque()
        guard let context = xmlCreatePushParserCtxt(&sax, opaque, nil, 0, nil) else {
            throw XMLError("libxml2 could not create a parser (out of memory?)")
        }
        // Huge: text nodes and depth beyond libxml2's defaults are ours to bound (``XMLLimits``); no network.
        xmlCtxtUseOptions(context, Int32(XML_PARSE_NONET.rawValue | XML_PARSE_HUGE.rawValue | XML_PARSE_NOCDATA.rawValue))
        box.context = context
        self.box = box
        self.context = context
    }

    deinit { xmlFreeParserCtxt(context) }

    /// Parses the next bytes of the document. Throws the handler's error, a well-formedness error, or a limit.
    public func feed(_ bytes: UnsafeRawBufferPointer) throws {
        guard !finished else { throw XMLError("bytes fed after the end of the document") }
        if bytes.isEmpty { return }
        fed += bytes.count
        if fed > box.limits.maxDocumentBytes {
            finished = true
            throw XMLError("the document is over \(box.limits.maxDocumentBytes) bytes")
        }
        var at = 0
        while at < bytes.count {
            // xmlParseChunk takes an Int32 length: feed at most 1 MiB per call.
            let n = min(bytes.count - at, 1 << 20)
            let base = bytes.baseAddress.map { $0.advanced(by: at).assumingMemoryBound(to: CChar.self) }
            let status = xmlParseChunk(context, base, Int32(n), 0)
            try check(status)
            at += n
        }
    }

    /// Feeds the bytes of `data` (any contiguous collection of bytes).
    public func feed(_ data: some ContiguousBytes) throws {
        try data.withUnsafeBytes { try feed($0) }
    }

    /// Ends the document: throws when it is incomplete (unclosed elements, no root) or not well-formed.
    public func finish() throws {
        guard !finished else { return }
        finished = true
        let status = xmlParseChunk(context, nil, 0, 1)
        try check(status)
        guard box.sawRoot else { throw XMLError("the document is empty") }
    }

    private func check(_ status: Int32) throws {
        if let failure = box.failure {
            finished = true
            throw failure
        }
        if status != 0 || context.pointee.wellFormed == 0 {
            finished = true
            throw box.lastError ?? XMLError("malformed XML (libxml2 error \(status))")
        }
    }
}

/// Once per process, before any parser: libxml2's global initialisation (thread safety of its globals).
private let libxml2Initialized: Void = { xmlInitParser() }()

/// The state C callbacks reach through `userData`.
private final class ParserBox {
    let handler: any XMLEventHandler
    let limits: XMLLimits
    var context: xmlParserCtxtPtr?
    var depth = 0
    var sawRoot = false
    /// The first error the handler threw or a limit hit; the parse was stopped.
    var failure: (any Error)?
    /// libxml2's last structured error.
    var lastError: XMLError?

    init(handler: any XMLEventHandler, limits: XMLLimits) {
        self.handler = handler
        self.limits = limits
    }

    func fail(_ error: any Error) {
        if failure == nil { failure = error }
        if let context { xmlStopParser(context) }
    }

    func record(_ error: xmlError) {
        guard error.level == XML_ERR_ERROR || error.level == XML_ERR_FATAL else { return }
        var message = error.message.map { String(cString: $0) } ?? "malformed XML"
        while message.last == "\n" || message.last == " " { message.removeLast() }
        if lastError == nil { lastError = XMLError(message, line: Int(error.line), column: Int(error.int2)) }
    }

    func start(localname: UnsafePointer<xmlChar>?, uri: UnsafePointer<xmlChar>?, count: Int,
               attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?) {
        guard failure == nil else { return }
        depth += 1
        sawRoot = true
        if depth > limits.maxDepth {
            fail(XMLError("elements nest deeper than \(limits.maxDepth) levels", line: line, column: 0))
            return
        }
        var parsed: [XMLAttribute] = []
        if count > 0, let attributes {
            parsed.reserveCapacity(count)
            for i in 0 ..< count {
                // Five pointers per attribute: localname, prefix, URI, value start, value end.
                let base = attributes + 5 * i
                var value = ""
                if let start = base[3], let end = base[4] {
                    value = String(decoding: UnsafeBufferPointer(start: start, count: end - start), as: UTF8.self)
                    // Without entity substitution libxml2 hands every '&' of an attribute value over as "&#38;"
                    // (and nothing else that way), so this undoes exactly that.
                    if value.contains("&#38;") { value = value.replacingOccurrences(of: "&#38;", with: "&") }
                }
                parsed.append(XMLAttribute(namespace: string(base[2]), name: string(base[0]), value: value))
            }
        }
        do {
            try handler.startElement(namespace: string(uri), name: string(localname), attributes: parsed)
        } catch {
            fail(error)
        }
    }

    func end(localname: UnsafePointer<xmlChar>?, uri: UnsafePointer<xmlChar>?) {
        guard failure == nil else { return }
        depth -= 1
        do {
            try handler.endElement(namespace: string(uri), name: string(localname))
        } catch {
            fail(error)
        }
    }

    func text(_ bytes: UnsafePointer<xmlChar>?, _ length: Int) {
        guard failure == nil, let bytes, length > 0 else { return }
        do {
            try handler.characters(UnsafeRawBufferPointer(start: bytes, count: length))
        } catch {
            fail(error)
        }
    }

    private var line: Int { context.map { Int(xmlSAX2GetLineNumber($0)) } ?? 0 }

    private func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer)
    }
}
